"""Network namespaces, made and entered without one process per object.

A namespace is a bind mount of ``/proc/thread-self/ns/net`` on ``/run/netns/NAME``, exactly as
iproute2 makes them, so ``ip netns exec NAME`` works on ours.  We make it with ``unshare(2)`` in
the calling thread and go back with ``setns(2)``; a netlink socket opened while inside stays bound
to that namespace, which is how :func:`iproute` hands out a per-namespace ``IPRoute``.

Processes inside a namespace are found through ``/proc/PID/ns/net`` (device and inode equal to
the bind mount's), never by name.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import ToolError

if TYPE_CHECKING:
    from pyroute2 import IPRoute


NETNS_RUN_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MS_REC = 16384
MS_SHARED = 1 << 20
MNT_DETACH = 2



@functools.cache
def _lib() -> ctypes.CDLL:
    """libc, loaded the first time a namespace is made or entered (not by validation)."""
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def path(name: str) -> str:
    return os.path.join(NETNS_RUN_DIR, name)


def exists(name: str) -> bool:
    return os.path.exists(path(name))


_run_dir_ready = False


def _ensure_run_dir() -> None:
    """Make /run/netns a shared mount of its own, as ``ip netns add`` does.

    Making it shared fails with EINVAL only while it is not a mount point; only then is it
    bind-mounted onto itself (so repeated calls never stack mounts).
    """
    global _run_dir_ready
    if _run_dir_ready:
        return
    os.makedirs(NETNS_RUN_DIR, exist_ok=True)
    d = NETNS_RUN_DIR.encode()
    if _lib().mount(b"", d, b"none", MS_SHARED | MS_REC, None) != 0:
        if ctypes.get_errno() != _errno.EINVAL:
            _check(-1, f"mount --make-shared {NETNS_RUN_DIR}")
        _check(_lib().mount(d, d, b"none", MS_BIND | MS_REC, None), f"mount --bind {NETNS_RUN_DIR}")
        _check(_lib().mount(b"", d, b"none", MS_SHARED | MS_REC, None),
               f"mount --make-shared {NETNS_RUN_DIR}")
    _run_dir_ready = True


@contextlib.contextmanager
def _home() -> Iterator[int]:
    """Yield an fd on this thread's current namespace and always return to it."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        yield home
    finally:
        try:
            _check(_lib().setns(home, CLONE_NEWNET), "setns back to the original namespace")
        finally:
            os.close(home)


def create(name: str, sysctls: dict[str, str] | None = None, *,
           iproute: bool = True) -> "IPRoute | None":
    """Create namespace ``name``, write ``sysctls`` (``net.*`` only) inside it, and return an
    ``IPRoute`` bound inside it (``None`` with ``iproute=False``: pyroute2 is not even loaded).

    Raises ``FileExistsError`` if the name is taken (we never adopt a namespace we did not make).
    """
    _ensure_run_dir()
    p = path(name)
    fd = os.open(p, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444)
    os.close(fd)
    try:
        with _home():
            _check(_lib().unshare(CLONE_NEWNET), f"unshare for namespace {name}")
            _check(_lib().mount(b"/proc/thread-self/ns/net", p.encode(), b"none", MS_BIND, None),
                   f"bind mount {p}")
            for key, value in (sysctls or {}).items():
                with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
                    f.write(value)
            if not iproute:
                return None
            from pyroute2 import IPRoute  # light start-up: pyroute2 only when asked for

            return IPRoute()
    except BaseException:
        with contextlib.suppress(OSError):
            _lib().umount2(p.encode(), MNT_DETACH)
            os.unlink(p)
        raise


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with this thread inside namespace ``name`` (sockets opened stay there)."""
    fd = os.open(path(name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        with _home():
            _check(_lib().setns(fd, CLONE_NEWNET), f"setns into {name}")
            yield
    finally:
        os.close(fd)


def iproute(name: str | None) -> "IPRoute":
    """An ``IPRoute`` bound to namespace ``name`` (the root namespace for ``None``)."""
    from pyroute2 import IPRoute  # light start-up: pyroute2 only when asked for

    if name is None:
        return IPRoute()
    with entered(name):
        return IPRoute()


def write_sysctl(name: str, key: str, value: str) -> None:
    """Write ``key`` (dotted, e.g. ``net.ipv4.ip_forward``) inside namespace ``name`` only."""
    if not key.startswith("net."):
        raise ValueError(f"only per-namespace net.* sysctls may be set, not {key}")
    with entered(name):
        with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
            f.write(value)


def read_sysctl(name: str, key: str) -> str:
    with entered(name):
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return f.read().strip()


def inode(name: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path(name))
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def pids_in(names: list[str]) -> dict[int, str]:
    """Map each PID whose network namespace is one of ``names`` to that namespace's name."""
    wanted: dict[int, str] = {}
    for n in names:
        st = None
        try:
            st = os.stat(path(n))
        except FileNotFoundError:
            continue
        wanted[st.st_ino] = n
    if not wanted:
        return {}
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if st.st_ino in wanted:
            found[int(entry)] = wanted[st.st_ino]
    return found


def end_processes(pids: list[int], grace: float = 1.0) -> list[int]:
    """SIGTERM each PID, wait up to ``grace`` seconds, then SIGKILL the rest.  Returns the PIDs ended."""
    ended = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            ended.append(pid)
    deadline = time.monotonic() + grace
    alive = list(ended)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        if alive:
            time.sleep(0.02)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return ended


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            return False
        return True
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def delete(name: str) -> bool:
    """Unmount and remove namespace ``name``; the kernel frees its interfaces.  False if absent."""
    p = path(name)
    if not os.path.exists(p):
        return False
    rc = _lib().umount2(p.encode(), MNT_DETACH)
    if rc != 0 and ctypes.get_errno() not in (_errno.EINVAL, _errno.ENOENT):
        _check(rc, f"umount {p}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(p)
    return True


def _preexec(name: str):
    def enter() -> None:
        fd = os.open(path(name), os.O_RDONLY)
        _check(_lib().setns(fd, CLONE_NEWNET), f"setns into {name}")
        os.close(fd)
    return enter


def popen(name: str, argv: list[str], **kw) -> subprocess.Popen:
    """Start ``argv`` inside namespace ``name``.  The caller owns the process and ends it by PID."""
    return subprocess.Popen(argv, preexec_fn=_preexec(name), **kw)


def run(name: str, argv: list[str], *, check: bool = True, timeout: float | None = None,
        input: str | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    """Run ``argv`` inside namespace ``name`` and wait; raise ``ToolError`` on failure if ``check``."""
    cp = subprocess.run(argv, preexec_fn=_preexec(name), capture_output=True, text=True,
                        timeout=timeout, input=input, env=env)
    if check and cp.returncode != 0:
        raise ToolError(argv, cp.returncode, cp.stderr or cp.stdout)
    return cp
