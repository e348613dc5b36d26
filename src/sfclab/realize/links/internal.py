"""``internal`` (``port: internal`` on a link between a namespace node and an OVS bridge): an OVS
internal port moved into the node's namespace.  OVS tracks the port by name, so it keeps its OVS
name (``<tag>i<N>``) inside the namespace; it has only that one end."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from ...kernel import netns, ovs
from ...plan.model import InterfacePlan, OvsPortPlan
from ..step import step
from .base import LinkForm, configure_interface

if TYPE_CHECKING:
    from ...plan.build import Planner
    from ...spec.kinds import Locate
    from ...spec.lab import LinkSpec, NodeSpec
    from ..build import Builder


class Internal(LinkForm):
    name = "internal"

    def selects(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> bool:
        return link.port == "internal"

    def check(self, link: LinkSpec, ends: tuple[NodeSpec, NodeSpec], at: Locate) -> None:
        for j, (ep, node) in enumerate(zip(link.endpoints, ends)):
            if node.is_bridge and ep.offloads():
                raise at("endpoints", j)("an internal port has only the namespace end; set "
                                         "offloads there")
            if not node.is_bridge and ep.interface:
                raise at("endpoints", j)("an internal port keeps its OVS port name inside the "
                                         "namespace; remove 'interface' or use port: veth")

    def plan_link(self, p: Planner, link: int, spec: LinkSpec) -> dict[int, InterfacePlan]:
        j = next(j for j, ep in enumerate(spec.endpoints)
                 if p.lab.nodes[ep.node].attachment != "ovs-bridge")
        bridge = p.ovs_bridge(spec.endpoints[1 - j].node)
        placed = p.namespace_end(link, j, self.name)  # takes an ethN as a veth would
        port = p.root_name("i")
        end = replace(placed, name=port, master=bridge.name)
        bridge.ports.append(OvsPortPlan(port, "internal", bridge.node, link=link))
        p.plan.interfaces.append(end)
        p.fit_to_ovs([end])
        return {j: end}

    def ovs(self, b: Builder) -> None:
        for i in self.interfaces(b.plan):
            b.ovs_commands.append(["add-port", i.master or "", i.name])
            b.ovs_commands.append(["set", "interface", i.name,
                                   f"external_ids:{ovs.MARK}={b.plan.lab}", "type=internal"])

    def attach(self, b: Builder) -> None:
        for i in self.interfaces(b.plan):
            with step(f"internal port {i.name} into {i.netns}"):
                fd = os.open(netns.path(i.netns or ""), os.O_RDONLY)
                try:
                    b.root().link("set", ifname=i.name, net_ns_fd=fd)
                finally:
                    os.close(fd)

    def configure(self, b: Builder) -> None:
        for i in self.interfaces(b.plan):
            configure_interface(b, i, set_mtu=True, enslave=False)  # OVS made it: its MTU is set now
