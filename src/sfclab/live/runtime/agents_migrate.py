"""``chain migrate`` (and so ``host rm --drain``) on a lab of hosts driven by their agents: the
``ssh`` and ``kubernetes`` runtimes' ``migrate`` (:class:`~sfclab.live.runtime.agents.AgentLive`;
each call reaches a host over SSH or through its Node's agent's requests).

:func:`sfclab.live.ops.migrate.migrate_locked` plans the clone, its paths and labels as for
emulated hosts (:func:`sfclab.plan.migration.plan_clone`); here every host's agent
(:mod:`sfclab.live.runtime.agent_chain`) applies its share, make-before-break in the steps of
:mod:`sfclab.plan.migration` as on emulated hosts:

1. **Clone.**  ``chain-make`` on every host with the clone as the addition (its namespace,
   container if the instance has one -- the target host's agent checked its image first,
   :mod:`sfclab.live.ops.migrate` --, function, tunnel ends, its programs and the attach
   node's), then ``chain-tables`` without slots: its labels and the new paths, which nothing
   uses yet.
2. **Switch.**  ``chain-switch`` at the ingress hosts, armed
   (:meth:`~sfclab.realize.runtime.agents.AgentHosts.call_armed`): each host's agent first makes everything ready (its
   part to save made, the maps open) and answers ``armed``; only when all have is each told
   ``go``, and it takes its locks (not before: a held slot lock would hold up its watcher),
   rewrites each direction's slot table in one map update and saves the plan with the new
   paths under the slot lock.  The two directions of a symmetric
   chain have their ingresses on two hosts, so they switch within ``switch_seconds`` of each
   other (from ``go`` to the last answer: over SSH one round trip, no connection set-up; on
   Kubernetes the agents' watches of their requests); a host
   that cannot arm leaves every host unchanged.  Meanwhile one direction may cross the clone
   and the other the old instance; both tolerate that (below).
3. **Drain.**  The old instance's counters (read through the agents) are watched until no
   packet entered it for ``drain_s`` (at most 5 s).
4. **Apply the removal.**  ``chain-unmake`` of the old instance on every host: the diff from
   the switched plan to the final one (:func:`sfclab.plan.migration.removal`), each host's
   share taken out by its agent's engine parts (its node, the link's end at its attach node),
   its tunnel ends, the old paths, the labels nobody uses; the plan and record naming the
   clone.
5. **Watchers.**  Every host's agent is given the lab's peers, port and secret again (over
   SSH) and the watchers started where needed
   (:meth:`~sfclab.live.runtime.agents.AgentLive.start_watchers`, as
   ``chain add`` does): a clone on a host that held nothing of any chain (one ``host add --ssh``
   joined, or a lab-file host with no node) is probed there and reported to the ingress's host, so
   it fails over like any instance.  A host that could not start one is named in ``watcher_errors``.

**State.**  Between 1 and 2, the old instance's connection-tracking entries are read by its
host's agent (``conntrack-list``) and made in the clone by the clone's host's agent
(``conntrack-make``, :mod:`.agent_conntrack`: the parser and ``conntrack -I`` builder of
:mod:`sfclab.live.chains.conntrack`, one code path with emulated hosts); right after the switch a
second pass makes the entries the old instance made meanwhile (those already copied are skipped).
Both agents first make their instance liberal about TCP windows
(:func:`sfclab.live.chains.conntrack.tolerate_midstream`): an instance that sees a reply
acknowledging data it never forwarded would otherwise leave it untracked, untranslated, and a
NAT's own stack would reset the connection.

**Ready.**  Between 1 and the state's copy, the clone's host's agent checks that it forwards
(``chain-ready``, :func:`sfclab.live.chains.handover.ready`: its program runs, one ping to its
attach node's end), as on emulated hosts.

**Functions of the lab file's own chains** (see :mod:`sfclab.live.ops.migrate`) move the same way;
at 4 the lab-file node's host's agent only stops its function (``chain-retire``,
:func:`sfclab.live.chains.handover.retire`: processes, nftables flushed; namespace and links stay,
it becomes transit), and ``chain-unmake`` removes no node, only the old paths and freed
labels, saving each host's part as the final plan has it; the record is
``moved/<chain>.json``.
"""

from __future__ import annotations

import time

from typing import TYPE_CHECKING, Any

from ...plan import migration
from ...plan.chainadd import Addition, NewNode
from ...plan.model import Plan
from ...plan.sfc import DirectionPlan
from ...realize.dataplane import nsh_rows, path_base
from ..chains import moves
from .. import record
from ..health import watcher
from ..chains.moves import MAX_DRAIN_S
from ..record import steering_of
from ..record import slot_lock

if TYPE_CHECKING:
    from ...plan.migration import Migration
    from .agents import AgentLive
    from ..chains.moves import Owner
    from ..request import MigrateInstance


def migrate(rt: AgentLive, req: MigrateInstance, plan: Plan, own: Owner, m: Migration,
            t0: float) -> dict[str, Any]:
    """The steps of the module's docstring: apply the clone, switch, drain, apply the
    removal; ``chain migrate``'s answer."""
    state = rt.state
    add, old, lab_file = own.add, own.old, own.lab_file
    clone, merged, news, olds, new_hops, host = (m.clone, m.merged, m.news, m.olds,
                                                 m.new_hops, m.host)
    msp = steering_of(merged)
    sp = steering_of(plan)
    step1 = Addition(add.chain, add.attach, nodes=[clone],
                     node_ids={clone.node: msp.node_ids[clone.node]}, hops=new_hops,
                     directions=news,
                     attach_progs={clone.node: msp.attach[clone.node],
                                   old.attach: [("sfc_forward", clone.attach_ifname, "xdp")]},
                     source=add.source)
    add.nodes.append(clone)
    moves.save(state, own, "migrating")
    record.save_plan(state, merged)
    # --- apply the clone: each host's share of the change, made by its agent's engine -----
    ts = rt.targets()
    base = {"lab": state.name, "plan": merged.to_dict(), "addition": step1.to_dict()}
    moved = 0
    errors: list[str] = []
    seen: set[tuple[str, ...]] = set()
    try:
        rt.make_share(plan, merged, step1, lambda _m: None, slots=False)
        rt.call(ts[clone.host], "chain-ready", {**base, "node": clone.node},  # it forwards
                timeout=60)
        if req.conntrack:
            moved, seen, errors = move_conntrack(rt, ts, state.name, old, clone, set())
    except BaseException:
        rt.unmake_share(merged, step1, 0.0)
        add.nodes.remove(clone)
        moves.save(state, own, "up")
        record.save_plan(state, plan)
        raise
    # --- switch: the one live-specific step --------------------------------------------------
    switched = migration.switched(merged, news)
    with slot_lock(state):
        gone = watcher.dead(state)
        slots: dict[str, list[int]] = {}
        for d, nd in zip(olds, news):
            assert nd.path_base is not None
            from ..chains import tables

            if gone & {i for p in nd.paths for i in p.instances}:
                w = [0 if gone & set(p.instances) else p.weight for p in nd.paths]
                slots[str(nd.index)] = tables.slots_over(nd, nd.path_base, w)
            else:
                slots[str(nd.index)] = [nd.path_base + nd.paths[k].index for k in d.slots]
        at = _ingress_hosts(merged, news, ts)
        req_sw = {**base, "slots": slots, "after": switched.to_dict()}
        _, switch_s = rt.call_armed(at, "chain-switch", req_sw)
        record.save_plan(state, switched)
    add.directions = [next((nd for nd in news if nd.index == d.index), d)
                      for d in add.directions]
    add.hops += new_hops
    moves.save(state, own, "migrating")
    if req.conntrack:  # what the old instance made since the first pass
        n2, _, e2 = move_conntrack(rt, ts, state.name, old, clone, seen)
        moved += n2
        errors += e2
    # --- drain -----------------------------------------------------------------------------
    drained = _drain(rt, sp.node_ids, sp.node_ids[old.node], req.drain_s)
    # --- apply the removal: the diff from the switched plan to the final one, each host's share
    final, freed = migration.removal(switched, old, lab_file)
    if lab_file:  # its namespace and links stay (the lab's): only its function stops there
        errors += [f"host {old.host}: {x}" for x in rt.call(
            ts[old.host], "chain-retire", {**base, "plan": switched.to_dict(),
                                           "node": old.node},
            timeout=120)["errors"]]
    gone_add = Addition(add.chain, add.attach, nodes=[] if lab_file else [old])
    clear = [[d.ingress, path_base(sp, d.index), len(d.paths)] for d in olds]
    nsh_clear = [[node, key.hex()] for d in olds
                 for node in sp.node_ids
                 for key, _ in nsh_rows(sp, [d], {node}, base=path_base(sp, d.index))]
    errors += rt.unmake_share(switched, gone_add, 0.0, freed=freed, after=final,
                            clear=clear, nsh_clear=nsh_clear)
    moves.finish(state, own, clone, final, freed, host, switch_s, moved, drained)
    watch = rt.start_watchers()  # the clone's host knows its peers; its watcher runs
    return {"lab": req.lab, "chain": add.chain, "instance": old.node, "clone": clone.node,
            "host": host, "switch_seconds": round(switch_s, 6), "conntrack_moved": moved,
            "conntrack_errors": errors[:5], "drained": drained,
            "watcher": watch["watchers"], "watcher_errors": watch["errors"],
            "seconds": round(time.monotonic() - t0, 3)}


def move_conntrack(rt: AgentLive, ts: dict[str, Any], lab: str, old: NewNode, clone: NewNode,
                   skip: set[tuple[str, ...]]) -> tuple[int, set[tuple[str, ...]], list[str]]:
    """``old``'s connection-tracking entries (read by its host's agent) made in ``clone``
    (by its host's agent), those in ``skip`` left out: how many were made, the keys seen,
    the errors."""
    listed = rt.call(ts[old.host], "conntrack-list", {"lab": lab, "node": old.node}, timeout=60)
    got = rt.call(ts[clone.host], "conntrack-make",
               {"lab": lab, "node": clone.node, "text": listed["text"],
                "skip": sorted(list(k) for k in skip)}, timeout=120)
    return (int(got["made"]), {tuple(k) for k in got["seen"]},
            [f"host {old.host}: {x}" for x in listed.get("errors", [])] +
            [f"host {clone.host}: {x}" for x in got["errors"]])


def _ingress_hosts(plan: Plan, news: list[DirectionPlan], ts: dict[str, Any]
                   ) -> dict[str, Any]:
    """The hosts of the ingresses of ``news`` (only they hold slot tables to switch)."""
    names = set()
    for d in news:
        h = plan.host_of(d.ingress)
        if h is None or h.name not in ts:
            return ts  # an ingress of no known host: ask every host (the others do nothing)
        names.add(h.name)
    return {h: t for h, t in ts.items() if h in names}


def _drain(rt: AgentLive, node_ids: dict[str, int], node_id: int, quiet_s: float) -> bool:
    """Until no packet entered node ``node_id`` for ``quiet_s`` (counters read through the
    agents; at most :data:`MAX_DRAIN_S`); False if it never went quiet."""
    deadline = time.monotonic() + MAX_DRAIN_S
    last = rt.data_plane(node_ids).counters(node_id)["proxy_in"]
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(min(0.05, quiet_s))
        now = rt.data_plane(node_ids).counters(node_id)["proxy_in"]
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
    return False



