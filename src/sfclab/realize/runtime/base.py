"""The host runtime: what sfclab needs from the hosts a lab runs on, declared once.

A lab's objects live on *hosts*.  Where they live decides how they are reached, and that is
all a host runtime is: one object per lab (its :class:`~sfclab.realize.state.LabState`) that
builds and removes the lab's parts, runs a program in one of its namespaces, reads its share
of the chains' data plane and removes a host that leaves.  Callers ask the runtime; none of
them asks which runtime it is.

- ``local`` (:mod:`.local`): this machine's kernel, and *emulated* hosts (a namespace of this
  machine each, with cgroups for CPUs and memory).  Everything is made here, in-process:
  netlink batches through pyroute2, BPF maps through the lab's pinned maps, processes held by
  pidfds, cgroups; one journal, this machine's.
- ``ssh`` (:mod:`.ssh`): real machines, each with its own agent
  (:mod:`sfclab.realize.agent`, run there over SSH) that builds its part with the ``local``
  runtime *on that machine*, journaled there.  This machine journals one ``remote-host``
  entry per host and talks to the agents.

Which one a lab has is read in exactly one place, :func:`sfclab.realize.runtime.runtime_for`
(from the lab file, the plan or the lab's journal), from the table
:data:`sfclab.realize.runtime.RUNTIMES`.  The operations on a running lab (``chain add``,
``migrate``, health, ``host add``/``rm``) sit above this layer and extend this interface in
:mod:`sfclab.live.runtime.base`, one subclass per runtime (:data:`sfclab.live.runtime.table.LIVE`).
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from ...plan.model import HostPlan, Plan
from ..state import LabState
from ..teardown import TeardownReport

if TYPE_CHECKING:
    from ...spec.lab import Lab
    from .process import Process, Programs

Progress = Callable[[str], None]


class Counters(Protocol):
    """A read of the chains' data plane: each chain node's counters, each path's count (a
    :class:`~sfclab.realize.dataplane.DataPlane` here, or every host's share merged)."""

    def counters(self, node_id: int) -> dict[str, int]: ...

    def path_count(self, index: int) -> int: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class HostRuntime(ABC):
    """The hosts of lab ``state`` as one runtime; see the module's docstring.

    ``here``: the lab's objects are in this machine's kernel (what ``inspect`` may read
    live here)."""

    kind: ClassVar[str]
    here: ClassVar[bool]

    def __init__(self, state: LabState):
        self.state = state

    # --- a lab's life ----------------------------------------------------------------------
    @abstractmethod
    def check_node(self, plan: Plan, node: str) -> None:
        """Function ``node``'s checks against this machine, before ``up`` makes anything
        (:class:`~sfclab.errors.SpecError` on a refusal)."""

    @abstractmethod
    def up(self, lab: Lab, plan: Plan, say: Progress) -> None:
        """Build ``lab`` (the state begun, its journal written first) and mark it ``up``; on
        failure nothing of it is left (or what could not be reached stays journaled)."""

    @abstractmethod
    def down(self) -> TeardownReport:
        """Remove what the journal names."""

    @abstractmethod
    def left(self) -> list[str]:
        """The hosts whose parts a ``down`` has yet to remove (kept journaled)."""

    @abstractmethod
    def inspect(self, plan: Plan, found: dict[str, Any]) -> None:
        """Fill ``found`` with each node as it is live (``inspect``)."""

    @abstractmethod
    def inspect_far(self, out: dict[str, Any]) -> None:
        """Complete ``out`` (``inspect``'s answer) with what only the hosts can read."""

    # --- programs in a node's namespace ----------------------------------------------------
    @abstractmethod
    def context(self, host: HostPlan) -> str | None:
        """The namespace of ``host``'s own context (``@HOST``) as :meth:`run` takes it."""

    @abstractmethod
    def reached_as(self, host: HostPlan | None) -> str | None:
        """The name ``host`` is reached by from this machine, ``None`` for this machine."""

    @abstractmethod
    def run(self, host: str | None, ns: str | None, argv: list[str], *, check: bool,
            input: str | None, timeout: float | None) -> subprocess.CompletedProcess:
        """``argv`` in namespace ``ns`` of ``host`` (:meth:`reached_as`), output captured;
        ``check``: :class:`~sfclab.errors.ToolError` on a non-zero status."""

    @abstractmethod
    def exec(self, host: str | None, ns: str | None, argv: list[str]) -> int:
        """``argv`` in namespace ``ns`` of ``host``, the terminal attached; its status."""

    @abstractmethod
    def spawn(self, host: str | None, ns: str, argv: list[str]) -> Process:
        """``argv`` started in namespace ``ns`` of ``host`` and left running, held by the
        caller (:mod:`.process`: a measurement's receiver)."""

    @abstractmethod
    def spawn_all(self, host: str | None, ns: str, argvs: list[list[str]], *,
                  listen: list[int] | None = None, timeout: float = 5.0) -> Programs:
        """``argvs`` started together in namespace ``ns`` of ``host`` and held as one by the
        caller until it ends them (:mod:`.process`: a measurement's iperf3 servers or
        clients); with ``listen``, returned once program *i* holds a listening TCP socket of
        its own on port ``listen[i]`` (:class:`~.process.StartFailed` if one stops first, or
        they do not all within ``timeout`` seconds: every one started is ended)."""

    @abstractmethod
    def tools(self, host: str | None) -> dict[str, Any]:
        """Where ``host`` has the programs a measurement runs (``sfcgen``: its path there,
        or None with ``why``; ``iperf3``: its version there, ``absent`` without one); empty:
        the host is this machine, whose own the caller knows."""

    # --- the chains' data plane ------------------------------------------------------------
    @abstractmethod
    def data_plane(self, node_ids: dict[str, int]) -> Counters:
        """The chains' counters, read once (``node_ids``: chain node -> id)."""

    # --- hosts leaving ---------------------------------------------------------------------
    @abstractmethod
    def leave(self, host: HostPlan) -> list[str]:
        """Remove ``host`` (one ``host add`` made) and what of the lab it holds; the errors
        (:class:`~sfclab.errors.LabError` when a host stays, for ``down``)."""
