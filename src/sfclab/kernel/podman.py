"""Containers run by podman, driven through sfclab's own configuration.

**Objects.**  An *image* is an OCI image in the machine's image store (the one ``podman images``
lists: images a user built or loaded with podman are usable).  A *container* (:class:`Container`)
is one process tree started from an image, joined to a network namespace sfclab made (``--network
ns:<path>``), carrying labels (``key=value``) by which it is found again, and limits (``cpus``,
``memory``).  Each container has a *name* chosen by the caller (unique on the machine) and an
*ID* podman gives it (64 hex digits, never reused); everything after creation is done by ID.

**Configuration.**  podman is never driven through the machine's ``/etc``: every call runs with
``CONTAINERS_CONF`` pointing at a file this module writes (:data:`CONF_PATH`, from
:data:`CONF_TEXT`).  It sets what these machines need: the ``cgroupfs`` cgroup manager with
``runc`` (``crun`` refuses the hybrid cgroup layout), a file events log (no journald), and
default ulimits within the machine's hard limits (without the ``nproc`` entry runc fails
"error setting rlimit type 6").  The image store is the machine's default.

**Calls.**  :func:`run_argv` is the pure command line of :func:`run`; :func:`run` starts a
container and returns its ID; :func:`remove` removes containers by ID; :func:`find` lists
containers by label; :func:`inspect` reads each one's :class:`State` (status, exit code,
OOM-killed); :func:`image_exists`, :func:`image_config` and :func:`image_has_program` look at an
image without running it.  A failure raises :class:`~sfclab.errors.ToolError` with podman's
argv and stderr.  Nothing here decides *which* container may be removed: callers check the
labels (:mod:`sfclab.realize.ownership`).

**Parent death.**  :func:`run`'s podman is killed with the thread that started it (see there).

**Subreapers.**  podman leaves a monitor (``conmon``) behind that outlives the ``podman run``
process.  A caller that is a child subreaper (:mod:`sfclab.kernel.process`) would inherit it and
end it on exit, taking the container with it; so :func:`run` clears that attribute while any
podman it started runs (:func:`_not_subreaper`, counted over threads that start containers side
by side), and the monitor goes to PID 1 as podman intends.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import posixpath
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ToolError

PODMAN = "podman"
#: util-linux's setpriv: starts podman with a parent-death signal (see :func:`run`)
SETPRIV = "setpriv"
#: where sfclab's podman configuration is written (tmpfs: rewritten after a reboot)
CONF_PATH = Path("/run/sfclab/podman/containers.conf")
CONF_TEXT = """\
# Written by sfclab (sfclab.kernel.podman); used only by the podman commands sfclab runs.
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=4096:4096"]
# no network unless one is named: podman's own bridge would turn on the root namespace's
# ip_forward and add iptables chains there
netns = "none"

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
"""
#: how long one podman call may take before it is reported as hung
TIMEOUT_S = 60.0
#: seconds a container has to stop on SIGTERM before SIGKILL, when removed
STOP_TIMEOUT_S = 1
#: containers stopped and removed side by side by one podman call (each mostly waits)
MAX_WORKERS = 64
#: the PATH used to find a program in an image that declares none (OCI's usual default)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: symbolic links followed inside an image before giving up (the kernel's own limit)
MAX_LINKS = 40
#: the smallest memory limit podman accepts
MIN_MEMORY = 6 * 1024 * 1024

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


@dataclass(frozen=True)
class Bind:
    """A host path seen inside the container at ``target`` (read-only unless ``writable``)."""

    source: str
    target: str
    writable: bool = False


@dataclass(frozen=True)
class Container:
    """What :func:`run` starts: image, name, the namespace to join, labels, limits."""

    name: str
    image: str
    netns_path: str
    labels: dict[str, str] = field(default_factory=dict)
    cmd: tuple[str, ...] = ()          #: empty: the image's own command
    env: dict[str, str] = field(default_factory=dict)
    binds: tuple[Bind, ...] = ()
    cpus: float | None = None
    memory: int | None = None          #: bytes
    caps: tuple[str, ...] = ()         #: capabilities added (``NET_ADMIN``, ...)
    privileged: bool = False
    hostname: str | None = None


@dataclass(frozen=True)
class State:
    """A container as podman reports it."""

    id: str
    name: str
    image: str
    status: str                        #: created, running, exited, ...
    running: bool
    exit_code: int
    oom_killed: bool
    pid: int
    labels: dict[str, str]
    error: str = ""
    conmon_pid: int = 0                #: podman's monitor of the container (0: none)


def env() -> dict[str, str]:
    """The environment of every podman call: this process's, with sfclab's configuration."""
    if not CONF_PATH.exists() or CONF_PATH.read_text() != CONF_TEXT:
        CONF_PATH.parent.mkdir(parents=True, exist_ok=True)
        tmp = CONF_PATH.with_name(f".{CONF_PATH.name}.{os.getpid()}")
        tmp.write_text(CONF_TEXT)
        os.replace(tmp, CONF_PATH)
    return {**os.environ, "CONTAINERS_CONF": str(CONF_PATH)}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def is_subreaper() -> bool:
    """Whether this process is a child subreaper now."""
    flag = ctypes.c_int(0)
    _libc().prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_was = False


@contextlib.contextmanager
def _not_subreaper() -> Iterator[None]:
    """For the block, this process is no child subreaper; it is one again (if it was) once
    the last of the blocks that overlap in this process's threads has ended."""
    global _subreaper_users, _subreaper_was
    with _subreaper_lock:
        if _subreaper_users == 0:
            _subreaper_was = is_subreaper()
            if _subreaper_was:
                _libc().prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _subreaper_users += 1
    try:
        yield
    finally:
        with _subreaper_lock:
            _subreaper_users -= 1
            if _subreaper_users == 0 and _subreaper_was:
                _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _podman(args: list[str], *, check: bool = True, timeout: float = TIMEOUT_S,
            tied: bool = False) -> subprocess.CompletedProcess:
    argv = [PODMAN, *args]
    if tied:  # ends with the thread that started it (SIGKILL), never outlives a killed up
        argv = [SETPRIV, "--pdeathsig", "KILL", *argv]
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env(),
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolError(argv, -1, f"no answer in {timeout:.0f} s") from None
    except FileNotFoundError:
        raise ToolError(argv, 127, "podman is not installed (make setup installs it)") from None
    if check and cp.returncode != 0:
        raise ToolError(argv, cp.returncode, cp.stderr or cp.stdout)
    return cp


def available() -> bool:
    """Whether the podman program is installed."""
    import shutil

    return shutil.which(PODMAN) is not None


def _cpus(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".")


def run_argv(c: Container) -> list[str]:
    """The ``podman run`` arguments (without ``podman``) that start ``c`` detached."""
    args = ["run", "--detach", "--name", c.name, "--network", f"ns:{c.netns_path}",
            "--pull", "never", "--log-driver", "k8s-file"]
    for k, v in sorted(c.labels.items()):
        args += ["--label", f"{k}={v}"]
    if c.hostname:
        args += ["--hostname", c.hostname]
    for k, v in sorted(c.env.items()):
        args += ["--env", f"{k}={v}"]
    for b in c.binds:
        args += ["--volume", f"{b.source}:{b.target}:{'rw' if b.writable else 'ro'}"]
    if c.cpus is not None:
        args += ["--cpus", _cpus(c.cpus)]
    if c.memory is not None:
        # memory and swap together: the limit is what the processes may hold, swapped or not
        args += ["--memory", f"{c.memory}b", "--memory-swap", f"{c.memory}b"]
    if c.privileged:
        args.append("--privileged")
    for cap in c.caps:
        args += ["--cap-add", cap]
    args += ["--", c.image, *c.cmd]
    return args


def run(c: Container) -> str:
    """Start container ``c``; return its ID.  On failure podman's error is raised; a container
    podman created before failing is left for the caller to find by its labels.

    podman runs with a parent-death signal (SIGKILL, through ``setpriv``): if the thread that
    started it dies (``kill -9`` of ``sfclab up``), podman dies too, so no container is created
    after a ``down`` that followed has already looked for them."""
    with _not_subreaper():
        cp = _podman(run_argv(c), tied=True)
    return cp.stdout.strip().splitlines()[-1]


def remove_argv(ids: list[str], stop_timeout: int = STOP_TIMEOUT_S) -> list[str]:
    """The ``podman rm`` arguments (without ``podman``) that stop and remove ``ids`` side by
    side: one worker per container (at most :data:`MAX_WORKERS`), so their stop timeouts run
    together.  podman's default is three workers per CPU, which on two cores stops 20
    containers in four rounds of ``stop_timeout`` each."""
    workers = max(1, min(len(ids), MAX_WORKERS))
    return ["--max-workers", str(workers), "rm", "--force", "--ignore", "--time",
            str(stop_timeout), "--", *ids]


#: podman 4.3's ``rm`` of several containers at once can fail one of them with "removing
#: container root filesystem: 1 error occurred: unlinkat .../merged: device or resource busy"
#: (podman issue 10454: a parallel worker's mount of a shared layer is still being released);
#: the same ``rm`` of what is left, a moment later, succeeds.  Up to REMOVE_TRIES calls.
REMOVE_TRIES = 3
#: Seconds between them.
REMOVE_RETRY_S = 0.2
#: ToolError statuses that no second call mends: no answer in time (-1), no podman (127)
NOT_RETRIED = (-1, 127)


def remove(ids: list[str], stop_timeout: int = STOP_TIMEOUT_S) -> None:
    """Stop (each container's stop signal, SIGKILL after ``stop_timeout`` s) and remove the
    containers ``ids``, all in one call and side by side (:func:`remove_argv`); an ID already
    gone is no error.  If podman fails, the containers still there are removed again, up to
    :data:`REMOVE_TRIES` calls in all; the last failure is raised with podman's words.  No
    answer in time, or no podman, is raised at once (:data:`NOT_RETRIED`)."""
    left = list(ids)
    for attempt in range(1, REMOVE_TRIES + 1):
        if not left:
            return
        if attempt > 1:
            time.sleep(REMOVE_RETRY_S)
        rounds = -(-len(left) // MAX_WORKERS)
        try:
            _podman(remove_argv(left, stop_timeout), timeout=TIMEOUT_S + rounds * stop_timeout)
            return
        except ToolError as e:
            if e.status in NOT_RETRIED:
                raise
            there = inspect(left)
            left = [i for i in left if i in there]
            if left and attempt == REMOVE_TRIES:
                raise


def _state(d: dict) -> State:
    st = d.get("State") or {}
    cfg = d.get("Config") or {}
    return State(id=d.get("Id", ""), name=d.get("Name", ""),
                 image=d.get("ImageName") or cfg.get("Image") or "",
                 status=st.get("Status", ""), running=bool(st.get("Running")),
                 exit_code=int(st.get("ExitCode") or 0), oom_killed=bool(st.get("OOMKilled")),
                 pid=int(st.get("Pid") or 0), labels=dict(cfg.get("Labels") or {}),
                 error=st.get("Error") or "", conmon_pid=int(st.get("ConmonPid") or 0))


def inspect(refs: list[str]) -> dict[str, State]:
    """The state of each container in ``refs`` (IDs or names), keyed by the ref asked; a ref
    that names no container is absent from the result.  One podman call when every ref
    names a container, else one call per ref."""
    if not refs:
        return {}
    cp = _podman(["container", "inspect", "--", *refs], check=False)
    if cp.returncode == 0:
        found = json.loads(cp.stdout or "[]")
        if len(found) == len(refs):
            return {ref: _state(d) for ref, d in zip(refs, found)}
    out: dict[str, State] = {}
    for ref in refs:
        cp = _podman(["container", "inspect", "--", ref], check=False)
        if cp.returncode != 0:
            if "no such container" in (cp.stderr or "").lower():
                continue
            raise ToolError([PODMAN, "container", "inspect", ref], cp.returncode, cp.stderr)
        found = json.loads(cp.stdout or "[]")
        if found:
            out[ref] = _state(found[0])
    return out


def find(labels: dict[str, str]) -> list[str]:
    """The IDs of every container (running or not) carrying all of ``labels``."""
    args = ["ps", "--all", "--no-trunc", "--format", "{{.ID}}"]
    for k, v in sorted(labels.items()):
        args += ["--filter", f"label={k}={v}"]
    return [ln.strip() for ln in _podman(args).stdout.splitlines() if ln.strip()]


def image_exists(ref: str) -> bool:
    """Whether image ``ref`` is in the machine's image store (nothing is pulled)."""
    return _podman(["image", "exists", "--", ref], check=False).returncode == 0


@dataclass(frozen=True)
class ImageConfig:
    """What an image declares about the process it runs."""

    id: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    path: str                          #: its PATH (:data:`DEFAULT_PATH` when it declares none)


def image_config(ref: str) -> ImageConfig:
    """The declared entrypoint, command and PATH of image ``ref``."""
    d = json.loads(_podman(["image", "inspect", "--", ref]).stdout)[0]
    cfg = d.get("Config") or {}
    path = DEFAULT_PATH
    for item in cfg.get("Env") or []:
        if item.startswith("PATH="):
            path = item[5:]
    return ImageConfig(id=d.get("Id", ""), entrypoint=tuple(cfg.get("Entrypoint") or ()),
                       cmd=tuple(cfg.get("Cmd") or ()), path=path)


def resolve_in_root(root: Path, path: str) -> Path | None:
    """``path`` (absolute, as seen inside a container) resolved under ``root``, with every
    symbolic link followed as the container would see it (an absolute target is read from
    ``root``, never from this machine's ``/``); ``None`` if it leads nowhere."""
    parts = [p for p in path.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        here = root.joinpath(*done, part)
        if here.is_symlink():
            hops += 1
            if hops > MAX_LINKS:
                return None
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        if not here.exists():
            return None
        done.append(part)
    return root.joinpath(*done)


def program_in_root(root: Path, program: str, path: str) -> bool:
    """Whether ``program`` (absolute, or a name searched in ``path``) is an executable file
    in the file tree at ``root``."""
    if "/" in program:
        found = resolve_in_root(root, posixpath.join("/", program))
        return found is not None and found.is_file() and os.access(found, os.X_OK)
    for d in path.split(":"):
        if d.startswith("/"):
            found = resolve_in_root(root, posixpath.join(d, program))
            if found is not None and found.is_file() and os.access(found, os.X_OK):
                return True
    return False


@contextlib.contextmanager
def image_mounted(ref: str) -> Iterator[Path]:
    """Image ``ref``'s file tree, mounted read-only for the block and unmounted after."""
    root = Path(_podman(["image", "mount", "--", ref]).stdout.strip())
    try:
        yield root
    finally:
        _podman(["image", "unmount", "--", ref], check=False)


def image_has_program(ref: str, program: str, path: str | None = None) -> bool:
    """Whether ``program`` would be found when a container of image ``ref`` starts it
    (``path``: the image's PATH when already read, else it is read here)."""
    path = image_config(ref).path if path is None else path
    with image_mounted(ref) as root:
        return program_in_root(root, program, path)
