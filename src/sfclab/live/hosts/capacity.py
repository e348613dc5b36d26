"""The hosts of a running lab as placement sees them: capacity less what their functions take.

A lab's hosts are those of its lab file (``plan.hosts``) and those ``sfclab host add`` made
(their names in ``hosts-added.json`` of the lab's state directory, their plans in ``plan.hosts``
too).  A lab whose file names no hosts also has the implicit host ``local``: this machine's
online CPUs and memory, where the lab file's nodes run.

What a host's functions take: an added instance its ``cpu`` and ``memory`` (the chain file's
needs); a function of the lab file its own cgroup limits (``cpu``, ``memory``; none: nothing).
A host without a memory limit offers the machine's memory.
"""

from __future__ import annotations

import json
import os

from ...plan import placement
from ...plan.model import Plan
from ...realize.state import LabState, _atomic_write
from .. import record

LOCAL = "local"


def machine_cpus() -> float:
    return float(len(os.sched_getaffinity(0)))


def machine_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def machine_host() -> placement.Host:
    """The lab's implicit host: this machine's online CPUs and memory."""
    return placement.local_host(machine_cpus(), machine_memory(), LOCAL)


def added_hosts(state: LabState) -> list[str]:
    """The hosts ``host add`` made on the running lab, in order."""
    p = state.dir / "hosts-added.json"
    try:
        return list(json.loads(p.read_text()))
    except FileNotFoundError:
        return []


def save_added_hosts(state: LabState, names: list[str]) -> None:
    _atomic_write(state.dir / "hosts-added.json", json.dumps(names))


def has_local(state: LabState, plan: Plan) -> bool:
    """Whether the lab has the implicit host: its file named no hosts."""
    added = set(added_hosts(state))
    return all(h.name in added for h in plan.hosts)


def hosts_of(state: LabState, plan: Plan) -> list[placement.Host]:
    """The lab's hosts (implicit ``local`` first, then ``plan.hosts`` in order) with what their
    functions take; ``Host.functions`` names the functions of the instances on each."""
    out: list[placement.Host] = [machine_host()] if has_local(state, plan) else []
    for hp in plan.hosts:
        out.append(placement.Host(hp.name, float(len(hp.cpus)) or machine_cpus(),
                                  hp.memory or machine_memory()))
    by_name = {h.name: h for h in out}
    added = set()
    for add in record.placed(state):
        for n in add.nodes:
            added.add(n.node)
            h = by_name.get(n.host)
            if h is not None:
                h.used_cpu += n.cpu
                h.used_memory += n.memory
                h.functions.append(n.function)
    for node, f in plan.functions.items():
        if node in added:
            continue
        on = plan.host_of(node)
        held = by_name.get(on.name if on else LOCAL)
        if held is not None:
            held.used_cpu += float(f.params.get("cpu") or 0)
            held.used_memory += int(f.params.get("memory") or 0)
    return out


def instances_by_host(state: LabState) -> dict[str, list[str]]:
    """host -> the added instances placed on it."""
    out: dict[str, list[str]] = {}
    for add in record.placed(state):
        for n in add.nodes:
            out.setdefault(n.host, []).append(n.node)
    return out
