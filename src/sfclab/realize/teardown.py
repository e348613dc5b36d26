"""Remove exactly what a lab's journal names and its marks confirm; nothing found by pattern.

Order: functions' ``stop`` (from the saved plan), every process still running in the lab's
namespaces (found through ``/proc/PID/ns/net``, ended by PID), OVS bridges that are journaled
*and* carry the lab's mark (one transaction), root-namespace interfaces that are journaled *and*
carry the lab's alias, then the namespaces.  Absent objects are skipped, so it works after a
crash at any point of ``up`` and can be run again.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from ..plan.model import Plan
from ..kernel import netns, ovs
from .state import LabState


@dataclass
class TeardownReport:
    namespaces: int = 0
    links: int = 0
    bridges: int = 0
    processes: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"namespaces": self.namespaces, "links": self.links, "bridges": self.bridges,
                "processes": self.processes, "errors": self.errors}


def teardown(state: LabState) -> TeardownReport:
    rep = TeardownReport()
    journal = state.journal()
    plan_d = state.plan()
    plan = Plan.from_dict(plan_d) if plan_d else None
    ns_names = [e["name"] for e in journal if e.get("op") == "netns"]

    # only functions that left state (processes, cgroups) have anything to stop
    if plan is not None and any(state.node_dir(n).exists() for n in plan.functions):
        from .functions import stop_all

        rep.errors += stop_all(state, plan)

    pids = netns.pids_in(ns_names)
    rep.processes = len(netns.end_processes(sorted(pids)))

    bridges = [e["name"] for e in journal if e.get("op") == "ovs-bridge"]
    if bridges:
        try:
            mine = set(ovs.owned_bridges(state.name))
            doomed = [b for b in bridges if b in mine]
            if doomed:
                ovs.vsctl([["--if-exists", "del-br", b] for b in doomed])
                rep.bridges = len(doomed)
        except Exception as e:  # keep going: namespaces must still go
            rep.errors.append(f"ovs: {e}")

    links = [e for e in journal if e.get("op") == "link"]
    if links:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            for e in links:
                idx = ipr.link_lookup(ifname=e["name"])
                if not idx:
                    continue
                msg = ipr.get_links(idx[0])[0]
                if msg.get_attr("IFLA_IFALIAS") != e.get("alias"):
                    rep.errors.append(f"interface {e['name']} lacks the lab's mark; left alone")
                    continue
                with contextlib.suppress(Exception):
                    ipr.link("del", index=idx[0])
                    rep.links += 1

    for name in ns_names:
        try:
            if netns.delete(name):
                rep.namespaces += 1
        except OSError as e:
            rep.errors.append(f"namespace {name}: {e}")
    return rep
