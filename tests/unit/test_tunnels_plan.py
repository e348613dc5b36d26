"""Tunnels of added instances (pure): a VNI only for an instance on another host than its
attach node, above every VNI in use; the MTU fitted to the underlay."""

from __future__ import annotations

from sfclab.plan.chainadd import NewNode
from sfclab.plan.model import HostEndPlan, HostLinkPlan, HostPlan, Plan
from sfclab.plan.tunnels import ADDED_VNI_BASE, LABELLED_MTU, attach_host, fit, names


def node(name: str, host: str, vni: int | None = None) -> NewNode:
    return NewNode(name, f"sfclab:t:{name}", "firewall", {}, "fw", 0.1, 0, host, "r1", "eth9",
                   "eth0", "198.19.255.252/30", "198.19.255.254/30", "198.19.255.253/30", vni)


def plan(r1_host: str | None) -> Plan:
    p = Plan("t", "x")
    if r1_host:
        p.hosts.append(HostPlan(r1_host, f"sfclab:t:@{r1_host}", "198.19.255.1/24", "ul0",
                                "cg", nodes=["r1"]))
    return p


def test_same_host_keeps_a_veth_and_another_host_gets_a_fresh_vni() -> None:
    p = plan(None)
    assert attach_host(p, "r1") == "local"
    a, b, c = node("fw-1", "local"), node("fw-2", "edge2"), node("fw-3", "edge3")
    fit(p, [a, b, c], [], 1600)
    assert a.vni is None and a.mtu == LABELLED_MTU
    assert (b.vni, c.vni) == (ADDED_VNI_BASE, ADDED_VNI_BASE + 1)
    assert b.mtu == min(LABELLED_MTU, 1550)


def test_vnis_in_use_are_never_handed_out_and_a_small_underlay_shrinks_the_mtu() -> None:
    p = plan("h1")
    p.host_links.append(HostLinkPlan(0, "bridge", 1450, [HostEndPlan("a", "h1", "", "", "",
                                                                     "")], 9000))
    old = node("fw-1", "h2", 9001)
    new = node("fw-2", "h2")
    fit(p, [new], [old], 1500)
    assert new.vni == 9002 and new.mtu == 1450
    on_h1 = node("fw-3", "h1")
    fit(p, [on_h1], [old, new], 1500)
    assert on_h1.vni is None
    assert names(9002) == ("pn9002", "vxn9002", "brn9002")
