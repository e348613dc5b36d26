"""Lab (validated spec) -> Plan (every object named, addressed and routed).

The planner walks the lab once: each node's kind plans the node (a namespace, a bridge, a
function), then each link's form plans the link (the veth pair, internal port or patch pair it
becomes, see :mod:`sfclab.realize.links`), then segments get subnets and every forwarding path
its routes.  Kinds and forms reach the plan only through :class:`Planner`, which hands out
names, interface names and addresses and collects the objects; nothing here branches on a kind.
"""

from __future__ import annotations

from ipaddress import ip_interface
from typing import Any, Protocol, cast

from ..spec.lab import Lab, LinkSpec, NodeSpec
from ..spec.segments import segments
from . import names, routing, sfc, tenancy
from . import hosts as plan_hosts
from .model import InterfacePlan, OvsBridgePlan, Plan, RoutePlan, SegmentPlan


class NodePlanner(Protocol):
    """What a node kind does at planning time."""

    def plan_node(self, p: Planner, node: NodeSpec) -> None: ...


class LinkPlanner(Protocol):
    """What a link form does at planning time."""

    def plan_link(self, p: Planner, link: int, spec: LinkSpec) -> dict[int, InterfacePlan]:
        """Add the link's objects to ``p.plan``; return its interfaces by endpoint index (an
        end that is no interface of its own, such as an internal port's bridge side, has none).
        Addressed ends are routed."""
        ...


class Planner:
    """The planning context kinds and forms write through."""

    def __init__(self, lab: Lab, ovs_datapath: str, addrs: dict[tuple[int, int], Any],
                 addrs6: dict[tuple[int, int], Any] | None = None):
        self.lab = lab
        self.ovs_datapath = ovs_datapath
        self.plan = Plan(lab=lab.name, tag=names.lab_tag(lab.name), ip=str(lab.ip))
        self._addrs = addrs
        self._addrs6 = addrs6 or {}
        self._counter = 0
        # interface names inside namespaces: explicit ones first, then eth0, eth1 ... per node
        self._used: dict[str, set[str]] = {n: {"lo", "br0"} for n in lab.nodes}
        for lk in lab.links:
            for ep in lk.endpoints:
                if ep.interface:
                    self._used[ep.node].add(ep.interface)
        self._next_eth: dict[str, int] = {n: 0 for n in lab.nodes}

    def netns(self, node: str) -> str:
        return names.netns_name(self.lab.name, node)

    def root_name(self, letter: str) -> str:
        """A fresh name in the root namespace (and OVSDB): the lab's tag, a letter, a counter."""
        self._counter += 1
        return names.root_name(self.lab.name, letter, self._counter)

    def ifname(self, node: str, explicit: str | None) -> str:
        if explicit:
            return explicit
        while f"eth{self._next_eth[node]}" in self._used[node]:
            self._next_eth[node] += 1
        name = f"eth{self._next_eth[node]}"
        self._used[node].add(name)
        return name

    def address(self, link: int, end: int, family: int = 4) -> str | None:
        """The address of the link's end ``end`` of ``family`` (4 or 6), e.g. "198.18.0.1/24"."""
        a = (self._addrs if family == 4 else self._addrs6).get((link, end))
        return str(a) if a else None

    def alias(self, node: str, link: int) -> str:
        return names.alias(self.lab.name, node, link)

    def ovs_bridge(self, node: str) -> OvsBridgePlan:
        for b in self.plan.ovs_bridges:
            if b.node == node:
                return b
        raise KeyError(node)

    def fit_to_ovs(self, ends: list[InterfacePlan]) -> None:
        """OVS's userspace datapath (netdev) corrupts TCP checksums left to offload: a link with
        an end on a netdev bridge gets tx checksum offload off on its ends, unless the lab file
        set it."""
        netdev = {b.name for b in self.plan.ovs_bridges if b.datapath == "netdev"}
        if any(e.master in netdev for e in ends):
            for e in ends:
                e.offloads.setdefault("tx-checksum", False)

    def namespace_end(self, link: int, end: int, role: str) -> InterfacePlan:
        """The plan of a link's end inside a namespace node (a host, function or Linux bridge):
        named, addressed, marked, and a port of ``br0`` when the node is a Linux bridge."""
        spec = self.lab.links[link]
        ep = spec.endpoints[end]
        node = self.lab.nodes[ep.node]
        return InterfacePlan(node.name, self.netns(node.name), self.ifname(node.name, ep.interface),
                             link, spec.endpoints[1 - end].node, role,
                             address=self.address(link, end), mtu=spec.mtu,
                             offloads=dict(ep.offloads()),
                             master="br0" if node.attachment == "linux-bridge" else None,
                             alias=self.alias(node.name, link),
                             address6=self.address(link, end, 6))


def build_plan(lab: Lab, *, ovs_datapath: str = "netdev", cpus: list[int] | None = None) -> Plan:
    """Turn a validated lab into a plan.  ``ovs_datapath`` is what ``auto`` resolves to;
    ``cpus`` are the machine's online CPUs (what hosts' ``cpus`` are taken from)."""
    segs = segments(lab.nodes, lab.links)
    subnets: dict[int, Any] = {}
    addrs: dict[tuple[int, int], Any] = {}
    subnets6: dict[int, Any] = {}
    addrs6: dict[tuple[int, int], Any] = {}
    if 4 in lab.families:
        subnets, addrs = tenancy.assign(lab, segs)
    if 6 in lab.families:
        subnets6, addrs6 = tenancy.assign(lab, segs, 6)
    p = Planner(lab, ovs_datapath, addrs, addrs6)
    if lab.hosts:
        plan_hosts.check_underlay(lab, subnets.values())
        p.plan.hosts, p.plan.underlay = plan_hosts.plan_hosts(lab, cpus or [0])
    for n in lab.nodes.values():
        cast(NodePlanner, n.kind_ref).plan_node(p, n)

    seg_of: dict[tuple[int, int], int] = {att: s.index for s in segs for att in s.attachments}
    attachments: list[routing.Attachment] = []
    attachments6: list[routing.Attachment] = []
    for li, (lk, form) in enumerate(zip(lab.links, lab.forms)):
        ends = cast(LinkPlanner, form).plan_link(p, li, lk)
        for j, e in ends.items():
            if e.address:
                attachments.append(routing.Attachment(e.node, e.name, ip_interface(e.address).ip,
                                                      seg_of[(li, j)]))
            if e.address6:
                attachments6.append(routing.Attachment(e.node, e.name,
                                                       ip_interface(e.address6).ip,
                                                       seg_of[(li, j)]))

    plan = p.plan
    for seg in segs:
        members = [lab.links[li].endpoints[j].node for li, j in seg.attachments]
        net, net6 = subnets.get(seg.index), subnets6.get(seg.index)
        plan.segments.append(SegmentPlan(seg.index, str(net) if net else None, members,
                                         seg.bridges, str(net6) if net6 else None))
    nets: dict[int, Any] = {k: v for k, v in subnets.items() if v is not None}
    nets6: dict[int, Any] = {k: v for k, v in subnets6.items() if v is not None}
    for family_nets, family_att in ((nets, attachments), (nets6, attachments6)):
        for node, dst, gateway, dev, table in tenancy.routes(lab, segs, family_nets, family_att):
            plan.routes.append(RoutePlan(node, p.netns(node), str(dst),
                                         str(gateway) if gateway else "", dev, table))
    tenancy.plan_tenants(lab, plan, segs, nets or nets6)
    plan.steering = sfc.build(lab, plan)
    if plan.steering is not None:
        plan_hosts.refit(plan)
    return plan
