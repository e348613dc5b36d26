"""The agent's verbs of ``chain add`` and ``chain rm`` on a lab of hosts driven over SSH (in the
agent's one table, :mod:`sfclab.live.runtime.agent_verbs`): the "make it on this host" steps of
:mod:`sfclab.live.ops.add`, run by the host's agent there.

This machine plans the chain exactly as for emulated hosts (placement, wiring, labels,
tunnels: :mod:`sfclab.plan.chainadd`) and sends every host the merged plan and the addition;
each host makes only what is its own (:mod:`sfclab.live.runtime.ssh` says who asks what):

- ``chain-make`` ``{"lab", "plan", "addition", "addresses"}``: this host's share of the
  change that adds the nodes (:func:`_share`: the instances placed here, the ends of their
  links at attach nodes here, a tunnel's end in this host's own root namespace) journaled
  first by the engine's parts, as ``up`` journals a lab's (the tunnel devices in the host's
  context by mark; the share's bpffs directory when the lab had no chain), then the host's
  part saved with the new nodes (so ``down``, and ``down`` after a ``kill -9`` of this
  machine, stops their functions and removes them), then the share made by the build engine
  of ``up`` (:func:`sfclab.live.chains.wire.make_change`: namespaces, veths or tunnel ends
  through the hosted links' part, addresses, routes), interfaces fitted to labels, derived
  MACs (:func:`sfclab.plan.sfc_hosts.interface_mac`), the functions with their cgroup
  limits and the programs;
- ``chain-tables`` ``{"lab", "plan", "addition", "classifiers": bool, "macs"}``: the labels
  its nodes own, the paths and slots of directions whose ingress is here, then (second call)
  their classifier entries: traffic enters the chain only once every host has its entries;
  ``macs``: the MACs every host's ``chain-make`` answered for its interfaces the addition
  addresses (an added chain's egress, a lab-file node, has the MAC it was made with, not a
  derived one);
- ``chain-unmake`` ``{"lab", "plan", "after", "addition", "freed", "drain", "clear",
  "nsh_clear", "later"}``: classifier entries out (``later``: those ``chain classify`` added,
  by direction), a drain, slots, paths, this host's nodes' NSH entries and freed labels out
  (``clear``: more path ranges, ``nsh_clear``: more NSH entries, a migration's old ones), the
  nodes removed (the plan diff from ``plan`` to ``after``, this
  host's share, by the engine's parts, the tunnel ends among them:
  :func:`sfclab.live.chains.wire.remove_nodes`), the part saved as
  ``after`` has it (``phase`` ``classifiers``: only the classifier entries; ``rest``: all
  but them, no drain).  Tolerates halves; answers its errors;
- ``chain-check`` ``{"lab", "plan", "addition"}``: before anything, whether another chain
  holds one of the addition's classifier entries at an ingress here;
- ``chain-switch`` ``{"lab", "plan", "addition", "slots", "after"}``: a migration's switch,
  the slot tables of the directions whose ingress is here (``chain-tables`` with ``slots:
  false`` wrote their new paths first), and the part saved with the new paths, under the
  slot lock the host's watcher takes (:mod:`sfclab.live.runtime.ssh`).  Armed: it makes ready,
  answers ``armed`` and writes on ``go`` (:func:`sfclab.hosts.ssh.call_armed`), so the ingress hosts
  of both directions switch within one round trip of each other.
- ``chain-ready`` ``{"lab", "plan", "addition", "node"}``: a migration's clone placed here
  forwards (its program runs, its attach node's end answers a ping), as on emulated hosts;
- ``chain-retire`` ``{"lab", "plan", "node"}``: a lab file's function node here that a clone
  replaced: its function stopped, its nftables flushed; namespace and links stay (transit);
- ``chain-watch``, ``chain-health``: the host's health watcher (:mod:`.agent_health`);
- ``conntrack-list``, ``conntrack-make``: a migration's connection-tracking state, read on
  the old instance's host and made on the clone's (:mod:`.agent_conntrack`).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from ...errors import LabError, SpecError
from ...kernel import netns
from ...plan import diff
from ...plan.chainadd import Addition, NewNode, change_of
from ...plan.model import HostPlan, Plan
from ...plan.sfc import SteeringPlan
from ...plan.sfc_hosts import addressed, foreign_sid_labels, interface_mac, remote_host
from ...plan.tunnels import attach_host
from ...realize import agent, change, dataplane
from ...realize.dataplane import DataPlane, Iface
from ...realize.state import LabState
from ...realize.step import step
from . import agent_health
from ..chains import handover, tables, wire
from .. import record
from ..health import watcher
from .agents import part_of




def _load(req: dict[str, Any]) -> tuple[LabState, Plan, str, Plan, Addition]:
    state = LabState(str(req["lab"]))
    d = state.plan()
    if d is None and req.get("part"):  # a host 'host add --ssh' joined: its empty part first
        agent.up({"plan": req["part"]})
        d = state.plan()
    if d is None:
        raise LabError(f"lab '{req['lab']}' has no part on this host")
    part = Plan.from_dict(d)
    host = remote_host(part)
    if host is None:
        raise LabError(f"lab '{req['lab']}''s part here is not a host's part")
    return state, part, host.name, Plan.from_dict(req["plan"]), Addition.from_dict(
        req["addition"])


def _new_part(part: Plan, merged: Plan, me: str) -> Plan:
    """The host's part as ``merged`` has it, with the host as its agent knows it (its own
    CPUs and underlay interface) and the whole steering (each host's share is its own)."""
    out = part_of(merged, me)
    hp = part.hosts[0]
    hp.nodes = list(out.hosts[0].nodes)
    out.hosts = [hp]
    out.steering = merged.steering
    return out


def _share(part: Plan, merged: Plan, me: str, nodes: list[NewNode]) -> Plan:
    """This host's share of the change that adds ``nodes`` (:func:`change_of`): the nodes
    placed here, the ends of their links at attach nodes here (a tunnel's end in this host's
    own context among them), and this host, whose context is this machine's root namespace
    (its cgroup the lab's already)."""
    here = {n.node for n in nodes if n.host == me} | \
        {n.attach for n in nodes if attach_host(merged, n.attach) == me}
    made = diff.within(change_of(merged, {n.node for n in nodes}), here)
    made.hosts = [_own(part)]
    return made


def _own(part: Plan) -> HostPlan:
    """This host as a change names it: its context this machine's own root namespace, its
    cgroup the lab's already (empty: neither made nor removed by the change)."""
    return replace(part.hosts[0], cgroup="")


def make(req: dict[str, Any]) -> dict[str, Any]:
    state, part, me, merged, add = _load(req)
    mine = [n for n in add.nodes if n.host == me]
    attached = [n for n in add.nodes if n.host != me and attach_host(merged, n.attach) == me]
    top = dataplane.share_dir(merged.lab, me)
    made = _share(part, merged, me, mine + attached)
    with state.locked(), record.slot_lock(state):  # the host's watcher waits for it whole
        # the share's objects journaled by the engine's parts, as up journals a lab's (the
        # devices its tunnels put in this host's own context among them, by mark); the maps
        change.journal(state, made)
        if not part.steering:
            state.record([{"op": "bpffs", "path": str(top)}])
        record.save_plan(state, _new_part(part, merged, me))
        # by the build engine of up; functions later, once the ends have the MACs the other
        # hosts address them by
        wire.make_change(state, merged, made, functions=False)
        local = set(_new_part(part, merged, me).hosts[0].nodes)
        for node, ifname, mtu in add.mtu:
            if node in local:
                wire.set_link(merged, node, ifname, mtu=mtu)
        for node, ifname, offl in add.offloads:
            if node in local:
                wire.set_link(merged, node, ifname, offloads=offl)
        for node, ifname in add.single_segment:
            if node in local:
                wire.set_link(merged, node, ifname, gso_max_segs=1)
        for n in add.nodes:  # the MACs every other host addresses these ends by
            for node, ifname in ((n.node, n.ifname), (n.attach, n.attach_ifname)):
                if node in local:
                    _set_mac(merged, node, ifname)
        for n in mine:
            wire.start_function(state, merged, n.node)
        msp = merged.steering or SteeringPlan()
        if any(node in local for node in add.attach_progs):
            dataplane.ensure_bpffs()
            (top / "maps").mkdir(parents=True, exist_ok=True)
        for node, progs in add.attach_progs.items():
            if node in local:
                wire.load_programs(merged, node, msp.node_ids[node], progs, top / "maps")
        for host, _ctx, port in wire.napi_ports(merged, msp):
            if host == me:  # its tunnels' ports are in this host's own context
                wire.napi_on(port, None)
        macs = _macs(merged, add, local)
    return {"host": me, "made": [n.node for n in mine], "ends": [n.node for n in attached],
            "macs": macs}


def _macs(plan: Plan, add: Addition, local: set[str]) -> dict[str, str]:
    """The MACs of this host's interfaces the addition's hops and paths address
    (``NODE/IFNAME`` -> MAC), read live: the other hosts address them by these.  A lab-file
    node that was no chain's node at ``up`` (an added chain's egress) has no derived MAC."""
    wanted = {(n, i) for n, i in addressed(add.hops, add.directions) if n in local}
    live = tables.interfaces({n.node: n.name for n in plan.namespaces},
                             sorted({n for n, _ in wanted}))
    return {f"{n}/{i}": live[(n, i)].mac.hex(":") for n, i in sorted(wanted) if (n, i) in live}


def _set_mac(plan: Plan, node: str, ifname: str) -> None:
    ipr = netns.iproute(plan.netns_of(node))
    try:
        with step(f"MAC of {ifname} of {node}"):
            ipr.link("set", index=ipr.link_lookup(ifname=ifname)[0],
                     address=dataplane.mac_text(interface_mac(plan.lab, node, ifname)))
    finally:
        ipr.close()


def _ifaces(plan: Plan, sp: SteeringPlan, local: set[str],
            known: dict[str, str] | None = None) -> dict[tuple[str, str], Iface]:
    """Local chain nodes' interfaces read live; every other one by the MAC its host read
    (``known``: ``NODE/IFNAME`` -> MAC, from ``chain-make``), else by its derived MAC."""
    out = {(node, ifname): Iface(0, interface_mac(plan.lab, node, ifname))
           for node, ifname in addressed(sp.hops, sp.directions)}
    for key, mac in (known or {}).items():
        node, _, ifname = key.partition("/")
        out[(node, ifname)] = Iface(0, bytes.fromhex(mac.replace(":", "")))
    live = tables.interfaces({n.node: n.name for n in plan.namespaces},
                             [n for n in sp.node_ids if n in local])
    out.update(live)
    return out


def write_tables(req: dict[str, Any]) -> dict[str, Any]:
    state, part, me, merged, add = _load(req)
    local = set(part.hosts[0].nodes)
    msp = merged.steering or SteeringPlan()
    hops = [h for h in add.hops if h.node in local]
    mine = [d for d in add.directions if d.ingress in local]
    if not hops and not mine:
        return {"labels": 0, "directions": 0}
    with state.locked(), record.slot_lock(state), \
            DataPlane(merged.lab, dataplane.share_dir(merged.lab, me)) as dp:
        if req.get("classifiers"):
            for d in mine:
                tables.write_classifiers(dp, msp, d)
        else:
            ifaces = _ifaces(merged, msp, local, req.get("macs"))
            tables.write_labels(dp, msp, hops, ifaces,
                                {n.node: n.name for n in merged.namespaces if n.node in local})
            # the SIDs of new SRv6 paths through this host name other hosts' labels too
            dp.write_sid_owners(msp, foreign_sid_labels(msp, local, add.directions))
            for d in add.directions:  # NSH: this host's nodes' hops on every new path
                dp.write_nsh(msp, d, local)
            for d in mine:
                assert d.path_base is not None
                tables.write_paths(dp, d, d.path_base, ifaces, msp, local)
                if req.get("slots", True):  # a migration's new paths wait for the switch
                    tables.write_slots(dp, d, tables.slot_paths(msp, d))
    return {"labels": len(hops), "directions": len(mine)}


def unmake(req: dict[str, Any]) -> dict[str, Any]:
    state, part, me, merged, add = _load(req)
    errors: list[str] = []
    local = set(part.hosts[0].nodes)
    msp = merged.steering or SteeringPlan()
    mine_d = [d for d in add.directions if d.ingress in local]
    freed = [int(x) for x in req.get("freed", [])]
    owned = {h.label for h in msp.hops if h.node in local}
    later = dict(req.get("later") or {})  # entries 'chain classify' added, by direction
    with state.locked():
        try:
            dp: DataPlane | None = DataPlane(merged.lab, dataplane.share_dir(merged.lab, me))
        except Exception as e:
            dp = None
            if mine_d or set(freed) & owned or any(c[0] in local for c in req.get("clear", [])):
                errors.append(str(e))
        phase = req.get("phase")  # "classifiers": only those; "rest": all but those
        if dp is not None:
            with dp:
                for d in mine_d if phase != "rest" else []:
                    try:
                        tables.delete_classifiers(dp, msp, d, later.get(str(d.index)))
                    except Exception as e:
                        errors.append(f"classifiers of direction {d.index}: {e}")
                if phase == "classifiers":
                    return {"host": me, "errors": errors}
                if phase is None:
                    time.sleep(float(req.get("drain", 0.05)))
                for d in mine_d:
                    try:
                        tables.clear_direction(dp, d, msp, local)
                    except Exception as e:
                        errors.append(f"direction {d.index}: {e}")
                try:  # NSH: this host's nodes' entries on the directions of other ingresses
                    dp.remove_nsh(k for d in add.directions if d not in mine_d
                                  for k, _ in dataplane.nsh_rows(msp, [d], local))
                    dp.remove_nsh(bytes.fromhex(k) for node, k in req.get("nsh_clear", [])
                                  if node in local)
                except Exception as e:
                    errors.append(f"NSH entries: {e}")
                for ingress, base, count in req.get("clear", []):  # a migration's old paths
                    if ingress in local:
                        try:
                            tables.clear_paths(dp, int(base), int(count))
                        except Exception as e:
                            errors.append(f"paths from {base}: {e}")
                try:
                    tables.delete_labels(dp, [x for x in freed if x in owned])
                except Exception as e:
                    errors.append(f"labels: {e}")
        if phase == "classifiers":  # (no maps here: nothing of that phase)
            return {"host": me, "errors": errors}
        after = Plan.from_dict(req["after"])
        # this host's share of the nodes' removal: the nodes here, and the ends of their
        # links at attach nodes here (their tunnels' devices in this host's context)
        here = {n.node for n in add.nodes if n.host == me} | \
            {n.attach for n in add.nodes if attach_host(merged, n.attach) == me}
        if here:
            errors += wire.remove_nodes(state, merged, after, add.nodes, here, _own(part))
        new = _new_part(part, after, me)
        record.save_plan(state, new)
        try:  # ended if nothing is left to watch here; started again if its namespace went
            agent_health.ensure(state, new)
        except LabError as e:
            errors.append(str(e))
    return {"host": me, "errors": errors}


def check(req: dict[str, Any]) -> dict[str, Any]:
    """Before anything: a classifier entry of the addition that another chain holds at an
    ingress here (``{"taken": {"message", "place"}}``), else ``{}``."""
    if LabState(str(req["lab"])).plan() is None:
        return {}  # a host that joined and holds nothing yet
    _state, part, me, merged, add = _load(req)
    local = set(part.hosts[0].nodes)
    mine = [d for d in add.directions if d.ingress in local]
    if not mine or not part.steering:
        return {}
    msp = merged.steering or SteeringPlan()
    try:
        dp = DataPlane(merged.lab, dataplane.share_dir(merged.lab, me))
    except Exception:
        return {}  # no maps here yet: no entry is taken
    with dp:
        for d in mine:
            try:
                tables.check_free(dp, msp, d, "")
            except SpecError as e:
                return {"taken": {"message": e.message, "place": e.place}}
    return {}


def switch(req: dict[str, Any]) -> Generator[None, None, dict[str, Any]]:
    """A migration's switch, armed (:data:`.agent_verbs.ARMED`): the slot tables of
    the directions whose ingress is here, each in one map update (``{"lab", "plan",
    "addition", "slots": {INDEX: [PATH, ...]}, "after"}``), and the part saved as ``after``
    (the plan with the new paths) under the slot lock, so the host's watcher never acts on
    paths older than its slot tables; paths through instances it found dead stay out.

    Everything is made ready first (the request read, the part to save made, the maps open);
    then it yields (the agent answers ``armed``) and, told ``go``, takes the lab and slot
    locks (the watcher holds the slot lock a few milliseconds at most) and writes, so every
    ingress host writes within one round trip of the others.  Closed instead of resumed, it
    has changed nothing."""
    state, part, me, merged, add = _load(req)
    local = set(part.hosts[0].nodes)
    slots = {int(k): [int(x) for x in v] for k, v in dict(req["slots"]).items()}
    mine = [d for d in add.directions if d.ingress in local and d.index in slots]
    if not mine:
        yield
        return {"directions": 0}
    with DataPlane(merged.lab, dataplane.share_dir(merged.lab, me)) as dp:
        after = _new_part(part, Plan.from_dict(req["after"]), me) if req.get("after") else None
        yield  # the locks only after "go": held while waiting, they would stop the watcher
        with state.locked(), record.slot_lock(state):
            gone = watcher.dead(state)
            for d in mine:
                assert d.path_base is not None
                if gone & {i for p in d.paths for i in p.instances}:
                    w = [0 if gone & set(p.instances) else p.weight for p in d.paths]
                    slots[d.index] = tables.slots_over(d, d.path_base, w)
                tables.write_slots(dp, d, slots[d.index])
            if after is not None:
                record.save_plan(state, after)
    return {"directions": len(mine)}


def ready(req: dict[str, Any]) -> dict[str, Any]:
    """A migration's clone placed here forwards (``{"lab", "plan", "addition", "node"}``):
    its program runs and its attach node's end answers a ping
    (:func:`sfclab.live.chains.handover.ready`); a :class:`LabError` naming it if not."""
    state, _part, me, merged, add = _load(req)
    n = next((x for x in add.nodes if x.node == req["node"] and x.host == me), None)
    if n is None:
        raise LabError(f"no clone '{req['node']}' of this migration on host {me}")
    handover.ready(state, merged, n.node, n.netns, n.gateway, n.attach)
    return {"host": me, "ready": n.node}


def retire(req: dict[str, Any]) -> dict[str, Any]:
    """A lab file's function node here, replaced by its clone, stops being a function
    (``{"lab", "plan", "node"}``, the plan still naming its function): its function stopped
    and its nftables flushed (:func:`sfclab.live.chains.handover.retire`); its namespace and links
    stay (transit).  The errors, going on past them."""
    state = LabState(str(req["lab"]))
    plan = Plan.from_dict(req["plan"])
    node = str(req["node"])
    part = state.plan()
    here = remote_host(Plan.from_dict(part)) if part is not None else None
    if here is None or node not in here.nodes:
        raise LabError(f"lab '{req['lab']}' has no node '{node}' on this host")
    with state.locked():
        errors = handover.retire(state, plan, node, plan.netns_of(node))
    return {"errors": errors}


#: this module's verbs (every verb of the agent, in one table: :mod:`.agent_verbs`)
VERBS = {"chain-make": make, "chain-tables": write_tables, "chain-unmake": unmake,
         "chain-check": check, "chain-ready": ready, "chain-retire": retire}


#: verbs that make ready, answer ``armed`` and act on ``go`` (:func:`sfclab.hosts.ssh.call_armed`)
ARMED = {"chain-switch": switch}
