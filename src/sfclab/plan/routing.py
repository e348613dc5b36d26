"""Static routes so every host reaches every other host along a shortest path.

The graph's vertices are namespace nodes; two are adjacent when they share a segment.  Paths may
pass only through nodes that forward (routers and functions, never hosts).  For each node and
each segment it is not on, the next hop is the first hop toward the nearest forwarding node on
that segment (hop count, ties broken by node order, so plans are stable).

Routes are then compressed: the next hop that serves the most destinations becomes the default
route, and the destinations of every other next hop are merged into the fewest covering
prefixes (exactly, never covering a destination that goes elsewhere).  A chain of N routers so
needs O(log N) routes per namespace instead of O(N).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, collapse_addresses


@dataclass(frozen=True)
class Attachment:
    node: str
    ifname: str
    address: IPv4Address
    segment: int


@dataclass(frozen=True)
class Route:
    node: str
    dst: IPv4Network
    gateway: IPv4Address
    dev: str


def compute(order: list[str], forwards: dict[str, bool], subnets: dict[int, IPv4Network],
            attachments: list[Attachment]) -> list[Route]:
    rank = {n: i for i, n in enumerate(order)}
    on_seg: dict[int, list[Attachment]] = {}
    of_node: dict[str, list[Attachment]] = {}
    for a in attachments:
        on_seg.setdefault(a.segment, []).append(a)
        of_node.setdefault(a.node, []).append(a)

    routes: list[Route] = []
    for u in order:
        mine = of_node.get(u, [])
        if not mine:
            continue
        # BFS: first hop (gateway attachment, my attachment) of every reachable node
        first: dict[str, tuple[Attachment, Attachment]] = {}
        dist = {u: 0}
        queue = deque([u])
        while queue:
            v = queue.popleft()
            if v != u and not forwards.get(v, False):
                continue
            for out in sorted(of_node.get(v, []), key=lambda a: a.segment):
                for nb in sorted(on_seg[out.segment], key=lambda a: rank[a.node]):
                    w = nb.node
                    if w in dist:
                        continue
                    dist[w] = dist[v] + 1
                    first[w] = first[v] if v != u else (nb, out)
                    queue.append(w)
        direct = {a.segment for a in mine}
        groups: dict[tuple[IPv4Address, str], list[IPv4Network]] = {}
        for seg, net in subnets.items():
            if seg in direct or net is None:
                continue
            cands = [a.node for a in on_seg.get(seg, []) if a.node in dist and a.node != u]
            if not cands:
                continue
            best = min(cands, key=lambda w: (not forwards.get(w, False), dist[w], rank[w]))
            gw, out = first[best]
            groups.setdefault((gw.address, out.ifname), []).append(net)
        if not groups:
            continue
        keys = sorted(groups, key=lambda k: (-len(groups[k]), str(k[0])))
        default = keys[0]
        routes.append(Route(u, IPv4Network("0.0.0.0/0"), default[0], default[1]))
        for k in keys[1:]:
            for net in collapse_addresses(groups[k]):
                routes.append(Route(u, net, k[0], k[1]))
    return routes
