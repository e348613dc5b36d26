"""``sfclab chain add`` and ``sfclab chain rm``: a chain of new functions on a running lab.

``add_chain(AddChain)`` under the lab's lock:

1. plan (pure, :mod:`sfclab.plan.chainadd`): instances placed by free CPU and memory
   (:mod:`sfclab.plan.placement`; a refusal changes nothing), wiring, labels, indices;
   classifier entries that another chain holds are refused -- all before anything is made;
2. journal the new namespaces, save the chain's record (status ``adding``) and the plan with
   the chain merged in, so ``down`` after a ``kill -9`` at any later moment removes it;
3. make the nodes and start the functions, fit existing interfaces, load the programs;
4. write labels, paths and slot tables (nothing uses them yet), then the classifier entries:
   only now does traffic enter the chain.

Any failure rolls back what was made (backwards) and re-raises.  ``remove_chain`` reverses an
added chain: classifier entries out first, a short drain, then slots, paths, labels no other
chain uses, the functions and their namespaces, and the plan.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import LabError, SpecError
from ..plan import placement
from ..plan import tunnels as plan_tunnels
from ..plan.tunnels import LABELLED_MTU as LABELLED
from ..plan.chainadd import Addition, NewNode, apply, plan_addition, withdraw
from ..plan.model import Plan
from ..plan.placement import Need, NoRoom
from ..plan.sfc import EntryRow, SteeringPlan, entries_of, reversed_classifier
from ..realize import dataplane, lifecycle
from ..realize.dataplane import DataPlane
from ..realize.functions import instantiate
from ..realize.state import LabState
from . import health, record, sshadd, sshhealth, tables, underlay, wire
from .capacity import hosts_of
from .chains import read_classifiers
from .request import AddChain, RemoveChain

Progress = Callable[[str], None]
DRAIN_S = 0.05


def place(req: AddChain, hosts: list[placement.Host]) -> dict[str, str]:
    needs = [Need(i.function, i.node, i.cpu, i.memory) for i in req.instances()]
    try:
        return placement.place(needs, hosts)
    except NoRoom as e:
        raise req.error(str(e), e.need.function, None) from None


def _steering(plan: Plan) -> SteeringPlan:
    return plan.steering.copy() if plan.steering else SteeringPlan()


def add_chain(req: AddChain, progress: Progress | None = None) -> dict[str, Any]:
    """Add the chain of ``req`` to its running lab; see the module's docstring."""
    say = progress or (lambda _m: None)
    state = LabState(req.lab)
    t0 = time.monotonic()
    with record.lab_lock(state, req.wait_s, "chain add"):
        _, plan = lifecycle.load_plan(req.lab)
        if (state.meta().get("status")) != "up":
            raise LabError(f"lab '{req.lab}' is not up")
        remote = sshadd.is_remote(state)  # hosts driven over SSH: their agents make it
        sp = _steering(plan)
        where = place(req, hosts_of(state, plan))
        instances = [i for i in req.instances()]
        for i in instances:
            i.host = where[i.node]
        add = plan_addition(plan, sp, req.chain, instances, req.source)
        others = [x for a in record.placed(state) for x in a.nodes]
        plan_tunnels.fit(plan, add.nodes, others, underlay.underlay_mtu(state, plan, LABELLED),
                         LABELLED)
        merged = Plan.from_dict(plan.to_dict())
        apply(merged, add)
        msp = _steering(merged)
        for n in add.nodes:  # each function's own checks (neighbours, programs) first
            try:
                instantiate(state, merged, n.node).check()
            except SpecError as e:
                raise req.error(e.message, n.function, e.place) from None
        if plan.steering and not remote:  # the lab's maps exist: refuse entries another chain holds
            with DataPlane(req.lab) as dp:
                tables.check_room(dp, add.directions, req.source)
                for d in add.directions:
                    tables.check_free(dp, msp, d, req.source)
        elif plan.steering:  # each ingress host's agent looks in its share's maps
            sshadd.check_free(state, merged, add, req.source)
        # --- from here on, things are made: journal and plan first -------------------------
        if not remote:  # else each host's agent journals what it makes, there
            state.record([{"op": "netns", "name": n.netns} for n in add.nodes] +
                         ([] if plan.steering else
                          [{"op": "bpffs", "path": str(dataplane.lab_dir(req.lab))}]))
        record.save_addition(state, add, "adding")
        with record.slot_lock(state):  # the watcher waits until the chain is whole
            record.save_plan(state, merged)
            try:
                if remote:
                    sshadd.make(state, plan, merged, add, say)
                else:
                    _make(state, plan, merged, msp, add, say)
            except BaseException:
                say("rolling back")
                if remote:
                    sshadd.unmake(state, merged, add, DRAIN_S)
                else:
                    _unmake(state, merged, add)
                    _forget_nodes(state, add)
                record.save_plan(state, plan)  # the plan as it was before
                record.drop_addition(state, add.chain)
                _rmdir_if_empty(record.added_dir(state))
                raise
        record.save_addition(state, add, "up")
        record.event(state, "chain-added", chain=add.chain,
                     instances=[n.node for n in add.nodes], attach=add.attach)
        # over SSH: a watcher on each host holding a chain's ingress (:mod:`.sshhealth`)
        watcher: int | dict[str, int] | None = (
            sshhealth.start(state)["watchers"] if remote
            else health.ensure_watcher(state, merged, add.attach))
    return {"lab": req.lab, "chain": add.chain, "attach": add.attach,
            "instances": {n.node: {"function": n.function, "kind": n.kind, "host": n.host,
                                   "cpu": n.cpu, "memory": n.memory} for n in add.nodes},
            "labels": [h.label for h in add.hops],
            "directions": [d.index for d in add.directions], "watcher": watcher,
            "seconds": round(time.monotonic() - t0, 3)}


def _make(state: LabState, plan: Plan, merged: Plan, msp: SteeringPlan, add: Addition,
          say: Progress) -> None:
    if not plan.steering:
        dataplane.make_dir(plan.lab)
    say(f"function nodes: {len(add.nodes)}")
    for n in add.nodes:
        wire.make_node(merged, n, _tunnel(state, merged, n))
    for node, ifname, mtu in add.mtu:
        wire.set_link(merged, node, ifname, mtu=mtu)
    for node, ifname, offl in add.offloads:
        wire.set_link(merged, node, ifname, offloads=offl)
    for node, ifname in add.single_segment:
        wire.set_link(merged, node, ifname, gso_max_segs=1)
    say("functions")
    for n in add.nodes:
        wire.start_function(state, merged, n.node)
    say("eBPF programs")
    for node, progs in add.attach_progs.items():
        wire.load_programs(merged, node, msp.node_ids[node], progs)
    nodes = {n for d in add.directions for p in d.paths for n in p.nodes}
    nodes |= {h.node for h in add.hops} | {h.next for h in add.hops if h.next}
    ifaces = tables.interfaces({n.node: n.name for n in merged.namespaces}, nodes)
    say("tables")
    with DataPlane(plan.lab) as dp:
        tables.write_labels(dp, msp, add.hops, ifaces)
        for d in add.directions:
            assert d.path_base is not None
            tables.write_paths(dp, d, d.path_base, ifaces)
            tables.write_slots(dp, d, tables.slot_paths(msp, d))
        say("classifiers: traffic on")
        for d in add.directions:
            tables.write_classifiers(dp, msp, d)


def _tunnel(state: LabState, merged: Plan, n: NewNode) -> underlay.Tunnel | None:
    """``n``'s tunnel, if it has one: its hosts joined, its hosted link put in the plan (and
    the plan saved) before it is made."""
    t = underlay.tunnel(state, merged, n, LABELLED)
    if t is not None:
        merged.host_links.append(t.link)
        record.save_plan(state, merged)
    return t


def _unmake(state: LabState, merged: Plan, add: Addition) -> list[str]:
    """Take ``add``'s chain off the data plane and remove its nodes (tolerates halves; the
    caller holds the slot lock)."""
    errors: list[str] = []
    msp = _steering(merged)
    try:
        dp = DataPlane(merged.lab)
    except Exception as e:
        dp = None
        errors.append(str(e))
    later = _classified_later(state, add)
    if dp is not None:
        with dp:
            for d in add.directions:
                try:
                    tables.delete_classifiers(dp, msp, d, later.get(d.index))
                except Exception as e:
                    errors.append(f"classifiers of direction {d.index}: {e}")
            time.sleep(DRAIN_S)  # packets classified just before are on their way
            for d in add.directions:
                try:
                    tables.clear_direction(dp, d)
                except Exception as e:
                    errors.append(f"direction {d.index}: {e}")
    # the labels go once the plan says which ones nobody else uses
    probe = Plan.from_dict(merged.to_dict())
    freed = withdraw(probe, add)
    if dp is not None:
        try:
            with DataPlane(merged.lab) as dp2:
                tables.delete_labels(dp2, freed)
        except Exception as e:
            errors.append(f"labels: {e}")
    for n in add.nodes:
        errors += wire.remove_node(state, merged, n.node, n.netns,
                                    (n.attach, n.attach_ifname), n)
    return errors


def _forget_nodes(state: LabState, add: Addition) -> None:
    """A refused addition's nodes leave no state behind: each one's folder in the lab's state
    (pids, the function's log) goes.  The nodes are the addition's own: the plan refused any
    name the lab already had, so no other node's folder is touched."""
    for n in add.nodes:
        d = state.node_dir(n.node)
        if d.parent == state.dir / "nodes" and d.is_dir() and not d.is_symlink():
            shutil.rmtree(d)
    _rmdir_if_empty(state.dir / "nodes")


def _rmdir_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:  # not empty (another node's, another chain's) or gone: it stays as it is
        pass


def _classified_later(state: LabState, add: Addition) -> dict[int, list[EntryRow]]:
    """Entries ``chain classify`` added to ``add``'s chain, by direction (they go with it)."""
    out: dict[int, list[EntryRow]] = {}
    for saved in record.saved_classifiers(state, add.chain):
        for c in read_classifiers(saved["file"]):
            for d in add.directions:
                if not d.reverse and d.ingress == c.ingress:
                    out.setdefault(d.index, []).extend(entries_of(c))
                elif d.reverse and d.egress == c.ingress:
                    out.setdefault(d.index, []).extend(
                        entries_of(reversed_classifier(c, d.ingress)))
    return out


def remove_chain(req: RemoveChain) -> dict[str, Any]:
    """Remove a chain ``chain add`` made (a chain of the lab file stays: it is the lab's)."""
    state = LabState(req.lab)
    t0 = time.monotonic()
    with record.lab_lock(state, req.wait_s, "chain rm"):
        _, plan = lifecycle.load_plan(req.lab)
        got = record.load_addition(state, req.chain)
        if got is None:
            sp = _steering(plan)
            if any(d.chain == req.chain for d in sp.directions):
                raise LabError(f"chain '{req.chain}' is one of lab '{req.lab}''s own (from its "
                               "lab file); only chains added with 'sfclab chain add' can be "
                               "removed")
            added = ", ".join(record.additions(state)) or "none"
            raise LabError(f"lab '{req.lab}' has no added chain '{req.chain}' (added: {added})")
        add, _ = got
        record.save_addition(state, add, "removing")
        with record.slot_lock(state):  # the watcher waits until the plan forgets the chain
            if sshadd.is_remote(state):
                errors = sshadd.unmake(state, plan, add, DRAIN_S,
                                       later=_classified_later(state, add))
            else:
                errors = _unmake(state, plan, add)
            withdraw(plan, add)
            record.save_plan(state, plan)
        record.drop_addition(state, add.chain)
        shutil.rmtree(record.classify_dir(state, add.chain), ignore_errors=True)
        record.event(state, "chain-removed", chain=add.chain)
    return {"lab": req.lab, "chain": req.chain, "removed": [n.node for n in add.nodes],
            "errors": errors, "seconds": round(time.monotonic() - t0, 3)}
