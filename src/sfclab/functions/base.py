"""The network-function model.

A *function* is a lab node kind (``router``, ``firewall``, ``nat``, ``shaper``, ``dpi``, ``tun``)
whose namespace forwards packets like a router and adds a behaviour.  Each kind is one subclass
of :class:`NetworkFunction`, registered under its name, with a pydantic ``Params`` model for the
node's keys in the lab file (every key but ``kind``).

Lifecycle, driven by :mod:`sfclab.realize.functions`:

1. ``configure()`` after the node's links, addresses and routes exist: kernel state only
   (rules, qdiscs, sysctls), loaded in one batch.
2. ``start()`` starts the function's processes through :meth:`FunctionContext.spawn`, which
   records each PID so ``down`` can end it (``down`` also ends every process in the namespace).
3. ``inspect()`` returns a JSON-ready dict (counters, per-flow tables ...).
4. ``stop()`` ends processes and undoes what ``configure`` did outside the namespace (cgroups);
   state inside the namespace disappears with it.  It must be safe to call on a function whose
   ``start`` never ran or ran halfway, and in a fresh process (``sfclab down``), rebuilt from the
   plan, so it may not rely on attributes set by ``start``.
"""

from __future__ import annotations

import abc
import json
import os
import subprocess
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv6Interface
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..kernel import netns


class FunctionParams(BaseModel):
    """Keys every function node accepts besides its own."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


@dataclass(frozen=True)
class Interface:
    """One of the node's interfaces: its name in the namespace, the node at the other end of the
    link (for a bridge segment: the bridge node) and its address."""

    name: str
    peer: str
    address: IPv4Interface | None
    address6: IPv6Interface | None = None


@dataclass
class FunctionContext:
    """What a function sees of its lab: its namespace, interfaces and a place for state."""

    lab: str
    node: str
    netns: str
    interfaces: list[Interface]
    state_dir: Path
    routes: list[dict[str, Any]] = field(default_factory=list)
    #: the cgroup of the node's host (labs with hosts): its processes join it (cpuset, memory)
    host_cgroup: str | None = None
    #: the image of the node's container (its ``image`` key), if it has one
    image: str | None = None
    #: on a chain: the node's number in the SFC data plane (its key in the lab-wide maps) and
    #: the directory of those maps; None for a node no chain passes
    sfc_node_id: int | None = None
    sfc_maps: Path | None = None
    #: the address families (4, 6) of the lab's links (its ``ip:``)
    families: tuple[int, ...] = (4,)

    def interface_toward(self, peer: str) -> Interface:
        for i in self.interfaces:
            if i.peer == peer:
                return i
        raise KeyError(peer)

    def run(self, argv: list[str], *, input: str | None = None, check: bool = True,
            timeout: float | None = 60) -> subprocess.CompletedProcess:
        """Run a program inside the node's namespace and wait (``ToolError`` on failure)."""
        return netns.run(self.netns, argv, input=input, check=check, timeout=timeout)

    def spawn(self, argv: list[str], **kw: Any) -> subprocess.Popen:
        """Start a long-running program in the namespace; its PID is recorded for ``down``."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = netns.popen(self.netns, argv, start_new_session=True, **kw)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "pids", "a") as f:
            f.write(json.dumps({"pid": proc.pid, "argv": argv}) + "\n")
        return proc

    def write_sysctl(self, key: str, value: str) -> None:
        """Set a sysctl inside the node's namespace (never the root namespace's)."""
        netns.write_sysctl(self.netns, key, value)

    def read_sysctl(self, key: str) -> str:
        return netns.read_sysctl(self.netns, key)

    def owns_pid(self, pid: int) -> bool:
        """True if ``pid`` still runs inside the node's namespace (a recycled PID never is)."""
        try:
            ino = os.stat(netns.path(self.netns)).st_ino
        except OSError:
            return False
        return ino != netns.root_inode() and netns.in_namespace(pid, ino)

    def end_processes(self, pids: list[int]) -> list[int]:
        """End those of ``pids`` that still run in the namespace, through a pidfd checked
        after it was opened (a reused PID is never signalled); return the ended."""
        return netns.end_processes(pids, owned=self.owns_pid)

    def recorded_pids(self) -> list[int]:
        out = []
        try:
            with open(self.state_dir / "pids") as f:
                for line in f:
                    try:
                        pid = json.loads(line)["pid"]
                    except (ValueError, TypeError, KeyError):
                        continue  # a torn or damaged line names no process
                    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1:
                        out.append(pid)
        except FileNotFoundError:
            pass
        return out


class NetworkFunction(abc.ABC):
    """Base class of every function kind.  Subclasses set ``kind`` and ``Params``."""

    kind: ClassVar[str]
    Params: ClassVar[type[FunctionParams]] = FunctionParams
    #: whether the namespace forwards packets (every function does; hosts are not functions)
    forwards: ClassVar[bool] = True
    #: whether the function is the node's container (its ``image``), which it then requires
    runs_image: ClassVar[bool] = False
    #: an SFC-aware eBPF function: the program (in the data plane's objects) that the data
    #: plane attaches on the node in place of its forwarder and proxy, reading the label stack
    #: itself; None for a kernel function, which the proxy hands plain IPv4
    sfc_program: ClassVar[str | None] = None
    #: the address families (4, 6) the function carries; a lab of ``ip: 6`` or ``dual`` with
    #: a kind that lacks one is refused at the node's ``kind`` (IPv4 unless a kind says more)
    families: ClassVar[tuple[int, ...]] = (4,)

    def __init__(self, ctx: FunctionContext, params: FunctionParams):
        self.ctx = ctx
        self.params = params

    def configure(self) -> None:  # noqa: B027 - optional hook
        """Load kernel state (rules, qdiscs, sysctls) in one batch."""

    def start(self) -> None:  # noqa: B027 - optional hook
        """Start the function's processes through ``self.ctx.spawn``."""

    def stop(self) -> None:
        """End recorded processes; safe to call repeatedly and after a crash."""
        self.ctx.end_processes(self.ctx.recorded_pids())

    def inspect(self) -> dict[str, Any]:
        """A JSON-ready description of what the function is doing (counters, flows)."""
        return {}

    def programs(self) -> list[str]:
        """The programs (found in ``PATH``) the function runs to configure or inspect itself;
        a host's check refuses a host that lacks one before anything is made there."""
        return []

    @classmethod
    def plan_container(cls, params: Any, container: Any) -> None:  # noqa: B027 - optional
        """For a kind that ``runs_image``: set what it needs on the node's container plan
        (a :class:`~sfclab.plan.model.ContainerPlan`: limits, capabilities) from its
        validated ``params``; raise ``SpecError`` at its key for what cannot be."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Checks that need the machine (an executable exists ...), run before anything is
        created; raise ``SpecError`` with the node's place on failure."""


REGISTRY: dict[str, type[NetworkFunction]] = {}


def register(cls: type[NetworkFunction]) -> type[NetworkFunction]:
    """Class decorator: make ``cls`` available as node kind ``cls.kind`` (once: a kind
    registered twice is an error, never a silent replacement)."""
    if cls.kind in REGISTRY:
        raise ValueError(f"function kind '{cls.kind}' is registered twice "
                         f"({REGISTRY[cls.kind].__qualname__} and {cls.__qualname__})")
    REGISTRY[cls.kind] = cls
    return cls
