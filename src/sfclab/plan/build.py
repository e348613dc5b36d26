"""Lab (validated spec) -> Plan (every object named, addressed and routed).

Link forms and what they become:

==============  =====================================================================
ns - ns         a veth pair, one end in each namespace
ns - linux      a veth pair, the bridge end enslaved to ``br0`` in the bridge's namespace
ns - ovs        ``port: veth`` (default): a veth pair whose root end is an OVS port;
                ``port: internal``: an OVS internal port moved into the namespace
ovs - ovs       ``connect: patch`` (default): a pair of patch ports; ``veth``: a veth pair
linux - linux   a veth pair between the two bridge namespaces
linux - ovs     a veth pair, one end in the bridge namespace, the other an OVS port
==============  =====================================================================
"""

from __future__ import annotations

from ipaddress import IPv4Interface

from ..spec.checks import link_form
from ..spec.lab import Lab
from . import addressing, names, routing
from .model import (InterfacePlan, LinuxBridgePlan, NamespacePlan, OvsBridgePlan, OvsPortPlan,
                    Plan, RoutePlan, SegmentPlan, VethPlan)
from .segments import segments


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def build_plan(lab: Lab, *, ovs_datapath: str = "netdev") -> Plan:
    """Turn a validated lab into a plan.  ``ovs_datapath`` is what ``auto`` resolves to."""
    plan = Plan(lab=lab.name, tag=names.lab_tag(lab.name))
    order = list(lab.nodes)
    for n in lab.nodes.values():
        if n.has_namespace:
            plan.namespaces.append(NamespacePlan(n.name, names.netns_name(lab.name, n.name), n.kind,
                                                 n.forwards))
        if n.kind == "linux-bridge":
            plan.linux_bridges.append(LinuxBridgePlan(n.name, names.netns_name(lab.name, n.name)))
        if n.kind == "ovs-bridge":
            dp = n.params.datapath if n.params.datapath != "auto" else ovs_datapath
            plan.ovs_bridges.append(OvsBridgePlan(n.name, "", dp))
        if n.forwards:
            params = (n.params.model_dump(mode="json", by_alias=True, exclude_unset=True)
                      if n.params is not None else {})
            plan.functions[n.name] = {"kind": n.kind, "params": params}
    counter = _Counter()
    ovs = {b.node: b for b in plan.ovs_bridges}
    for b in plan.ovs_bridges:
        b.name = names.root_name(lab.name, "b", counter())

    # interface names inside namespaces: explicit ones first, then eth0, eth1 ... per node
    used: dict[str, set[str]] = {n: {"lo", "br0"} for n in lab.nodes}
    for lk in lab.links:
        for ep in lk.endpoints:
            if ep.interface:
                used[ep.node].add(ep.interface)
    next_eth: dict[str, int] = {n: 0 for n in lab.nodes}

    def ns_ifname(node: str, explicit: str | None) -> str:
        if explicit:
            return explicit
        while f"eth{next_eth[node]}" in used[node]:
            next_eth[node] += 1
        name = f"eth{next_eth[node]}"
        used[node].add(name)
        return name

    segs = segments(lab.nodes, lab.links)
    subnets, addrs = addressing.assign(lab.addressing, lab.links, segs, lab.source)
    seg_of: dict[tuple[int, int], int] = {att: s.index for s in segs for att in s.attachments}
    attachments: list[routing.Attachment] = []

    for li, lk in enumerate(lab.links):
        eps = lk.endpoints
        a, b = (lab.nodes[ep.node] for ep in eps)
        form = link_form(a, b)
        ends: list[InterfacePlan] = []
        for j, ep in enumerate(eps):
            node = lab.nodes[ep.node]
            peer = eps[1 - j].node
            addr = addrs.get((li, j))
            if node.kind == "ovs-bridge":
                br = ovs[node.name]
                if form == "ovs-ovs" and (lk.connect or "patch") == "patch":
                    name = names.root_name(lab.name, "p", counter())
                    br.ports.append(OvsPortPlan(name, "patch", node.name, link=li))
                    ends.append(InterfacePlan(node.name, None, name, li, peer, "patch", mtu=lk.mtu,
                                              master=br.name))
                elif form == "ns-ovs" and lk.port == "internal":
                    ends.append(InterfacePlan(node.name, None, "", li, peer, "internal",
                                              master=br.name))
                else:
                    name = names.root_name(lab.name, "v", counter())
                    br.ports.append(OvsPortPlan(name, "system", node.name, link=li))
                    ends.append(InterfacePlan(node.name, None, name, li, peer, "veth", mtu=lk.mtu,
                                              offloads=dict(ep.offloads()), master=br.name,
                                              alias=names.alias(lab.name, node.name, li)))
            else:
                netns = names.netns_name(lab.name, node.name)
                ends.append(InterfacePlan(node.name, netns, ns_ifname(node.name, ep.interface), li,
                                          peer, "veth", address=str(addr) if addr else None,
                                          mtu=lk.mtu, offloads=dict(ep.offloads()),
                                          master="br0" if node.kind == "linux-bridge" else None,
                                          alias=names.alias(lab.name, node.name, li)))
        # an internal port: the OVS end disappears, the namespace end becomes the OVS port
        kinds = [e.role for e in ends]
        if "internal" in kinds:
            k = kinds.index("internal")
            ns_end = ends[1 - k]
            ns_end.role = "internal"
            port = names.root_name(lab.name, "i", counter())
            ns_end.name = port  # OVS tracks the port by name, so it keeps it in the namespace
            ns_end.master = ends[k].master
            ovs[ends[k].node].ports.append(OvsPortPlan(port, "internal", ends[k].node, link=li))
            plan.interfaces.append(ns_end)
        elif all(e.role == "patch" for e in ends):
            pa, pb = ovs[ends[0].node].ports[-1], ovs[ends[1].node].ports[-1]
            pa.peer_port, pb.peer_port = pb.name, pa.name
            plan.interfaces.extend(ends)
        else:
            plan.veths.append(VethPlan(li, ends[0], ends[1]))
            plan.interfaces.extend(ends)
        for j, e in enumerate(ends):
            if e.address:
                attachments.append(routing.Attachment(e.node, e.name, IPv4Interface(e.address).ip,
                                                      seg_of[(li, j)]))
        # netdev (userspace) OVS: TCP fails silently with tx checksum offload on attached ends
        netdev = {b.name for b in plan.ovs_bridges if b.datapath == "netdev"}
        if any(e.master in netdev for e in ends):
            for e in ends:
                if e.role in ("veth", "internal") and "tx-checksum" not in e.offloads:
                    e.offloads["tx-checksum"] = False

    for seg in segs:
        members = [lab.links[li].endpoints[j].node for li, j in seg.attachments]
        net = subnets.get(seg.index)
        plan.segments.append(SegmentPlan(seg.index, str(net) if net else None, members,
                                         seg.bridges))

    forwards = {n: s.forwards for n, s in lab.nodes.items()}
    nets = {k: v for k, v in subnets.items() if v is not None}
    for r in routing.compute(order, forwards, nets, attachments):
        plan.routes.append(RoutePlan(r.node, names.netns_name(lab.name, r.node), str(r.dst),
                                     str(r.gateway), r.dev))
    return plan
