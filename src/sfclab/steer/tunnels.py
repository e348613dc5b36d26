"""The link of an added instance on another host than its attach node (plan:
:mod:`sfclab.plan.tunnels`): as a lab file's hosted link across hosts with attach ``bridge``
(:mod:`sfclab.realize.links.hosted`), made in the two hosts' contexts, never in the nodes.

In each context: a veth ``pn<vni>`` whose peer (made there, then moved) is the node's end --
``eth0`` in the instance, its ``attach_ifname`` in the attach node; a VXLAN device
``vxn<vni>`` toward the other host's underlay address (UDP 4789 over ``ul0``, no learning);
a Linux bridge ``brn<vni>`` joining the two.  Everything is in lab namespaces (contexts of
emulated hosts), so ``down`` removes it with them; :func:`remove` takes it out at once when
``chain rm`` or a migration removes the instance.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..hosts.attach import ATTACH_KINDS, Joint
from ..hosts.context import EmulatedHost, HostContext
from ..kernel import netns
from ..plan.chainadd import NewNode
from ..plan.model import HostEndPlan, HostLinkPlan, Plan
from ..plan.names import host_netns
from ..plan.tunnels import attach_host, names
from ..realize.state import LabState
from ..realize.step import step
from .underlay import Joined, join

Ends = tuple[Joined, Joined]  # (the attach node's host, the instance's host)
VXLAN_PORT = 4789
ATTACH = "bridge"  # the attach kind joining port and tunnel in each context


def prepare(state: LabState, plan: Plan, n: NewNode, labelled_mtu: int) -> Ends | None:
    """The two hosts joined to the underlay (made on first need, journaled); None when ``n``
    is on its attach node's host."""
    if n.vni is None:
        return None
    return (join(state, plan, attach_host(plan, n.attach), labelled_mtu),
            join(state, plan, n.host, labelled_mtu))


def make(plan: Plan, n: NewNode, ends: Ends) -> None:
    sides = [(ends[0], ends[1], plan.netns_of(n.attach), n.attach_ifname),
             (ends[1], ends[0], n.netns, n.ifname)]
    for here, there, node_ns, node_if in sides:
        make_end(plan, n, EmulatedHost(here.host, here.netns), here, there, node_ns, node_if)


def make_end(plan: Plan, n: NewNode, ctx: HostContext, here: Joined, there: Joined,
             node_ns: str, node_if: str, alias: str | None = None) -> None:
    """One host's end of ``n``'s tunnel in context ``ctx``: port ``pn<vni>`` whose peer
    ``node_if`` goes into ``node_ns``, VXLAN toward ``there``, bridge joining them.
    ``alias``: marks for the VXLAN device and bridge (a real host's context outlives the lab:
    they are journaled and removed by mark)."""
    assert n.vni is not None
    port, vx, br = names(n.vni)
    udp = plan.underlay.vxlan_port if plan.underlay is not None else VXLAN_PORT
    end = HostEndPlan(n.node, here.host, here.netns, port, node_ns, node_if, vxlan=vx,
                      local=here.address.split("/")[0],
                      remote=there.address.split("/")[0], joiner=br)
    hl = HostLinkPlan(-1, ATTACH, n.mtu, [end], n.vni)
    with step(f"tunnel {n.vni} of {n.node} in host {here.host}"):
        ipr = ctx.iproute()
        try:
            ipr.link("add", ifname=port, kind="veth", peer=node_if, mtu=n.mtu)
            idx = ipr.link_lookup(ifname=node_if)[0]
            fd = os.open(netns.path(node_ns), os.O_RDONLY | os.O_CLOEXEC)
            try:
                ipr.link("set", index=idx, net_ns_fd=fd)
            finally:
                os.close(fd)
            ul = ipr.link_lookup(ifname=here.underlay_if)[0]
            ipr.link("add", ifname=vx, kind="vxlan", vxlan_id=n.vni, vxlan_local=end.local,
                     vxlan_group=end.remote, vxlan_port=udp, vxlan_link=ul,
                     vxlan_learning=0, mtu=n.mtu)
            for dev in (port, vx):
                ipr.link("set", index=ipr.link_lookup(ifname=dev)[0], state="up")
            # the lab file's attach kind joins port and tunnel, as for its hosted links
            ATTACH_KINDS[ATTACH].join(Joint(ctx, ipr, hl, [end], plan.lab, Path("/"),
                                            xdp_nodes=True))
            if alias is not None:
                for dev in (vx, br):
                    ipr.link("set", index=ipr.link_lookup(ifname=dev)[0],
                             ifalias=f"{alias}:{dev}")
        finally:
            ipr.close()
        ctx.set_offloads(port, {"gro": True})  # XDP-redirected frames need NAPI


def _context(plan: Plan, host: str) -> str:
    hp = next((h for h in plan.hosts if h.name == host), None)
    return hp.netns if hp is not None else host_netns(plan.lab, host)


def remove(plan: Plan, n: NewNode) -> list[str]:
    """Delete ``n``'s tunnel devices in both contexts (absent ones are skipped)."""
    if n.vni is None:
        return []
    errors = []
    for host in dict.fromkeys((attach_host(plan, n.attach), n.host)):
        ctx = _context(plan, host)
        if not netns.exists(ctx):
            continue
        try:
            ipr = netns.iproute(ctx)
            try:
                for dev in names(n.vni):
                    with contextlib.suppress(IndexError):
                        ipr.link("del", index=ipr.link_lookup(ifname=dev)[0])
            finally:
                ipr.close()
        except Exception as e:
            errors.append(f"tunnel {n.vni} in host {host}: {e}")
    return errors
