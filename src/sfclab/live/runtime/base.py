"""The host runtime's operations on a running lab: what ``chain add``/``rm``, health,
``chain migrate`` and ``host add``/``rm`` need from the lab's hosts.

:class:`LiveRuntime` extends :class:`sfclab.realize.runtime.base.HostRuntime` with them.  They
sit in this layer, above :mod:`sfclab.realize`, because making a chain's nodes, tables and
watchers is this layer's own code (:mod:`sfclab.live.chains.wire`,
:mod:`sfclab.live.chains.tables`, :mod:`sfclab.live.health.watcher`), which the realize layer
cannot import.  Each runtime has one subclass, in the table
:data:`sfclab.live.runtime.table.LIVE` (the same names as
:data:`sfclab.realize.runtime.RUNTIMES`):

- :class:`~sfclab.live.runtime.local.LocalLive`: this machine makes everything, in its kernel,
  journaled in its journal;
- :class:`~sfclab.live.runtime.ssh.SshLive`: each host's agent makes its share
  (:mod:`.agent_chain`), journaled there; this machine plans and asks, host by host or all at
  once.

The callers (:mod:`sfclab.live.ops.add`, :mod:`sfclab.live.ops.migrate`,
:mod:`sfclab.live.ops.health`, :mod:`sfclab.live.ops.hostops`) decide everything that does not
depend on where the hosts are -- placement, wiring, labels, the merged plan, saved before
anything is made -- and then ask the runtime of :func:`sfclab.live.runtime.table.live_for`.
"""

from __future__ import annotations

from abc import abstractmethod
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...plan.chainadd import Addition, NewNode
from ...plan.model import Plan
from ...plan.sfc import (DirectionPlan, EntryRow, PathPlan, SteeringPlan, entries_of,
                        reversed_classifier)
from ...realize.runtime.base import HostRuntime, Progress
from ...realize.state import LabState
from .. import record

if TYPE_CHECKING:
    from ...realize.containers import ImageProblem
    from ...spec.sfc import ClassifierSpec
    from ..chains.classify_maps import Classify
    from ...plan.migration import Migration
    from ..chains.moves import Owner
    from ..request import MigrateInstance

#: seconds between a chain's classifier entries going and the rest of it: packets classified
#: just before are on their way
DRAIN_S = 0.05


def classified_later(state: LabState, add: Addition) -> dict[int, list[EntryRow]]:
    """Entries ``chain classify`` added to ``add``'s chain, by direction (they go with it)."""
    from ...spec import classifier_file  # light start-up: the agents load no file models

    out: dict[int, list[EntryRow]] = {}
    for saved in record.saved_classifiers(state, add.chain):
        for c in (r.spec() for r in classifier_file.read(saved["file"])):
            for d in add.directions:
                if not d.reverse and d.ingress == c.ingress:
                    out.setdefault(d.index, []).extend(entries_of(c))
                elif d.reverse and d.egress == c.ingress:
                    out.setdefault(d.index, []).extend(
                        entries_of(reversed_classifier(c, d.ingress)))
    return out


class LiveRuntime(HostRuntime):
    """A host runtime with the operations on a running lab (see the module's docstring).
    The caller holds the lab's lock."""

    # --- chain add, chain rm ---------------------------------------------------------------
    @abstractmethod
    def check_free(self, plan: Plan, merged: Plan, add: Addition, source: str) -> None:
        """Refuse (:class:`~sfclab.errors.SpecError`, nothing made) a classifier entry of
        ``add`` that another chain holds; ``plan``: the lab before, ``merged``: with ``add``."""

    @abstractmethod
    def image_problem(self, nodes: list[NewNode]) -> tuple[str, ImageProblem] | None:
        """The first container of added ``nodes`` (each placed: ``host``) that its host cannot
        run, with that host's name; None if every one can.  Nothing is made."""

    @abstractmethod
    def journal_chain(self, plan: Plan, add: Addition) -> None:
        """Journal what ``add`` will make, before the chain's record is saved."""

    @abstractmethod
    def make_chain(self, plan: Plan, merged: Plan, add: Addition, say: Progress) -> None:
        """Make ``add``: its nodes, functions and programs, then its labels, paths and slots,
        then (traffic on) its classifier entries; the caller holds the slot lock."""

    @abstractmethod
    def undo_chain(self, merged: Plan, add: Addition) -> None:
        """Take out what :meth:`make_chain` made of ``add`` before it failed (tolerates
        halves), leaving no state of its nodes."""

    @abstractmethod
    def remove_chain(self, plan: Plan, add: Addition) -> list[str]:
        """Take ``add`` out of running ``plan``: classifier entries (those ``chain classify``
        added since too) first, a drain, then the rest; the errors."""

    @abstractmethod
    def classify(self, plan: Plan, sp: SteeringPlan, job: Classify) -> tuple[Path, int]:
        """Write ``job``'s entries (``chain classify``), all or nothing on each host, its
        note saved first (status ``writing``): the note and the number written."""

    @abstractmethod
    def trace_paths(self, plan: Plan, sp: SteeringPlan, d: DirectionPlan,
                    wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                    src: IPv4Address | IPv6Address, dst: IPv4Address | IPv6Address,
                    wait: float) -> dict[str, Any]:
        """``chain trace`` of direction ``d``'s ``wanted`` paths (:mod:`sfclab.live.chains.trace`)."""

    # --- health ----------------------------------------------------------------------------
    @abstractmethod
    def watch(self, plan: Plan, node: str | None = None) -> dict[str, Any]:
        """Start the lab's watcher unless it runs (``node``: in that node's namespace):
        ``watcher`` (its PID, or host -> PID), ``started``, ``instances`` (those watched)."""

    @abstractmethod
    def health(self, chain: str | None, only: set[str] | None) -> dict[str, Any]:
        """What ``chain inspect`` shows of health: ``watcher``, ``instances`` (``only``
        those), ``events`` (of ``chain`` and the lab's own, the last 50)."""

    # --- chain migrate ---------------------------------------------------------------------
    @abstractmethod
    def migrate(self, req: MigrateInstance, plan: Plan, own: Owner, m: Migration,
                t0: float) -> dict[str, Any]:
        """Apply migration ``m`` of ``own.old`` as :mod:`sfclab.live.ops.migrate` planned it
        against ``plan`` (:func:`sfclab.plan.migration.plan_clone`): apply the clone, switch,
        apply the removal; the answer of ``chain migrate``."""

    # --- hosts -----------------------------------------------------------------------------
    @abstractmethod
    def refuse_emulated_join(self) -> None:
        """Refuse (:class:`~sfclab.errors.LabError`) an emulated host joining, if it cannot."""

    @abstractmethod
    def refuse_machine_join(self, plan: Plan) -> None:
        """Refuse (:class:`~sfclab.errors.LabError`) a machine (``--ssh``) joining, if it
        cannot."""

    @abstractmethod
    def join_machine(self, plan: Plan, name: str, ssh: str, key: str | None,
                     port: int | None, cpus: int | None, memory: int | None,
                     agent_state: str | None) -> dict[str, Any]:
        """Machine ``name`` joins (scanned, checked, journaled, put in ``plan.hosts``)."""
