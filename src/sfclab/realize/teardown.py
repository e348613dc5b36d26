"""Remove exactly what a lab's journal names and its marks confirm; nothing found by pattern.

First the journal is read through :mod:`sfclab.realize.ownership`: a line that is not JSON,
not an object, lacks a field, or names what is not this lab's (another lab's namespace, a path
outside the lab's directories ...) is reported in ``errors`` and left alone; the rest are
removed.  Each journaled namespace must then carry the lab's mark in the kernel; one that does
not is reported and left, with its processes.

Order: each part's ``teardown`` by rank (:mod:`sfclab.realize.part`): functions' ``stop`` (from
the saved plan); then every process still running in the lab's marked namespaces (found
through ``/proc/PID/ns/net``, ended through a pidfd checked after it was opened); then OVS
bridges that are journaled *and* carry the lab's mark (one transaction), root-namespace
interfaces that are journaled *and* carry the lab's alias; for a change to a running lab, its
links' ends in the lab's namespaces it joined, each carrying its alias (``teardown_joined``);
then the marked namespaces.
Absent objects are skipped, so it works after a crash at any point of ``up`` and can be run
again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..plan.model import Plan
from ..kernel import netns
from . import ownership
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


def owned_namespaces(lab: str, names: list[str], rep: TeardownReport) -> dict[int, str]:
    """The namespaces of ``names`` that are ``lab``'s and carry its mark (inode -> name); each
    other present one is reported in ``rep.errors`` and left alone."""
    out: dict[int, str] = {}
    for name in dict.fromkeys(names):
        ino, why = ownership.namespace_problem(lab, name)
        if why:
            rep.errors.append(f"namespace {name}: {why}; left alone")
        elif ino is not None:
            out[ino] = name
        else:  # absent, or the empty file of one whose making was cut short
            netns.remove_placeholder(name)
    return out


def end_processes_in(owned: dict[int, str], rep: TeardownReport) -> None:
    """End every process inside the namespaces ``owned`` (from :func:`owned_namespaces`)."""
    pids = netns.pids_in_inodes(owned)
    rep.processes += len(netns.end_processes(
        sorted(pids), owned=lambda pid: any(netns.in_namespace(pid, i) for i in owned)))


def delete_namespaces(owned: dict[int, str], rep: TeardownReport) -> None:
    """Delete the namespaces ``owned``, each only while its path is still that namespace."""
    for ino, name in owned.items():
        try:
            if netns.delete(name, ino):
                rep.namespaces += 1
        except OSError as e:
            rep.errors.append(f"namespace {name}: {e}")


def remove_namespace(lab: str, name: str) -> list[str]:
    """End what runs in namespace ``name`` and delete it, if it is ``lab``'s and carries its
    mark (chain rm, host rm, migration); the errors, naming it and why."""
    rep = TeardownReport()
    owned = owned_namespaces(lab, [name], rep)
    end_processes_in(owned, rep)
    delete_namespaces(owned, rep)
    return rep.errors


def teardown(state: LabState) -> TeardownReport:
    rep = TeardownReport()
    journal, rep.errors = state.read_journal()
    plan_d = state.plan()
    remove(state, Plan.from_dict(plan_d) if plan_d else None, journal, rep)
    return rep


def remove(state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
           rep: TeardownReport, joined: set[str] | None = None) -> None:
    """Remove the objects ``journal`` names (its entries checked well formed and the lab's)
    with every part, in the order of the module's docstring: the whole lab at ``down``, or a
    change to a running lab (:func:`sfclab.realize.change.remove`: ``plan`` is the change,
    ``joined`` the lab's namespaces its links end in, whose ends go before the change's
    namespaces)."""
    ns_names = [e["name"] for e in journal if e.get("op") == "netns"]
    parts = sorted(TABLE.parts(), key=lambda p: p.teardown_rank)
    for part in [p for p in parts if p.teardown_rank < PROCESSES_RANK]:
        part.teardown(state, plan, journal, rep)  # functions stop first
    owned = owned_namespaces(state.name, ns_names, rep)
    end_processes_in(owned, rep)
    for part in [p for p in parts if p.teardown_rank >= PROCESSES_RANK]:
        part.teardown(state, plan, journal, rep)
    if joined is not None and plan is not None:
        for part in parts:
            part.teardown_joined(state, plan, joined, rep)
    delete_namespaces(owned, rep)
