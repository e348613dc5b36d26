"""Layer-2 segments: the pieces of a lab that share one subnet.

A link between two namespace nodes is a point-to-point segment.  Bridges joined by links form
one bridge domain; every namespace endpoint attached to any bridge of the domain is on that
domain's segment.  An *attachment* is ``(link index, endpoint index)`` of a namespace endpoint.
Segments are numbered in the order their first link appears, so addressing is stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lab import LinkSpec, NodeSpec


@dataclass
class Segment:
    index: int
    attachments: list[tuple[int, int]] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)  # bridge nodes of a bridge domain

    @property
    def is_bridged(self) -> bool:
        return bool(self.bridges)


def segments(nodes: dict[str, NodeSpec], links: list[LinkSpec]) -> list[Segment]:
    parent: dict[str, str] = {n: n for n, s in nodes.items() if s.is_bridge}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for lk in links:
        a, b = (ep.node for ep in lk.endpoints)
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[ra] = rb

    out: list[Segment] = []
    domain: dict[str, Segment] = {}
    for li, lk in enumerate(links):
        a, b = (ep.node for ep in lk.endpoints)
        bridged = [x for x in (a, b) if x in parent]
        if not bridged:
            seg = Segment(len(out), [(li, 0), (li, 1)])
            out.append(seg)
            continue
        r = root(bridged[0])
        if r not in domain:
            domain[r] = Segment(len(out), [], sorted(n for n in parent if root(n) == r))
            out.append(domain[r])
        seg = domain[r]
        for j, x in enumerate((a, b)):
            if x not in parent:
                seg.attachments.append((li, j))
    return out
