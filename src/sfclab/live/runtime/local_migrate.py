"""``chain migrate`` (and so ``host rm --drain``) on this machine: the ``local`` runtime's
``migrate`` (:class:`~sfclab.live.runtime.local.LocalLive`), make-before-break, in the four
steps of :mod:`sfclab.plan.migration` once :mod:`sfclab.live.ops.migrate` has planned the
clone:

1. **Apply the clone** (:func:`_apply_clone`): the change from the lab's plan to the plan with
   the clone, journaled and made by the build engine of ``up`` (:mod:`sfclab.realize.change`,
   through :mod:`sfclab.live.chains.wire`; on another emulated host, with its tunnel), its
   programs loaded, the attach node's program pointed at it, *ready*
   (:func:`~sfclab.live.chains.handover.ready`), its labels and the new paths written (nothing
   uses them yet) and connection-tracking state copied (:mod:`sfclab.live.chains.conntrack`);
   a failure removes the clone the same way as step 4 and puts the plan and record back.
2. **Switch** (:func:`_switch`), the one live-specific step: each direction's slot table in
   one map update, the switched plan saved under the same slot lock, so the watcher never acts
   on a plan older than the slot tables.
3. **Drain** (:func:`_drain`): the entries the old instance made meanwhile copied again, then
   it is left until no packet entered it for ``drain_s``
   (:func:`~sfclab.live.chains.moves.drain`).
4. **Apply the removal** (:func:`_apply_removal`): the diff from the switched plan to the plan
   without the old instance, taken out by the engine's parts as ``down`` takes out a lab
   (:func:`sfclab.live.chains.wire.remove_nodes`; a lab file's node only retired:
   :func:`~sfclab.live.chains.handover.retire`), its paths cleared and freed labels deleted,
   the plan and record naming the clone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...plan import migration
from ...plan.model import Plan
from ...plan.sfc import SteeringPlan
from ...realize.dataplane import DataPlane
from ...realize.functions import instantiate
from ...realize.state import LabState
from ..chains import conntrack, handover, moves, tables, wire
from .. import record
from ..health import watcher
from ..record import steering_of
from ..record import slot_lock

if TYPE_CHECKING:
    from ...plan.migration import Migration
    from ..chains.moves import Owner
    from ..request import MigrateInstance

Copied = tuple[int, set[tuple[str, ...]], list[str]]


def migrate(state: LabState, req: MigrateInstance, plan: Plan, own: Owner, m: Migration,
            t0: float) -> dict[str, Any]:
    """The steps of the module's docstring; ``chain migrate``'s answer."""
    add, old, clone = own.add, m.old, m.clone
    sp = steering_of(plan)
    moved, seen, errors = _apply_clone(state, req, plan, own, m)
    switched, switch_s = _switch(state, m)
    add.directions = [next((nd for nd in m.news if nd.index == d.index), d)
                      for d in add.directions]
    add.hops += m.new_hops
    moves.save(state, own, "migrating")
    n2, e2, drained = _drain(req, sp, m, seen)
    final, freed = migration.removal(switched, old, own.lab_file)
    errors += e2 + _apply_removal(state, req, sp, own, m, switched, final, freed)
    moves.finish(state, own, clone, final, freed, m.host, switch_s, moved + n2, drained)
    return {"lab": req.lab, "chain": add.chain, "instance": old.node, "clone": clone.node,
            "host": m.host, "switch_seconds": round(switch_s, 6),
            "conntrack_moved": moved + n2, "conntrack_errors": errors[:5], "drained": drained,
            "seconds": round(time.monotonic() - t0, 3)}


def _apply_clone(state: LabState, req: MigrateInstance, plan: Plan, own: Owner,
                 m: Migration) -> Copied:
    """Step 1: journal, then make; the connection-tracking entries copied (how many, the
    keys seen, the errors)."""
    old, clone, merged, msp = m.old, m.clone, m.merged, steering_of(m.merged)
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
        nodes = {n for d in m.news for p in d.paths for n in p.nodes}
        netns_of = {n.node: n.name for n in merged.namespaces}
        ifaces = tables.interfaces(netns_of, nodes)
        with DataPlane(req.lab) as dp:
            tables.write_labels(dp, msp, m.new_hops, ifaces, netns_of)
            for d in m.news:
                assert d.path_base is not None
                tables.write_paths(dp, d, d.path_base, ifaces, msp)
        if req.conntrack:
            return conntrack.copy(old.netns, clone.netns)
        return 0, set(), []
    except BaseException:  # the clone goes as step 4 takes an instance out: a plan diff
        wire.remove_nodes(state, merged, plan, [clone])
        own.add.nodes.remove(clone)
        moves.save(state, own, "up")
        record.save_plan(state, plan)
        raise


def _drain(req: MigrateInstance, sp: SteeringPlan, m: Migration,
           seen: set[tuple[str, ...]]) -> tuple[int, list[str], bool]:
    """Step 3: what the old instance made since the first copy, copied; then until no packet
    entered it for ``req.drain_s``.  The entries copied, their errors, whether it went
    quiet."""
    n2, e2 = 0, list[str]()
    with DataPlane(req.lab) as dp:
        if req.conntrack:
            n2, _, e2 = conntrack.copy(m.old.netns, m.clone.netns, skip=seen)
        return n2, e2, moves.drain(dp, sp.node_ids[m.old.node], req.drain_s)


def _apply_removal(state: LabState, req: MigrateInstance, sp: SteeringPlan, own: Owner,
                   m: Migration, switched: Plan, final: Plan, freed: list[int]) -> list[str]:
    """Step 4: the old instance taken out (the diff from ``switched`` to ``final``; a lab
    file's node only retired), its old paths cleared and the labels it freed deleted; the
    errors."""
    old = m.old
    if own.lab_file:  # its namespace and links stay: the lab's routes and other paths cross it
        errors = handover.retire(state, switched, old.node, old.netns)
    else:
        errors = wire.remove_nodes(state, switched, final, [old])
    with DataPlane(req.lab) as dp:
        tables.clear_old_paths(dp, sp, m.olds)
        tables.delete_labels(dp, freed)
    return errors


def _switch(state: LabState, m: Migration) -> tuple[Plan, float]:
    """Step 2: slot tables and the plan together (the watcher waits for both); the switched
    plan and the seconds the slot updates took."""
    switched = migration.switched(m.merged, m.news)
    olds, news = m.olds, m.news
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
