"""A migration planned against a running lab's saved plan (pure): the clone, the lab with it,
the lab switched to it and the lab without the old instance.

``chain migrate`` reads as four steps, and three are plans of this module, each applied by the
build engine of ``up`` (:mod:`sfclab.realize.change`):

1. **Plan the clone** (:func:`plan_clone`): a new node ``<instance>.m<k>`` of the old one's
   kind, keys, CPU and memory, on the target host, with a free subnet and interface at the
   same attach node (across hosts a tunnel: :mod:`.tunnels`), its container the same image;
   the lab's plan with it wired in (:func:`sfclab.plan.chainadd.apply`), and every path
   through the old instance planned again through the clone in a fresh range of the path
   table, with new labels (paths that do not pass it keep their stacks).  A
   :class:`Migration`.
2. **Apply** the clone: the change from the plan to ``merged``
   (:func:`sfclab.plan.chainadd.change_of`), made by the engine.
3. **Switch** (:func:`switched`): the chain's directions replaced by their new ones; the slot
   tables that make it so are the one live-specific step (:mod:`sfclab.live.chains.moves`).
4. **Apply the removal** (:func:`removal`): the plan without the old instance (its node, id,
   programs and the labels nobody uses any more); the diff from the switched plan to it
   (:func:`sfclab.plan.diff.removed`) is taken out by the engine's parts.  A lab file's node
   stays as a transit node: only its function leaves the plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .chainadd import Addition, NewNode, apply, drop_nodes, wire6
from .chainpaths import (Labels, Topology, build_direction, free_ifname, free_path_base,
                         free_subnets, path_ranges)
from .containers import moved_to
from .model import Plan
from .names import netns_name
from .sfc import DirectionPlan, Hop, SteeringPlan
from .tunnels import fit, labelled_mtu


@dataclass
class Migration:
    """A planned migration: ``old`` moves to ``clone`` on ``host``.  ``merged`` is the lab's
    plan with the clone wired in (its labels, node id and programs); ``news`` are the chain's
    directions ``olds`` planned again through it; ``new_hops`` the labels they add."""

    old: NewNode
    clone: NewNode
    host: str
    merged: Plan
    olds: list[DirectionPlan]
    news: list[DirectionPlan]
    new_hops: list[Hop]


def _steering(plan: Plan) -> SteeringPlan:
    return plan.steering.copy() if plan.steering else SteeringPlan()


def chain_encap(sp: SteeringPlan, chain: str) -> str:
    """The encoding of ``chain``'s paths (:mod:`.encap`; ``mpls`` for a chain not in
    ``sp``)."""
    return next((d.encap for d in sp.directions if d.chain == chain), "mpls")


def clone_name(plan: Plan, instance: str) -> str:
    """``<instance>.m<k>`` with the lowest free ``k`` (a clone's clone drops the old suffix)."""
    base = re.sub(r"\.m\d+$", "", instance)
    have = {n.node for n in plan.namespaces}
    k = 1
    while f"{base}.m{k}" in have:
        k += 1
    return f"{base}.m{k}"


def _repath(topo: Topology, labels: Labels, d: DirectionPlan, old: str, new: str,
            base: int) -> DirectionPlan:
    paths = []
    for p in d.paths:
        if old not in p.instances:
            paths.append(p)
            continue
        inst = [new if i == old else i for i in p.instances]
        one = build_direction(topo, labels, d.chain, d.index, False, d.ingress, d.egress,
                              [[i] for i in inst], [[1] for _ in inst], d.symmetric, d.ttl,
                              "functions")
        paths.append(replace(one.paths[0], index=p.index, weight=p.weight))
    return replace(d, paths=paths, path_base=base)


def plan_clone(plan: Plan, owner: Addition, old: NewNode, host: str,
               placed: list[NewNode], underlay_mtu: int) -> Migration:
    """Step 1: ``old`` (an instance of ``owner``'s chain) cloned on ``host``, wired to its
    attach node; ``placed``: every instance added so far (their tunnels' VNIs are taken);
    ``underlay_mtu``: what a tunnel of the clone travels over."""
    name = clone_name(plan, old.node)
    net = free_subnets(plan, 1)[0]
    hs = list(net.hosts())
    clone = NewNode(name, netns_name(plan.lab, name), old.kind, old.params, old.function,
                    old.cpu, old.memory, host, old.attach, free_ifname(plan, old.attach, set()),
                    "eth0", str(net), f"{hs[1]}/30", f"{hs[0]}/30",
                    container=moved_to(plan, old.node, name))  # the same image, its own
    wire6(plan, [clone])
    sp = _steering(plan)
    fit(plan, [clone], placed, underlay_mtu, labelled_mtu(chain_encap(sp, owner.chain)))
    merged = Plan.from_dict(plan.to_dict())
    apply(merged, Addition(owner.chain, owner.attach, nodes=[clone], source=owner.source))
    topo = Topology(merged)
    labels = Labels(sp.hops)
    ranges = path_ranges(sp)
    olds = [d for d in sp.directions if d.chain == owner.chain]
    news = []
    for d in olds:
        base = free_path_base(ranges, len(d.paths))
        ranges.append((base, len(d.paths)))
        news.append(_repath(topo, labels, d, old.node, clone.node, base))
    msp = _steering(merged)
    msp.hops += labels.new
    msp.node_ids[clone.node] = max(msp.node_ids.values(), default=0) + 1
    msp.attach[clone.node] = [("sfc_forward", "eth0", "xdp"),
                              ("sfc_proxy_in", "eth0", "tcx-ingress"),
                              ("sfc_proxy_out", "eth0", "tcx-egress")]
    msp.attach.setdefault(old.attach, []).append(("sfc_forward", clone.attach_ifname, "xdp"))
    merged.steering = msp
    return Migration(old, clone, host, merged, olds, news, labels.new)


def switched(merged: Plan, news: list[DirectionPlan]) -> Plan:
    """Step 3: ``merged`` once switched: each direction of the migrated chain replaced by its
    new one in ``news`` (same index), the others as they are."""
    out = Plan.from_dict(merged.to_dict())
    ssp = _steering(out)
    ssp.directions = [next((nd for nd in news if nd.index == d.index), d)
                      for d in ssp.directions]
    out.steering = ssp
    return out


def removal(switched: Plan, old: NewNode, lab_file: bool = False) -> tuple[Plan, list[int]]:
    """Step 4: the plan once ``old`` is gone (its node, id, programs, labels nobody uses), and
    the labels freed.  A lab file's node (``lab_file``) stays as transit: only its function
    goes (no function to stop at down, none to count on its host)."""
    final = Plan.from_dict(switched.to_dict())
    fsp = _steering(final)
    in_use = {lbl for d in fsp.directions for p in d.paths for lbl in p.stack}
    freed = [h.label for h in fsp.hops if h.label not in in_use and
             (h.node == old.node or (h.next == old.node))]
    fsp.hops = [h for h in fsp.hops if h.label not in freed]
    if not lab_file:
        fsp.node_ids.pop(old.node, None)
        fsp.attach.pop(old.node, None)
        fsp.attach[old.attach] = [a for a in fsp.attach.get(old.attach, [])
                                  if a[1] != old.attach_ifname]
    final.steering = fsp
    if lab_file:
        final.functions.pop(old.node, None)
    else:
        drop_nodes(final, {old.node})
    return final, freed
