"""Static routes so every host reaches every other host along a shortest path.

The graph's vertices are namespace nodes; two are adjacent when they share a segment.  Paths may
pass only through nodes that forward (routers and functions, never hosts).  For each node and
each segment it is not on, the next hop is the first hop toward the nearest forwarding node on
that segment (hop count, ties broken by node order, so plans are stable).

Routes are then compressed: the next hop that serves the most destinations becomes the default
route, and the destinations of every other next hop are merged into the fewest covering
prefixes (exactly, never covering a destination that goes elsewhere).  A chain of N routers so
needs O(log N) routes per namespace instead of O(N).

IPv4 and IPv6 are routed alike and apart: ``compute`` is called once per family with that
family's subnets and attachments; the default route is ``0.0.0.0/0`` or ``::/0``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, collapse_addresses
from typing import Any

#: the default route of each family
DEFAULT: dict[int, IPv4Network | IPv6Network] = {4: IPv4Network("0.0.0.0/0"),
                                                 6: IPv6Network("::/0")}


@dataclass(frozen=True)
class Attachment:
    node: str
    ifname: str
    address: IPv4Address | IPv6Address
    segment: int


@dataclass(frozen=True)
class Route:
    node: str
    dst: IPv4Network | IPv6Network
    gateway: IPv4Address | IPv6Address
    dev: str


def compute(order: list[str], forwards: dict[str, bool], subnets: dict[int, Any],
            attachments: list[Attachment]) -> list[Route]:
    """The routes of every node, for the one family of ``subnets`` and ``attachments``."""
    rank = {n: i for i, n in enumerate(order)}
    on_seg: dict[int, list[Attachment]] = {}
    of_node: dict[str, list[Attachment]] = {}
    for a in attachments:
        on_seg.setdefault(a.segment, []).append(a)
        of_node.setdefault(a.node, []).append(a)
    for lst in on_seg.values():
        lst.sort(key=lambda a: rank[a.node])
    for lst in of_node.values():
        lst.sort(key=lambda a: a.segment)
    # per segment: its nodes, forwarding ones first, in node order (the preferred exits)
    seg_nodes = {s: sorted({a.node for a in lst}, key=lambda n: (not forwards.get(n), rank[n]))
                 for s, lst in on_seg.items()}

    routes: list[Route] = []
    for u in order:
        mine = of_node.get(u)
        if not mine:
            continue
        # BFS: the first hop (gateway attachment, my attachment) toward every reachable node
        first: dict[str, tuple[Attachment, Attachment]] = {}
        dist = {u: 0}
        queue = deque([u])
        while queue:
            v = queue.popleft()
            if v != u and not forwards.get(v, False):
                continue
            dv = dist[v] + 1
            for out in of_node.get(v, ()):
                for nb in on_seg[out.segment]:
                    w = nb.node
                    if w in dist:
                        continue
                    dist[w] = dv
                    first[w] = first[v] if v != u else (nb, out)
                    queue.append(w)
        direct = {a.segment for a in mine}
        groups: dict[tuple[Any, str], list[Any]] = {}
        for seg, net in subnets.items():
            if seg in direct:
                continue
            best = None
            for w in seg_nodes.get(seg, ()):
                if w == u or w not in dist:
                    continue
                key = (not forwards.get(w, False), dist[w], rank[w])
                if best is None or key < best[0]:
                    best = (key, w)
            if best is None:
                continue
            gw, out = first[best[1]]
            groups.setdefault((gw.address, out.ifname), []).append(net)
        if not groups:
            continue
        keys = sorted(groups, key=lambda k: (-len(groups[k]), int(k[0])))
        default = keys[0]
        routes.append(Route(u, DEFAULT[default[0].version], default[0], default[1]))
        for k in keys[1:]:
            for net in collapse_addresses(groups[k]):
                routes.append(Route(u, net, k[0], k[1]))
    return routes
