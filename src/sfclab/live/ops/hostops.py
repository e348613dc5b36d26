"""``sfclab host add | rm | ls``: hosts added to and removed from a running lab (emulated
hosts; on a lab whose hosts are driven over SSH, real machines: ``--ssh``,
:mod:`sfclab.live.hosts.join`).

**What an added host is.**  Its context namespace ``sfclab:<lab>:@<host>`` and its cgroup
``sfclab:<lab>:@<host>`` (cpuset: ``cpus`` of the machine's online CPUs, handed out in turn
after those of the hosts before it; memory: ``memory.limit_in_bytes``), both journaled before
they are made, so ``down`` removes them (after ``kill -9`` too): a change of one host,
journaled and made by the hosts' part of the build engine of ``up``
(:mod:`sfclab.realize.change`).  Its plan joins ``plan.hosts``
and its name ``hosts-added.json`` (:mod:`sfclab.live.hosts.capacity`).  It is joined to the underlay
when an instance is first placed on it away from its attach node
(:mod:`sfclab.live.hosts.underlay`).

**What placing an instance on a host means here.**  The instance's processes join the host's
cgroups (its CPUs and memory are the host's), and placement accounts its needs there.  Its
link to an attach node on another host is a VXLAN tunnel through the two hosts' contexts, as
the lab file's hosted links are (:mod:`.tunnels`); on the same host a plain veth pair.

``host rm`` removes only hosts ``host add`` made, and refuses while added instances run there
unless ``drain``: each is then migrated (make-before-break, :func:`.migrate.migrate_locked`) to
a host placement chooses among the others, and only then the host goes.  Every command holds
the lab's lock.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from ...errors import LabError, SpecError
from ...plan import placement
from ...plan.model import HostPlan, Plan
from ...plan.names import host_cgroup, host_netns
from ...realize import change, lifecycle
from ...realize.hosts import inspect_links
from ...realize.state import LabState
from ...spec.limits import MAX_HOST_CPUS, machine_cpus, machine_memory
from ...spec.quantities import MAX_SIZE
from ..hosts import join as live_ssh_join, underlay
from .. import record
from ..runtime.table import live_for
from ..hosts.capacity import (LOCAL, added_hosts, has_local, hosts_of, instances_by_host,
                              save_added_hosts)
from .migrate import migrate_locked

HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}\Z")
MIN_MEMORY = 8 << 20
DEFAULT_WAIT_S = 60.0


def _up(state: LabState) -> Plan:
    _, plan = lifecycle.load_plan(state.name)
    if state.meta().get("status") != "up":
        raise LabError(f"lab '{state.name}' is not up")
    return plan


def check_host_request(name: str, cpus: int, memory: int, *, emulated: bool = True) -> None:
    """Bad input raises :class:`SpecError` naming the place (exit 2).  An emulated host gets
    a share of this machine: at most its CPUs (:func:`~sfclab.spec.limits.machine_cpus`) and
    its memory; a host over SSH at most :data:`~sfclab.spec.limits.MAX_HOST_CPUS` and
    :data:`~sfclab.spec.quantities.MAX_SIZE` here (its scan bounds it further)."""
    if not isinstance(name, str) or not HOST_NAME_RE.match(name):
        raise SpecError(f"expected a host name of letters, digits, '-' and '_' (at most 32), "
                        f"got {name!r}", place="name")
    most_cpus = machine_cpus() if emulated else MAX_HOST_CPUS
    where = " (this machine's)" if emulated else ""
    if isinstance(cpus, bool) or not isinstance(cpus, int) or not 1 <= cpus <= most_cpus:
        raise SpecError(f"expected a count of CPUs from 1 to {most_cpus}{where}, got {cpus!r}",
                        place="cpus")
    most_memory = machine_memory() if emulated else MAX_SIZE
    if isinstance(memory, bool) or not isinstance(memory, int) or \
            not MIN_MEMORY <= memory <= most_memory:
        raise SpecError(f"expected a memory size from 8M to {most_memory >> 20}M{where}, got "
                        f"{memory!r}", place="memory")


def _cpus_for(plan: Plan, count: int) -> list[int]:
    online = sorted(os.sched_getaffinity(0))
    start = sum(len(h.cpus) for h in plan.hosts)
    return sorted({online[(start + i) % len(online)] for i in range(count)})


def add_host(lab: str, name: str, cpus: int, memory: int,
             wait_s: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """Add emulated host ``name`` with ``cpus`` CPUs and ``memory`` bytes to running ``lab``."""
    check_host_request(name, cpus, memory)
    state = LabState(lab)
    t0 = time.monotonic()
    with record.lab_lock(state, wait_s, "host add"):
        plan = _up(state)
        live_for(state).refuse_emulated_join()
        taken = [h.name for h in hosts_of(state, plan)]
        if name in taken or (name == LOCAL and has_local(state, plan)):
            raise SpecError(f"lab '{lab}' already has a host '{name}' (hosts: "
                            f"{', '.join(taken)})", place="name")
        h = HostPlan(name, host_netns(lab, name), "", "", host_cgroup(lab, name),
                     _cpus_for(plan, cpus), memory, True, [])
        made = Plan(lab, plan.tag, hosts=[h])  # the change: the host alone, no underlay yet
        change.journal(state, made)
        save_added_hosts(state, added_hosts(state) + [name])
        try:
            plan.hosts.append(h)
            change.make(state, plan, made)  # its context and cgroups, as up makes a host's
            record.save_plan(state, plan)
        except BaseException:
            live_for(state).leave(h)
            save_added_hosts(state, [x for x in added_hosts(state) if x != name])
            raise
        record.event(state, "host-added", host=name, cpus=h.cpus, memory=memory)
    return {"lab": lab, "host": name, "context": h.netns, "cgroup": h.cgroup, "cpus": h.cpus,
            "memory": memory, "seconds": round(time.monotonic() - t0, 3)}


def add_ssh_host(lab: str, name: str, ssh: str | None, key: str | None, port: int | None,
                 cpus: int | None = None, memory: int | None = None, *,
                 agent_state: str | None = None,
                 wait_s: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """``host add --ssh``: a real machine joins running ``lab`` (hosts driven over SSH only;
    scanned, checked, journaled, placed on the underlay: :mod:`sfclab.live.hosts.join`).  On a lab
    with chains every host's agent is then given the new peers list (the runtime's ``watch``):
    the watchers already running accept the new host's reports once an instance lands there
    (``chain migrate --to`` or ``chain add`` start its own watcher)."""
    check_host_request(name, 1 if cpus is None else cpus,
                       MIN_MEMORY if memory is None else memory, emulated=False)
    live_ssh_join.check_request(ssh, key, port)
    assert ssh is not None
    state = LabState(lab)
    t0 = time.monotonic()
    with record.lab_lock(state, wait_s, "host add"):
        plan = _up(state)
        rt = live_for(state)
        rt.refuse_machine_join(plan)
        taken = [h.name for h in hosts_of(state, plan)]
        if name in taken:
            raise SpecError(f"lab '{lab}' already has a host '{name}' (hosts: "
                            f"{', '.join(taken)})", place="name")
        d = rt.join_machine(plan, name, ssh, key, port, cpus, memory, agent_state)
        record.save_plan(state, plan)
        save_added_hosts(state, added_hosts(state) + [name])
        record.event(state, "host-added", host=name, cpus=d["cpus"], memory=d["memory"],
                     ssh=d["ssh"])
        if plan.steering:  # every host's watcher learns its new peer (it holds nothing yet)
            d["watcher"] = rt.watch(plan)["watcher"]
    return {**d, "seconds": round(time.monotonic() - t0, 3)}


def remove_host(lab: str, name: str, drain: bool = False,
                wait_s: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """Remove host ``name`` (one ``host add`` made); with ``drain``, migrate its instances
    to other hosts first."""
    state = LabState(lab)
    t0 = time.monotonic()
    moved: list[dict[str, Any]] = []
    with record.lab_lock(state, wait_s, "host rm"):
        plan = _up(state)
        added = added_hosts(state)
        if name not in added:
            names = [h.name for h in hosts_of(state, plan)]
            if name in names:
                raise LabError(f"host '{name}' is one of lab '{lab}''s own (from its lab "
                               "file or the machine itself); only hosts added with 'sfclab "
                               "host add' can be removed")
            raise LabError(f"lab '{lab}' has no host '{name}' (hosts: {', '.join(names)})")
        there = instances_by_host(state).get(name, [])
        if there and not drain:
            raise LabError(f"host '{name}' runs functions ({', '.join(there)}); migrate them "
                           "away first, or remove it with --drain")
        from ..request import MigrateInstance  # light start-up: host ls and add load no models

        for inst in there:
            target = _target(state, lifecycle.load_plan(lab)[1], inst, name)
            d = migrate_locked(state, MigrateInstance(lab, inst, target, wait_s=wait_s),
                               time.monotonic())
            moved.append({"instance": inst, "clone": d["clone"], "host": target,
                          "switch_seconds": d["switch_seconds"]})
        _, plan = lifecycle.load_plan(lab)
        h = next(x for x in plan.hosts if x.name == name)
        # an emulated host's cgroups and namespace go; a host driven over SSH: its agent
        # removes its part, then it leaves the journal (refused while it could not)
        errors = live_for(state).leave(h)
        underlay.forget_host(state, name)
        plan.hosts = [x for x in plan.hosts if x.name != name]
        record.save_plan(state, plan)
        save_added_hosts(state, [x for x in added_hosts(state) if x != name])
        record.event(state, "host-removed", host=name, moved=moved)
    return {"lab": lab, "host": name, "moved": moved, "errors": errors,
            "seconds": round(time.monotonic() - t0, 3)}


def _target(state: LabState, plan: Plan, instance: str, leaving: str) -> str:
    """Where placement puts ``instance`` among the hosts other than ``leaving``."""
    add = next(a for a in record.placed(state)
               if any(n.node == instance for n in a.nodes))
    n = next(x for x in add.nodes if x.node == instance)
    others = [h for h in hosts_of(state, plan) if h.name != leaving]
    try:
        return placement.place([placement.Need(n.function, instance, n.cpu, n.memory)],
                               others)[instance]
    except placement.NoRoom as e:
        raise LabError(f"cannot drain host '{leaving}': {e}") from None


def list_hosts(lab: str) -> list[dict[str, Any]]:
    """Each host: capacity, use, free, the instances ``chain add`` placed there and the lab
    file's nodes on it."""
    state = LabState(lab)
    if not state.exists:
        raise LabError(f"no lab named '{lab}'")
    _, plan = lifecycle.load_plan(lab)
    added = set(added_hosts(state))
    inst = instances_by_host(state)
    links = inspect_links(plan, live=True)  # the lab file's tunnels and added instances'
    out = []
    for h in hosts_of(state, plan):
        hp = next((x for x in plan.hosts if x.name == h.name), None)
        own = [] if hp is None else [x for x in hp.nodes if x not in inst.get(h.name, [])]
        if hp is None:  # the implicit host holds the nodes no host holds
            held = {x for p in plan.hosts for x in p.nodes}
            own = [ns.node for ns in plan.namespaces
                   if ns.node not in held and ns.node not in
                   {i for v in inst.values() for i in v}]
        out.append({"host": h.name, "added": h.name in added, "cpus": h.cpus,
                    "memory": h.memory, "used_cpu": round(h.used_cpu, 6),
                    "used_memory": h.used_memory, "free_cpu": h.free_cpu,
                    "free_memory": h.free_memory, "instances": inst.get(h.name, []),
                    "nodes": own, "cgroup": hp.cgroup if hp else None,
                    "tunnels": [_tunnel_row(hl) for hl in links
                                if any(e["host"] == h.name for e in hl["ends"])]})
    return out


def _tunnel_row(hl: dict[str, Any]) -> dict[str, Any]:
    """A hosted link as ``host ls`` shows it: VNI, ends (node@host), attach, whether made."""
    return {"link": "added" if hl["added"] else hl["link"], "vni": hl["vni"],
            "attach": hl["attach"], "mtu": hl["mtu"],
            "ends": [f"{e['node']}@{e['host']}" for e in hl["ends"]],
            "present": all(e.get("present", True) for e in hl["ends"])}
