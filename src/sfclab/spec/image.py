"""``image:`` on a node: the node's processes run in a container from an OCI image.

Lab file (on a host, router or any function kind; never on a bridge)::

    nodes:
      h1: {kind: host, image: localhost/sfclab/base}      # the short form: just the image
      r1:
        kind: router
        image:
          name: localhost/sfclab/frr:latest   # an image in the machine's store (never pulled)
          cmd: [/usr/lib/frr/frrinit.sh, start]  # or a string split like a shell; default:
                                              # the image's own, else 'sleep infinity'
          env: {TZ: UTC}                      # at most 64 variables
          binds: ["/srv/conf:/etc/x", "/srv/out:/out:rw"]   # host path:path inside[:ro|rw]
          cpus: 0.5                           # CPU time in cores
          memory: 64M                         # memory (and swap) limit
          caps: [NET_ADMIN]                   # capabilities added to podman's default set
          privileged: false

Two checks, at two times.  :class:`ImageSpec` checks the text (every key bounded) when the lab
file is read.  :func:`machine_check` checks it against this machine before anything is made
(``up`` and ``validate`` run it): the image is in the store, the command exists inside the
image, the limits are ones the machine can give (``cpus`` at most its online CPUs, ``memory``
at most its RAM), and every bind's host path exists.  Each failure is a
:class:`~sfclab.errors.SpecError` at the key (``nodes.r1.image.cmd``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from pydantic import Field, field_validator, model_validator

from ..errors import SpecError, ToolError
from .quantities import parse_size
from .strict import Strict

#: an image reference: registry/path:tag or @digest characters, never starting with '-'
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*\Z")
IMAGE_MAX = 255
ARGS_MAX = 64
ARG_MAX = 4096
ENV_MAX = 64
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
BINDS_MAX = 32
PATH_MAX = 1024
#: the smallest memory limit podman takes
MIN_MEMORY = 6 * 1024 * 1024
MAX_CPUS = 1024
#: the least CPU time the kernel gives a cgroup: 1 ms per 100 ms period
MIN_CPUS = 0.01
#: what ``cmd`` is when neither the lab file nor the image gives one: the container stays up
KEEP_ALIVE = ("sleep", "infinity")

#: the capabilities Linux defines (capability(7)), named without ``CAP_``
CAPABILITIES = frozenset("""
    CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
    LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
    SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
    SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
    MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
    CHECKPOINT_RESTORE""".split())


def _plain_text(v: str, what: str) -> str:
    if not v.isprintable():
        raise ValueError(f"{what} without control characters")
    return v


class BindSpec(Strict):
    """``source:target[:ro|rw]``: a host directory or file seen inside the container."""

    source: str
    target: str
    writable: bool = False


def _bind(v: Any) -> Any:
    if not isinstance(v, str):
        raise ValueError("a bind 'host-path:path-inside' with ':ro' (default) or ':rw'")
    parts = v.split(":")
    mode = "ro"
    if len(parts) == 3:
        mode = parts.pop()
    if len(parts) != 2 or mode not in ("ro", "rw"):
        raise ValueError("a bind 'host-path:path-inside' with ':ro' (default) or ':rw'")
    for p in parts:
        pp = PurePosixPath(p)
        if not p.startswith("/") or ".." in pp.parts or len(p) > PATH_MAX or ","in p:
            raise ValueError(f"absolute paths without '..' or ',' in a bind, not {p!r}")
        _plain_text(p, "paths")
    return {"source": parts[0], "target": parts[1], "writable": mode == "rw"}


class ImageSpec(Strict):
    """A node's container: its image and how it runs."""

    name: str = Field(max_length=IMAGE_MAX)
    cmd: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    binds: list[BindSpec] = Field(default_factory=list, max_length=BINDS_MAX)
    cpus: float | None = Field(default=None, ge=MIN_CPUS, le=MAX_CPUS)
    memory: int | None = None
    caps: list[str] = Field(default_factory=list, max_length=len(CAPABILITIES))
    privileged: bool = False

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not IMAGE_RE.match(v):
            raise ValueError("an image name such as 'localhost/sfclab/base:latest' (letters, "
                             "digits and . _ / : @ + -, starting with a letter or digit)")
        return v

    @field_validator("cmd", mode="before")
    @classmethod
    def _cmd(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, str):
            try:
                v = shlex.split(v)
            except ValueError as e:
                raise ValueError(f"a command line a shell could split ({e})") from None
        if not isinstance(v, list) or not all(isinstance(a, (str, int, float))
                                              and not isinstance(a, bool) for a in v):
            raise ValueError("a command as a string or a list of strings")
        argv = [str(a) for a in v]
        if not argv or not argv[0]:
            raise ValueError("a command that is not empty")
        if len(argv) > ARGS_MAX or any(len(a) > ARG_MAX for a in argv):
            raise ValueError(f"a command of at most {ARGS_MAX} arguments of at most "
                             f"{ARG_MAX} characters")
        for a in argv:
            _plain_text(a, "arguments")
        return argv

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError("a mapping of variable names to values")
        if len(v) > ENV_MAX:
            raise ValueError(f"at most {ENV_MAX} variables")
        out = {}
        for k, x in v.items():
            if not isinstance(k, str) or not ENV_NAME_RE.match(k):
                raise ValueError(f"variable names of letters, digits and '_', not {k!r}")
            if isinstance(x, bool) or not isinstance(x, (str, int, float)):
                raise ValueError(f"a string or number as the value of {k}")
            x = str(x)
            if len(x) > ARG_MAX or "\0" in x:
                raise ValueError(f"a value of {k} of at most {ARG_MAX} characters, no NUL")
            out[k] = x
        return out

    @field_validator("binds", mode="before")
    @classmethod
    def _binds(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError("a list of binds 'host-path:path-inside[:ro|rw]'")
        if len(v) > BINDS_MAX:
            raise ValueError(f"at most {BINDS_MAX} binds")
        return [_bind(b) for b in v]

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        if v is None:
            return v
        n = parse_size(v)
        if n < MIN_MEMORY:
            raise ValueError("a memory limit of at least 6M (podman takes no less)")
        return n

    @field_validator("caps", mode="before")
    @classmethod
    def _caps(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError("a list of capabilities such as [NET_ADMIN]")
        out: list[str] = []
        for c in v:
            name = c.upper().removeprefix("CAP_") if isinstance(c, str) else None
            if name not in CAPABILITIES:
                raise ValueError(f"capabilities Linux defines (such as NET_ADMIN), not {c!r}")
            if name not in out:
                out.append(name)
        return out


def run_command(cmd: list[str] | None, config: Any) -> tuple[str, ...]:
    """What follows the image on podman's command line: ``cmd`` if given (the arguments of
    the image's entrypoint, if it has one); nothing if the image declares its own command;
    else :data:`KEEP_ALIVE`, so a plain file-system image still stays up as the node.
    ``config``: the image's :class:`~sfclab.kernel.podman.ImageConfig`."""
    if cmd:
        return tuple(cmd)
    if config.entrypoint or config.cmd:
        return ()
    return KEEP_ALIVE


def memory_total() -> int:
    """This machine's RAM in bytes (``MemTotal``)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


def machine_check(spec: ImageSpec, checked: set[tuple[str, tuple[str, ...]]] | None = None,
                  ) -> None:
    """Raise a :class:`SpecError` (place: the key, below the node's ``image``) for what this
    machine cannot give ``spec``; nothing is made or left.

    ``checked``: the (image, command) pairs already found good in this lab; the image's own
    checks (in the store, its command inside it: four podman calls, one of them a mount) run
    once per pair, the limits and binds for every node.  The pair is added once it passes."""
    import os

    from ..kernel import cgroups, cpus, podman  # light start-up: only labs with images

    def fail(key: str, message: str) -> SpecError:
        return SpecError(message, place=key)

    if not podman.available():
        raise fail("name", "podman is not installed; 'make setup' installs podman and runc")
    if spec.cpus is not None and spec.cpus > len(cpus.online()):
        raise fail("cpus", f"at most {len(cpus.online())} (this machine's online CPUs), "
                           f"got {spec.cpus:g}")
    if spec.memory is not None:
        if not cgroups.path("memory").is_dir():
            raise fail("memory", "this machine has no memory cgroup controller to limit it")
        if spec.memory > memory_total():
            raise fail("memory", f"at most this machine's memory ({memory_total() >> 20} MiB), "
                                 f"got {spec.memory >> 20} MiB")
    for i, b in enumerate(spec.binds):
        if not os.path.exists(b.source):
            raise fail(f"binds[{i}]", f"no such file or directory on this machine: {b.source}")
    pair = (spec.name, tuple(spec.cmd or ()))
    if checked is not None and pair in checked:
        return
    try:
        if not podman.image_exists(spec.name):
            raise fail("name", f"no image '{spec.name}' in this machine's image store "
                               "('podman images' lists them; nothing is pulled)")
        config = podman.image_config(spec.name)
        argv = config.entrypoint or run_command(spec.cmd, config) or config.cmd
        if not podman.image_has_program(spec.name, argv[0], config.path):
            mine = spec.cmd and not config.entrypoint
            key, whose = ("cmd", "") if mine else ("name", " (the image's own command)")
            raise fail(key, f"'{argv[0]}'{whose} is not an executable in image '{spec.name}' "
                            f"(PATH {config.path})")
    except ToolError as e:
        raise fail("name", f"image '{spec.name}' cannot be read: {e}") from None
    if checked is not None:
        checked.add(pair)
