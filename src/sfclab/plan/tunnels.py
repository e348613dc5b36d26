"""Tunnels of added instances (pure): an instance ``chain add`` or ``migrate`` places on
another host than its attach node is joined to it through the two hosts' contexts, as the lab
file's hosted links across hosts are (:mod:`.hosts`): in each context a port (the veth whose
peer is the node's end), a VXLAN device toward the other host and a Linux bridge joining them
(attach kind ``bridge``).  Names in a context come from the tunnel's VNI (``pn<vni>``,
``vxn<vni>``, ``brn<vni>``), so they never clash with the lab file's (``p<link>e<j>``,
``vx<link>``, ``br<link>``) nor with each other.

VNIs are handed out above every VNI in use (the lab file's tunnels and every added
instance's), from ``ADDED_VNI_BASE``.  The link's MTU is the labelled MTU of the chain's
encoding (:func:`labelled_mtu`: ``BASE_MTU`` and room for its largest header) when the underlay
carries it with VXLAN's 50 bytes, else the underlay's MTU less 50.  Same-host instances keep their plain veth (``vni`` None).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..spec.limits import VXLAN_OVERHEAD
from .hosts import VNI_BASE
from .model import HostEndPlan, HostLinkPlan
from .names import host_netns
from .paths import DEFAULT_MTU as BASE_MTU
from .encap import encap_of
from .sfc import LABEL_ROOM

if TYPE_CHECKING:
    from .chainadd import NewNode
    from .model import Plan

LOCAL = "local"
ADDED_VNI_BASE = VNI_BASE + 4000
LABELLED_MTU = BASE_MTU + LABEL_ROOM  # an added instance's link carries a full label stack


def labelled_mtu(encap: str = "mpls") -> int:
    """The MTU of an added instance's link on a chain of encoding ``encap``: the base MTU and
    room for that encoding's largest header (:mod:`.encap`: 64 bytes of labels, 8 of NSH,
    304 of an SRv6 outer header and SRH)."""
    return BASE_MTU + encap_of(encap).headroom


def attach_host(plan: Plan, node: str) -> str:
    """The host a lab node is on (``local``: the implicit host of a lab without hosts)."""
    h = plan.host_of(node)
    return h.name if h is not None else LOCAL


def names(vni: int) -> tuple[str, str, str]:
    """(port, vxlan, bridge) of tunnel ``vni`` in each of its two contexts."""
    return f"pn{vni}", f"vxn{vni}", f"brn{vni}"


def used_vnis(plan: Plan, nodes: Iterable[NewNode]) -> set[int]:
    out = {hl.vni for hl in plan.host_links if hl.vni is not None}
    return out | {n.vni for n in nodes if n.vni is not None}


def fit(plan: Plan, new: list[NewNode], existing: Iterable[NewNode], underlay_mtu: int,
        labelled_mtu: int = LABELLED_MTU) -> None:
    """Give each of ``new`` on another host than its attach node a free VNI and its MTU."""
    taken = used_vnis(plan, existing)
    nxt = max(taken | {ADDED_VNI_BASE - 1}) + 1
    for n in new:
        if n.host == attach_host(plan, n.attach):
            n.vni, n.mtu = None, labelled_mtu
            continue
        n.vni = nxt
        nxt += 1
        n.mtu = min(labelled_mtu, underlay_mtu - VXLAN_OVERHEAD)


#: how an added instance's tunnel joins port and tunnel in each context
ATTACH = "bridge"


def host_link(plan: Plan, n: NewNode, ends: list[tuple[str, str, str | None]]) -> HostLinkPlan:
    """The hosted link (:class:`~.model.HostLinkPlan`, ``link`` -1: no link of the lab file)
    of added instance ``n`` with a tunnel: ``ends`` gives (host, its context's namespace, its
    underlay address or None) for the attach node's host, then the instance's.  In the
    plan's ``host_links`` it is shown (``inspect``, ``host ls``, ``graph``) like the lab
    file's, and made and removed by the same code (:mod:`sfclab.realize.links.hosted`)."""
    assert n.vni is not None and len(ends) == 2
    port, vx, br = names(n.vni)
    sides = [(ends[0], ends[1], n.attach, plan.netns_of(n.attach), n.attach_ifname),
             (ends[1], ends[0], n.node, n.netns, n.ifname)]
    out = []
    for (host, ctx, addr), (_, _, other), node, node_ns, node_if in sides:
        out.append(HostEndPlan(node, host, ctx, port, node_ns, node_if, vxlan=vx,
                               local=addr.split("/")[0] if addr else None,
                               remote=other.split("/")[0] if other else None, joiner=br))
    return HostLinkPlan(-1, ATTACH, n.mtu, out, n.vni)


def planned_link(plan: Plan, n: NewNode) -> HostLinkPlan:
    """The hosted link of added instance ``n`` (with a VNI) as the plan knows it: each end in
    its host's context (a plan host's, else the implicit host ``local``'s,
    ``sfclab:<lab>:@local``), with its underlay address where the plan has one (a host the
    lab file or ``host add --ssh`` names); the others are given theirs once their hosts join
    the underlay (:mod:`sfclab.live.hosts.underlay`)."""
    ends = []
    for host in (attach_host(plan, n.attach), n.host):
        hp = next((h for h in plan.hosts if h.name == host), None)
        ends.append((host, hp.netns if hp is not None else host_netns(plan.lab, host),
                     (hp.address or None) if hp is not None else None))
    return host_link(plan, n, ends)


def host_link_of(plan: Plan, node: str) -> HostLinkPlan | None:
    """The hosted link of added instance ``node`` in ``plan``, if it has one."""
    return next((hl for hl in plan.host_links if hl.link == -1 and
                 any(e.node == node for e in hl.ends[1:])), None)
