"""``sfclab chain add`` and ``sfclab chain rm``: a chain of new functions on a running lab.

``add_chain(AddChain)`` under the lab's lock:

1. plan (pure, :mod:`sfclab.plan.chainadd`): instances placed by free CPU and memory
   (:mod:`sfclab.plan.placement`; a refusal changes nothing), wiring, labels, indices;
   classifier entries that another chain holds are refused -- all before anything is made;
2. journal the new namespaces, save the chain's record (status ``adding``) and the plan with
   the chain merged in, so ``down`` after a ``kill -9`` at any later moment removes it;
3. make the nodes, their containers (on a host reached over SSH, by its agent: the image
   checked there before step 2) and start the functions, fit existing interfaces, load the
   programs;
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
from typing import Any

from ...errors import LabError, SpecError
from ...plan import placement
from ...plan import tunnels as plan_tunnels
from ...plan.tunnels import labelled_mtu
from ...plan.chainadd import NewNode, apply, plan_addition, withdraw
from ...plan.model import Plan
from ...plan.placement import Need, NoRoom
from ...realize import lifecycle
from ...realize.functions import instantiate
from ...realize.state import LabState
from ...spec.sfc import family_problem
from .. import record
from ..hosts import underlay
from ..record import steering_of
from ..runtime.base import LiveRuntime
from ..runtime.table import live_for
from ..hosts.capacity import hosts_of
from ..request import AddChain, RemoveChain

Progress = Callable[[str], None]


def place(req: AddChain, hosts: list[placement.Host]) -> dict[str, str]:
    needs = [Need(i.function, i.node, i.cpu, i.memory) for i in req.instances()]
    try:
        return placement.place(needs, hosts)
    except NoRoom as e:
        raise req.error(str(e), e.need.function, None) from None


def _check_families(req: AddChain, plan: Plan) -> None:
    """Each classifier of a family the lab's links carry (:func:`family_problem`)."""
    for k, c in enumerate(req.chain.classifiers):
        problem = family_problem(c.family, plan.families)
        if problem:
            raise req.error_at(problem, ("classifiers", k, "family"))


def add_chain(req: AddChain, progress: Progress | None = None) -> dict[str, Any]:
    """Add the chain of ``req`` to its running lab; see the module's docstring."""
    say = progress or (lambda _m: None)
    state = LabState(req.lab)
    t0 = time.monotonic()
    with record.lab_lock(state, req.wait_s, "chain add"):
        _, plan = lifecycle.load_plan(req.lab)
        if (state.meta().get("status")) != "up":
            raise LabError(f"lab '{req.lab}' is not up")
        rt = live_for(state)  # this machine, or hosts driven over SSH whose agents make it
        _check_families(req, plan)
        sp = steering_of(plan)
        where = place(req, hosts_of(state, plan))
        instances = [i for i in req.instances()]
        for i in instances:
            i.host = where[i.node]
        add = plan_addition(plan, sp, req.chain, instances, req.source)
        others = [x for a in record.placed(state) for x in a.nodes]
        room = labelled_mtu(req.chain.encap)  # the instances' links: the chain's headers
        plan_tunnels.fit(plan, add.nodes, others, underlay.underlay_mtu(state, plan, room),
                         room)
        merged = Plan.from_dict(plan.to_dict())
        apply(merged, add)
        _images_there(req, rt, add.nodes)
        for n in add.nodes:  # each function's own checks (neighbours, programs) first
            try:
                instantiate(state, merged, n.node).check()
            except SpecError as e:
                raise req.error(e.message, n.function, e.place) from None
        rt.check_free(plan, merged, add, req.source)  # entries another chain holds
        # --- from here on, things are made: journal and plan first -------------------------
        rt.journal_chain(plan, add)
        record.save_addition(state, add, "adding")
        with record.slot_lock(state):  # the watcher waits until the chain is whole
            record.save_plan(state, merged)
            try:
                rt.make_chain(plan, merged, add, say)
            except BaseException:
                say("rolling back")
                rt.undo_chain(merged, add)
                record.save_plan(state, plan)  # the plan as it was before
                record.drop_addition(state, add.chain)
                record.rmdir_if_empty(record.added_dir(state))
                raise
        record.save_addition(state, add, "up")
        record.event(state, "chain-added", chain=add.chain,
                     instances=[n.node for n in add.nodes], attach=add.attach)
        # over SSH: a watcher on each host holding a chain's ingress
        # (:mod:`sfclab.live.runtime.ssh`)
        watcher: int | dict[str, int] | None = rt.watch(merged, add.attach)["watcher"]
    return {"lab": req.lab, "chain": add.chain, "attach": add.attach,
            "instances": {n.node: {"function": n.function, "kind": n.kind, "host": n.host,
                                   "cpu": n.cpu, "memory": n.memory} for n in add.nodes},
            "labels": [h.label for h in add.hops],
            "directions": [d.index for d in add.directions], "watcher": watcher,
            "seconds": round(time.monotonic() - t0, 3)}


def _images_there(req: AddChain, rt: LiveRuntime, nodes: list[NewNode]) -> None:
    """Each instance's container checked against the host it is placed on, before anything
    is made (over SSH, by that host's agent: the image must be in *its* store); a refusal is
    the chain file's error at the function's ``image`` key, naming the host."""
    got = rt.image_problem(nodes)
    if got is not None:
        host, p = got
        n = next(n for n in nodes if n.node == p.node)
        raise req.error(f"on host {host} (instance {p.node}): {p.message}", n.function,
                        f"image.{p.key}")


def remove_chain(req: RemoveChain) -> dict[str, Any]:
    """Remove a chain ``chain add`` made (a chain of the lab file stays: it is the lab's)."""
    state = LabState(req.lab)
    t0 = time.monotonic()
    with record.lab_lock(state, req.wait_s, "chain rm"):
        _, plan = lifecycle.load_plan(req.lab)
        got = record.load_addition(state, req.chain)
        if got is None:
            sp = steering_of(plan)
            if any(d.chain == req.chain for d in sp.directions):
                raise LabError(f"chain '{req.chain}' is one of lab '{req.lab}''s own (from its "
                               "lab file); only chains added with 'sfclab chain add' can be "
                               "removed")
            added = ", ".join(record.additions(state)) or "none"
            raise LabError(f"lab '{req.lab}' has no added chain '{req.chain}' (added: {added})")
        add, _ = got
        record.save_addition(state, add, "removing")
        with record.slot_lock(state):  # the watcher waits until the plan forgets the chain
            errors = live_for(state).remove_chain(plan, add)
            withdraw(plan, add)
            record.save_plan(state, plan)
        record.drop_addition(state, add.chain)
        shutil.rmtree(record.classify_dir(state, add.chain), ignore_errors=True)
        record.event(state, "chain-removed", chain=add.chain)
    return {"lab": req.lab, "chain": req.chain, "removed": [n.node for n in add.nodes],
            "errors": errors, "seconds": round(time.monotonic() - t0, 3)}
