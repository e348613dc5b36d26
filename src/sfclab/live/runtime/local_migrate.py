"""``chain migrate`` (and so ``host rm --drain``) on this machine: the ``local`` runtime's
``migrate`` (:class:`~sfclab.live.runtime.local.LocalLive`), make-before-break as
:mod:`sfclab.live.ops.migrate` plans it.

1. **Clone** (:func:`_make_clone`): its objects journaled, the plan and record saved, then
   the clone's node and function made by the build engine of ``up``
   (:mod:`sfclab.realize.change`; on another emulated host, with its tunnel by
   :mod:`sfclab.live.chains.wire`), its programs loaded, the attach node's
   program pointed at it, *ready* (:func:`~sfclab.live.chains.handover.ready`), its labels and the
   new paths written (nothing uses them yet) and connection-tracking state copied
   (:mod:`sfclab.live.chains.conntrack`); a failure removes the clone and puts the plan and record
   back.
2. **Switch** (:func:`_switch`): each direction's slot table in one map update, the plan with
   the new paths saved under the same slot lock, so the watcher never acts on a plan older than
   the slot tables.
3. **Drain**: the entries the old instance made meanwhile copied again, then it is left until
   no packet entered it for ``drain_s`` (:func:`~sfclab.live.chains.moves.drain`).
4. **Break**: the old instance removed (a lab file's node only retired:
   :func:`~sfclab.live.chains.handover.retire`), its paths cleared and freed labels deleted, the
   plan and record naming the clone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...plan.chainadd import NewNode
from ...plan.model import Plan
from ...plan.sfc import DirectionPlan, Hop
from ...realize.dataplane import DataPlane, path_base
from ...realize.functions import instantiate
from ...realize.state import LabState
from ..chains import conntrack, handover, moves, tables, wire
from .. import record
from ..health import watcher
from ..record import steering_of
from ..record import slot_lock

if TYPE_CHECKING:
    from ..chains.moves import Owner
    from ..request import MigrateInstance

Copied = tuple[int, set[tuple[str, ...]], list[str]]


def migrate(state: LabState, req: MigrateInstance, plan: Plan, merged: Plan, own: Owner,
            clone: NewNode, news: list[DirectionPlan], olds: list[DirectionPlan],
            new_hops: list[Hop], host: str, t0: float) -> dict[str, Any]:
    """The steps of the module's docstring; ``chain migrate``'s answer."""
    add, old, lab_file = own.add, own.old, own.lab_file
    sp = steering_of(plan)
    moved, seen, errors = _make_clone(state, req, plan, merged, own, clone, news, new_hops)
    switched, switch_s = _switch(state, merged, news, olds)
    add.directions = [next((nd for nd in news if nd.index == d.index), d)
                      for d in add.directions]
    add.hops += new_hops
    moves.save(state, own, "migrating")
    # --- drain: the old instance lets out what it holds -------------------------------------
    with DataPlane(req.lab) as dp:
        if req.conntrack:
            n2, _, e2 = conntrack.copy(old.netns, clone.netns, skip=seen)
            moved += n2
            errors += e2
        drained = moves.drain(dp, sp.node_ids[old.node], req.drain_s)
    # --- break: the old instance goes ------------------------------------------------------
    if lab_file:  # its namespace and links stay: the lab's routes and other paths cross it
        errors += handover.retire(state, switched, old.node, old.netns)
    else:
        errors += wire.remove_node(state, switched, old.node, old.netns,
                                   (old.attach, old.attach_ifname), old)
    final, freed = moves.final_plan(switched, old, lab_file)
    with DataPlane(req.lab) as dp:
        for d in olds:
            tables.clear_paths(dp, path_base(sp, d.index), len(d.paths))
        tables.delete_labels(dp, freed)
    moves.finish(state, own, clone, final, freed, host, switch_s, moved, drained)
    return {"lab": req.lab, "chain": add.chain, "instance": old.node, "clone": clone.node,
            "host": host, "switch_seconds": round(switch_s, 6), "conntrack_moved": moved,
            "conntrack_errors": errors[:5], "drained": drained,
            "seconds": round(time.monotonic() - t0, 3)}


def _make_clone(state: LabState, req: MigrateInstance, plan: Plan, merged: Plan, own: Owner,
                clone: NewNode, news: list[DirectionPlan], new_hops: list[Hop]) -> Copied:
    """Step 1: journal, then make; the connection-tracking entries copied (how many, the
    keys seen, the errors)."""
    old, msp = own.old, steering_of(merged)
    wire.journal_nodes(state, merged, [clone])
    own.add.nodes.append(clone)
    moves.save(state, own, "migrating")
    record.save_plan(state, merged)
    try:
        instantiate(state, merged, clone.node).check()
        wire.make_nodes(state, merged, [clone])
        wire.load_programs(merged, clone.node, msp.node_ids[clone.node],
                           msp.attach[clone.node])
        wire.load_programs(merged, old.attach, msp.node_ids[old.attach],
                           [("sfc_forward", clone.attach_ifname, "xdp")])
        handover.ready(state, merged, clone.node, clone.netns, clone.gateway, clone.attach)
        nodes = {n for d in news for p in d.paths for n in p.nodes}
        ifaces = tables.interfaces({n.node: n.name for n in merged.namespaces}, nodes)
        with DataPlane(req.lab) as dp:
            tables.write_labels(dp, msp, new_hops, ifaces)
            for d in news:
                assert d.path_base is not None
                tables.write_paths(dp, d, d.path_base, ifaces)
        if req.conntrack:
            return conntrack.copy(old.netns, clone.netns)
        return 0, set(), []
    except BaseException:
        wire.remove_node(state, merged, clone.node, clone.netns,
                         (clone.attach, clone.attach_ifname), clone)
        own.add.nodes.remove(clone)
        moves.save(state, own, "up")
        record.save_plan(state, plan)
        raise


def _switch(state: LabState, merged: Plan, news: list[DirectionPlan],
            olds: list[DirectionPlan]) -> tuple[Plan, float]:
    """Step 2: slot tables and the plan together (the watcher waits for both); the switched
    plan and the seconds the slot updates took."""
    switched = moves.switched_plan(merged, news)
    with DataPlane(state.name) as dp, slot_lock(state):
        # slot k keeps path k; paths through instances the watcher found dead stay out
        gone = watcher.dead(state)
        slotted = []
        for d, nd in zip(olds, news):
            assert nd.path_base is not None
            if gone & {i for p in nd.paths for i in p.instances}:
                w = [0 if gone & set(p.instances) else p.weight for p in nd.paths]
                slotted.append(tables.slots_over(nd, nd.path_base, w))
            else:
                slotted.append([nd.path_base + nd.paths[k].index for k in d.slots])
        t_sw = time.perf_counter()
        for nd, slots in zip(news, slotted):
            tables.write_slots(dp, nd, slots)
        switch_s = time.perf_counter() - t_sw
        record.save_plan(state, switched)
    return switched, switch_s
