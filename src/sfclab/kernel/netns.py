"""Network namespaces, made and entered without one process per object.

A namespace is a bind mount of ``/proc/thread-self/ns/net`` on ``/run/netns/NAME``, exactly as
iproute2 makes them, so ``ip netns exec NAME`` works on ours.  We make it with ``unshare(2)`` in
the calling thread and go back with ``setns(2)``; a netlink socket opened while inside stays bound
to that namespace, which is how :func:`iproute` hands out a per-namespace ``IPRoute``.

Ownership mark: :func:`create` writes the namespace's own name as the alias of its ``lo``
inside the new namespace, before the namespace is bind-mounted (so no namespace of ours is ever
visible without it).  :func:`marked` reads it back without side effects (an ``RTM_GETLINK``
from a thread that entered the namespace): only a namespace made by :func:`create` under that
name carries it; a journal line, a namespace made by hand under the same name or a bind mount
of another namespace (``/proc/self/ns/net``) does not.  The root namespace (PID 1's) and the
caller's own are never reported as marked.

Processes inside a namespace are found through ``/proc/PID/ns/net`` (device and inode equal to
the bind mount's), never by name, and ended through a pidfd opened first and checked after it
was opened (:func:`end_processes`), so a PID reused meanwhile by another process is never
signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import functools
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import ToolError
from . import nlbatch

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
            _write_mark(name)
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


#: ifindex of ``lo``, the first device of every namespace
LO_INDEX = 1
RTM_GETLINK = 18


def _write_mark(name: str) -> None:
    """Set the alias of ``lo`` in the calling thread's (new) namespace to ``name``."""
    batch = nlbatch.Batch()
    batch.link(LO_INDEX, f"mark on {name}/lo", up=False, alias=name)
    sock = nlbatch.open_socket()
    try:
        batch.send(sock)
    finally:
        sock.close()


def _lo_alias() -> str | None:
    """The alias of ``lo`` in the calling thread's namespace (None: none)."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                       nlbatch.NETLINK_ROUTE) as s:
        s.bind((0, 0))
        body = struct.pack("BxHiII", socket.AF_UNSPEC, 0, LO_INDEX, 0, 0)
        s.send(struct.pack("IHHII", 16 + len(body), RTM_GETLINK, nlbatch.NLM_F_REQUEST, 1, 0)
               + body)
        data = s.recv(1 << 16)
    length, kind = struct.unpack_from("IH", data, 0)
    if kind != nlbatch.RTM_NEWLINK:
        return None
    off = 16 + 16  # nlmsghdr, ifinfomsg
    while off + 4 <= length:
        alen, akind = struct.unpack_from("HH", data, off)
        if alen < 4:
            break
        if akind == nlbatch.IFLA_IFALIAS:
            return data[off + 4:off + alen].split(b"\0", 1)[0].decode(errors="replace")
        off += (alen + 3) & ~3
    return None


def _ns_inode(p: str) -> int | None:
    try:
        return os.stat(p).st_ino
    except OSError:
        return None


#: what :func:`marked` says of the empty file :func:`create` makes before it mounts the
#: namespace there (a process killed in between leaves it)
PLACEHOLDER = "an empty file where a namespace was being made"


def remove_placeholder(name: str) -> bool:
    """Unlink ``/run/netns/NAME`` if it is (still) an empty regular file, not a namespace: what
    a :func:`create` killed before its bind mount leaves.  True if one was removed."""
    p = path(name)
    try:
        st = os.lstat(p)
        nsfs = os.stat("/proc/self/ns/net")
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != 0 or st.st_dev == nsfs.st_dev:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(p)
    return True


def marked(name: str) -> tuple[int | None, str]:
    """``(inode, "")`` if ``/run/netns/NAME`` is a namespace that :func:`create` made under
    that name (its ``lo`` carries the name as alias); else ``(None, why not)``.  Reads only:
    the path is opened without following a symbolic link, a file that is not a namespace is
    never entered, and the root and the caller's own namespace are refused."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        return None, "not a plain namespace name"
    p = path(name)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, "absent"
    except OSError as e:
        return None, f"cannot be opened: {e.strerror}"
    try:
        st = os.fstat(fd)
        nsfs = os.stat("/proc/self/ns/net")
        if st.st_dev != nsfs.st_dev:
            if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                return None, PLACEHOLDER
            return None, f"{p} is not a network namespace"
        if st.st_ino in (_ns_inode("/proc/1/ns/net"), _ns_inode("/proc/thread-self/ns/net")):
            return None, "it is the root namespace (or sfclab's own)"
        with _home():
            if _lib().setns(fd, CLONE_NEWNET) != 0:
                return None, f"{p} is not a network namespace"
            alias = _lo_alias()
    finally:
        os.close(fd)
    if alias != name:
        return None, ("it carries no mark of sfclab (made by something else)" if not alias
                      else f"its mark is {alias!r}, not {name!r}")
    return st.st_ino, ""


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with this thread inside namespace ``name`` (sockets opened stay there)."""
    fd = os.open(path(name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        with entered_fd(fd, name):
            yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def entered_fd(fd: int, what: str) -> Iterator[None]:
    """:func:`entered` for the namespace behind ``fd`` (``what`` names it in an error)."""
    with _home():
        _check(_lib().setns(fd, CLONE_NEWNET), f"setns into {what}")
        yield


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


def pids_in_inodes(inodes: dict[int, str]) -> dict[int, str]:
    """Map each PID whose network namespace inode is a key of ``inodes`` to its value (the
    namespace's name); the root namespace (PID 1's) is never one of them."""
    wanted = {i: n for i, n in inodes.items() if i != root_inode()}
    if not wanted:
        return {}
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        ino = _ns_inode(f"/proc/{entry}/ns/net")
        if ino is not None and ino in wanted:
            found[int(entry)] = wanted[ino]
    return found


def root_inode() -> int | None:
    """The inode of the root network namespace (PID 1's)."""
    return _ns_inode("/proc/1/ns/net")


def in_namespace(pid: int, inode: int) -> bool:
    """True if process ``pid`` runs in the network namespace with ``inode``."""
    return _ns_inode(f"/proc/{pid}/ns/net") == inode


def listening(pid: int) -> set[int]:
    """The TCP ports on which process ``pid`` itself holds a listening socket, in its own
    network namespace (``/proc/PID/net/tcp{,6}``, whose sockets in state LISTEN are matched
    by inode against the process's descriptors): a port another program holds is not its
    own.  Empty once it is gone."""
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(int(link[8:-1]))
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == "0A" and int(cols[9]) in inodes:
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
        except OSError:  # gone, or no IPv6 in this kernel
            continue
    return ports


def pids_in(names: list[str]) -> dict[int, str]:
    """Map each PID whose network namespace is one of ``names`` to that namespace's name."""
    wanted: dict[int, str] = {}
    for n in names:
        try:
            wanted[os.stat(path(n)).st_ino] = n
        except FileNotFoundError:
            continue
    return pids_in_inodes(wanted)


def end_processes(pids: list[int], grace: float = 1.0, *,
                  owned: Callable[[int], bool] | None = None) -> list[int]:
    """SIGTERM each PID, wait up to ``grace`` seconds, then SIGKILL the rest.  Returns the PIDs
    ended.

    Each process is held by a pidfd before anything is sent, and ``owned(pid)`` (when given)
    is asked only after the pidfd was opened: a PID that was reused by another process before
    the pidfd was opened fails the check (it is that other process), and one reused after it
    is never reached (signals go through the pidfd, to the process it was opened on)."""
    held: dict[int, int] = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            continue
        if owned is not None and not owned(pid):
            os.close(fd)
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        except ProcessLookupError:
            os.close(fd)
            continue
        held[pid] = fd
    ended = list(held)
    try:
        deadline = time.monotonic() + grace
        alive = dict(held)
        while alive and time.monotonic() < deadline:
            alive = {p: fd for p, fd in alive.items() if not _exited(p, fd)}
            if alive:
                time.sleep(0.02)
        for fd in alive.values():
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        for fd in held.values():
            os.close(fd)
    return ended


def _exited(pid: int, fd: int) -> bool:
    """The process behind pidfd ``fd`` has exited (a zombie child of ours is reaped)."""
    if select.select([fd], [], [], 0)[0]:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return True
    return not _alive(pid)


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


def delete(name: str, inode: int | None = None) -> bool:
    """Unmount and remove namespace ``name``; the kernel frees its interfaces.  False if absent,
    or (``inode`` given: the one :func:`marked` checked) if it is no longer that namespace."""
    p = path(name)
    if not os.path.exists(p):
        return False
    if inode is not None and _ns_inode(p) != inode:
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
