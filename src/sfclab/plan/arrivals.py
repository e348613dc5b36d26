"""Where a chain's frames arrive, and in what form: which interfaces need the forwarder.

XDP programs run where frames are received, so the SFC forwarder belongs on the interfaces where
*labelled* frames arrive, and nowhere else.  Along a path (``PathPlan.stack``, top first):

- the first hop's interface (``next_ifname`` of ``next``) receives the whole stack;
- the neighbour of a forward (or unpad) label that is not the stack's last receives the rest of
  the stack: labelled;
- the neighbour of the stack's last label receives plain IP (the last pop delivers it): the
  egress, or a node before it.  It needs no forwarder.

How that last, plain frame is sent matters to the receiving veth.  A label popped by an XDP
program (``sfc_forward``, or an SFC-aware eBPF function's own program) is sent on by XDP
redirect, and a veth passes XDP frames on only while its NAPI runs: with an XDP program
attached or with GRO on (``docs/performance.md``).  A label popped by a kernel function's proxy
(``sfc_proxy_out``, tc: the forward label right after the node's proxy label) is a socket buffer
sent the ordinary way and needs neither.  So a plain receiver fed by XDP gets GRO on in place of
the forwarder (:data:`XDP_FED`); one fed only by the proxy gets nothing, and its packets skip the
copy a veth makes to run XDP on a socket buffer.

Both planners use it: :mod:`.sfc` for a lab file's chains and :mod:`.chainadd` for a chain added
to a running lab, so the two agree on every interface.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .steering import Hop, PathPlan

#: how a plain receiver is fed: by XDP redirect (needs NAPI), or by the proxy's tc program
XDP_FED, TC_FED = "xdp", "tc"
Iface = tuple[str, str]  # (node, interface)


@dataclass
class Arrivals:
    """The interfaces where a set of paths' frames arrive: ``labelled`` (the forwarder's
    place) and ``plain`` (interface -> how it is fed, :data:`XDP_FED` winning)."""

    labelled: set[Iface] = field(default_factory=set)
    plain: dict[Iface, str] = field(default_factory=dict)

    def add(self, path: PathPlan, hops: dict[int, Hop], aware: set[str]) -> None:
        """``path``'s arrivals; ``aware``: nodes whose SFC-aware eBPF program pops their
        labels in XDP (a kernel function's labels after its proxy are popped by tc)."""
        self.labelled.add((path.next, path.next_ifname))
        last = len(path.stack) - 1
        for i, lbl in enumerate(path.stack):
            h = hops[lbl]
            if h.action not in ("forward", "unpad") or not h.next or not h.next_ifname:
                continue
            where = (h.next, h.next_ifname)
            if i < last:
                self.labelled.add(where)
                continue
            before = hops[path.stack[i - 1]] if i else None
            by_tc = before is not None and before.action == "proxy" and \
                before.node == h.node and h.node not in aware
            if not by_tc or where not in self.plain:
                self.plain[where] = TC_FED if by_tc else XDP_FED

    def gro_only(self) -> dict[Iface, str]:
        """The plain receivers that receive nothing labelled (a labelled receiver has the
        forwarder, whose XDP program keeps NAPI on anyway)."""
        return {k: v for k, v in self.plain.items() if k not in self.labelled}


def arrivals(paths: Iterable[PathPlan], hops: dict[int, Hop], aware: set[str]) -> Arrivals:
    """The arrivals of ``paths`` (labels resolved through ``hops``)."""
    out = Arrivals()
    for p in paths:
        out.add(p, hops, aware)
    return out
