"""Paths, labels and free table space on a running lab's saved plan (pure).

What ``chain add`` and ``chain migrate`` share: :class:`Topology` (direct links between the
plan's namespaces, shortest paths through forwarding nodes, the nearest router), free /30s for
new links and free interface names, the path table's used ranges and a free one
(:data:`NO_PATH` is never handed out), :class:`Labels` (existing hops keep their labels, new
ones numbered after the highest), and :func:`build_direction` (a chain direction's paths and
their RFC 8595 stacks, as :mod:`sfclab.plan.sfc` builds them for a lab file).
"""

from __future__ import annotations

from collections import deque
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network
from typing import TYPE_CHECKING

from ..errors import SpecError
from ..spec.limits import MAX_HOPS, MAX_PATHS
from .model import Plan
from .sfc import (FIRST_LABEL, DirectionPlan, Hop, SteeringPlan, _slots, assemble,
                  shortest_path)

if TYPE_CHECKING:  # light start-up: the agents load no chain-file models
    from ..spec.sfc import Encap

#: the path index never handed out: its table entry stays empty (depth 0)
NO_PATH = MAX_PATHS - 1
#: new links' addresses: /30s from the top down (a lab's own segments come from the bottom up)
ADDED_POOL = IPv4Network("198.18.0.0/15")
#: where added functions' IPv6 links take their /64s, from the top down (RFC 5180's range, the
#: lab's default ``pool6``)
ADDED_POOL6 = IPv6Network("2001:2::/48")


class Topology:
    """Direct links between the plan's namespaces: node -> [(neighbour, my if, its if)]."""

    def __init__(self, plan: Plan):
        self.adj: dict[str, list[tuple[str, str, str]]] = {n.node: [] for n in plan.namespaces}
        self.forwards = {n.node: n.forwards for n in plan.namespaces}
        self.kind = {n.node: n.kind for n in plan.namespaces}
        for v in plan.veths:
            if v.a.netns is None or v.b.netns is None or v.a.node == v.b.node:
                continue
            if self.kind.get(v.a.node) == "linux-bridge" or \
                    self.kind.get(v.b.node) == "linux-bridge":
                continue
            self.adj[v.a.node].append((v.b.node, v.a.name, v.b.name))
            self.adj[v.b.node].append((v.a.node, v.b.name, v.a.name))
        for hl in plan.host_links:  # joined in host contexts (a tunnel across hosts)
            if len(hl.ends) == 2 and all(e.node in self.adj for e in hl.ends):
                a, b = hl.ends
                self.adj[a.node].append((b.node, a.node_if, b.node_if))
                self.adj[b.node].append((a.node, b.node_if, a.node_if))

    def link(self, a: str, b: str, a_if: str, b_if: str, forwards: bool, kind: str) -> None:
        self.adj.setdefault(a, [])
        self.adj.setdefault(b, [])
        self.adj[a].append((b, a_if, b_if))
        self.adj[b].append((a, b_if, a_if))
        self.forwards.setdefault(b, forwards)
        self.kind.setdefault(b, kind)

    def shortest(self, src: str, dst: str) -> list[tuple[str, str, str, str]] | None:
        return shortest_path(self.adj, self.forwards, src, dst)

    def nearest_forwarder(self, start: str) -> str | None:
        """The router nearest ``start``, else the nearest forwarding node (BFS order)."""
        order: list[str] = []
        seen, todo = {start}, deque([start])
        while todo:
            n = todo.popleft()
            order.append(n)
            for m, _, _ in self.adj.get(n, []):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        for want in ("router", None):
            for n in order:
                if n != start and self.forwards.get(n) and (want is None or self.kind[n] == want):
                    return n
        return None


def free_subnets(plan: Plan, count: int, taken: list[IPv4Network] | None = None
                 ) -> list[IPv4Network]:
    """``count`` /30s from the top of :data:`ADDED_POOL` down (the lab's own segments are
    given from its bottom up), clear of every subnet and address of the lab."""
    used = plan.subnets() + list(taken or [])
    used += [IPv4Interface(i.address).network for i in plan.interfaces if i.address]
    out: list[IPv4Network] = []
    top = int(ADDED_POOL.broadcast_address) - 3
    for at in range(top, int(ADDED_POOL.network_address) - 1, -4):
        net = IPv4Network((at, 30))
        if any(net.overlaps(u) for u in used):
            continue
        out.append(net)
        if len(out) == count:
            return out
    raise SpecError(f"no free /30 left in {ADDED_POOL} for the functions' links")


def free_subnets6(plan: Plan, count: int, taken: list[IPv6Network] | None = None
                  ) -> list[IPv6Network]:
    """``count`` /64s from the top of :data:`ADDED_POOL6` down (a lab's own IPv6 segments are
    given from the bottom of its ``pool6`` up), clear of every IPv6 subnet and address of the
    lab: the IPv6 twins of :func:`free_subnets`, for labs of ``ip: dual``."""
    used: list[IPv6Network] = plan.subnets(6) + list(taken or [])
    used += [IPv6Interface(i.address6).network for i in plan.interfaces if i.address6]
    out: list[IPv6Network] = []
    top = int(ADDED_POOL6.broadcast_address) >> 64
    for at in range(top, (int(ADDED_POOL6.network_address) >> 64) - 1, -1):
        net = IPv6Network((at << 64, 64))
        if any(net.overlaps(u) for u in used):
            continue
        out.append(net)
        if len(out) == count:
            return out
    raise SpecError(f"no free /64 left in {ADDED_POOL6} for the functions' links")


def free_ifname(plan: Plan, node: str, taken: set[str]) -> str:
    have = {i.name for i in plan.interfaces_of(node)} | taken | {"lo", "br0"}
    k = 0
    while f"sfx{k}" in have:
        k += 1
    return f"sfx{k}"


def path_ranges(sp: SteeringPlan) -> list[tuple[int, int]]:
    """(first, count) of every direction's paths in the path table."""
    out = []
    seq = 0
    for d in sp.directions:
        base = d.path_base if d.path_base is not None else seq
        if d.path_base is None:
            seq += len(d.paths)
        out.append((base, len(d.paths)))
    return out


def free_path_base(ranges: list[tuple[int, int]], need: int) -> int:
    used = sorted(ranges + [(NO_PATH, 1)])
    at = 0
    for first, count in used:
        if first - at >= need:
            return at
        at = max(at, first + count)
    raise SpecError(f"the path table is full: no {need} free entries left")


class Labels:
    """Existing labels by what they do; new ones numbered after the highest in use, and once
    that reaches the label table's end (a label indexes ``sfc_labels``, below ``MAX_HOPS``),
    the lowest free ones."""

    def __init__(self, hops: list[Hop]):
        self.known = {(h.node, h.action, h.ifname): h for h in hops}
        self.used = {h.label for h in hops}
        self.next = max(self.used, default=FIRST_LABEL - 1) + 1
        self.new: list[Hop] = []

    def label(self, hop: Hop) -> int:
        key = (hop.node, hop.action, hop.ifname)
        if key not in self.known:
            if self.next >= MAX_HOPS or self.next in self.used:
                self.next = next((i for i in range(FIRST_LABEL, MAX_HOPS) if i not in self.used),
                                 MAX_HOPS)
                if self.next >= MAX_HOPS or self.next in self.used:
                    raise SpecError(f"the lab's label table is full: at most "
                                    f"{MAX_HOPS - FIRST_LABEL:,} labels", place="functions")
            hop.label = self.next
            self.used.add(self.next)
            self.next += 1
            self.known[key] = hop
            self.new.append(hop)
        return self.known[key].label


def build_direction(topo: Topology, labels: Labels, cname: str, index: int, reverse: bool,
                    start: str, end: str, stages: list[list[str]], weights: list[list[int]],
                    symmetric: bool, ttl: int, place: str, encap: Encap = "mpls"
                    ) -> DirectionPlan:
    """One chain direction: a path per combination of instances, their stacks (RFC 8595),
    assembled as for a lab file's chains (:func:`sfclab.plan.sfc.assemble`)."""
    if reverse:
        stages, weights = stages[::-1], weights[::-1]
    d = DirectionPlan(index, cname, reverse, start, end, symmetric, ttl, encap=encap)
    d.paths = assemble(cname, start, end, stages, weights, topo.shortest, labels.label,
                       lambda msg: SpecError(msg, place=place))
    d.slots = _slots(d.paths)
    return d
