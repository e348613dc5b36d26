"""``patch`` (the default between two OVS bridges, ``connect: patch``): a pair of OVS patch
ports, each naming the other as its peer; no kernel interface at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...kernel import ovs
from ...plan.model import InterfacePlan, OvsPortPlan
from .base import LinkForm

if TYPE_CHECKING:
    from ...plan.build import Planner
    from ...spec.kinds import Locate
    from ...spec.lab import LinkSpec, NodeSpec
    from ..build import Builder


class Patch(LinkForm):
    name = "patch"

    def selects(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> bool:
        return (a.attachment == b.attachment == "ovs-bridge"
                and (link.connect or "patch") == "patch")

    def check(self, link: LinkSpec, ends: tuple[NodeSpec, NodeSpec], at: Locate) -> None:
        for j, ep in enumerate(link.endpoints):
            if ep.offloads():
                raise at("endpoints", j)("patch ports have no offloads to set")

    def plan_link(self, p: Planner, link: int, spec: LinkSpec) -> dict[int, InterfacePlan]:
        ports, ends = [], []
        for j, ep in enumerate(spec.endpoints):
            br = p.ovs_bridge(ep.node)
            port = OvsPortPlan(p.root_name("p"), "patch", ep.node, link=link)
            br.ports.append(port)
            ports.append(port)
            ends.append(InterfacePlan(ep.node, None, port.name, link, spec.endpoints[1 - j].node,
                                      self.name, mtu=spec.mtu, master=br.name))
        ports[0].peer_port, ports[1].peer_port = ports[1].name, ports[0].name
        p.plan.interfaces.extend(ends)
        return {}

    def ovs(self, b: Builder) -> None:
        for br in b.plan.ovs_bridges:
            for port in br.ports:
                if port.type != self.name:
                    continue
                b.ovs_commands.append(["add-port", br.name, port.name])
                b.ovs_commands.append(["set", "interface", port.name,
                                       f"external_ids:{ovs.MARK}={b.plan.lab}", "type=patch",
                                       f"options:peer={port.peer_port}"])
