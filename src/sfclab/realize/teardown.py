"""Remove exactly what a lab's journal names and its marks confirm; nothing found by pattern.

Order: each part's ``teardown`` by rank (:mod:`sfclab.realize.part`): functions' ``stop`` (from
the saved plan); then every process still running in the lab's namespaces (found through
``/proc/PID/ns/net``, ended by PID); then OVS bridges that are journaled *and* carry the lab's
mark (one transaction), root-namespace interfaces that are journaled *and* carry the lab's
alias; then the journaled namespaces.  Absent objects are skipped, so it works after a
crash at any point of ``up`` and can be run again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plan.model import Plan
from ..kernel import netns
from .kinds import TABLE
from .state import LabState

#: parts ranked below this tear down before the lab's processes are ended
PROCESSES_RANK = 15


@dataclass
class TeardownReport:
    namespaces: int = 0
    links: int = 0
    bridges: int = 0
    processes: int = 0
    errors: list[str] = field(default_factory=list)
    #: labs on hosts reached over SSH: each host's outcome (``host``, ``address``, ``removed``,
    #: and for a host whose part is left, ``reason`` and ``error``); empty for other labs
    hosts: list[dict] = field(default_factory=list)

    @property
    def left(self) -> list[dict]:
        """The hosts whose parts are left (journaled for a later ``down``)."""
        return [h for h in self.hosts if not h["removed"]]

    def to_dict(self) -> dict:
        d = {"namespaces": self.namespaces, "links": self.links, "bridges": self.bridges,
             "processes": self.processes, "errors": self.errors}
        if self.hosts:
            d.update(complete=not self.left, hosts=self.hosts)
        return d


def teardown(state: LabState) -> TeardownReport:
    rep = TeardownReport()
    journal = state.journal()
    plan_d = state.plan()
    plan = Plan.from_dict(plan_d) if plan_d else None
    ns_names = [e["name"] for e in journal if e.get("op") == "netns"]
    parts = sorted(TABLE.parts(), key=lambda p: p.teardown_rank)
    for part in [p for p in parts if p.teardown_rank < PROCESSES_RANK]:
        part.teardown(state, plan, journal, rep)  # functions stop first
    rep.processes = len(netns.end_processes(sorted(netns.pids_in(ns_names))))
    for part in [p for p in parts if p.teardown_rank >= PROCESSES_RANK]:
        part.teardown(state, plan, journal, rep)
    for name in ns_names:
        try:
            if netns.delete(name):
                rep.namespaces += 1
        except OSError as e:
            rep.errors.append(f"namespace {name}: {e}")
    return rep
