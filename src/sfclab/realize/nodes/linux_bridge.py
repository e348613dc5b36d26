"""``linux-bridge``: a Linux bridge ``br0`` in a namespace of its own; links meeting it become
its ports (enslaved in stage 6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...plan.model import LinuxBridgePlan
from .namespace import NamespaceNode

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...plan.build import Planner
    from ...plan.model import Plan
    from ...spec.lab import NodeSpec
    from ..build import Builder
    from ..state import LabState


class LinuxBridge(NamespaceNode):
    name = "linux-bridge"
    attachment = "linux-bridge"
    mermaid = ('[/"', '"/]')
    dot = "trapezium"

    def params_model(self) -> type[BaseModel]:
        from ...spec.lab import LinuxBridgeParams  # light start-up: pydantic only to validate

        return LinuxBridgeParams

    def plan_node(self, p: Planner, node: NodeSpec) -> None:
        super().plan_node(p, node)
        p.plan.linux_bridges.append(LinuxBridgePlan(node.name, p.netns(node.name)))

    def links(self, b: Builder) -> None:
        for br in b.plan.linux_bridges:
            b.link_batch.bridge(br.name, b.fds[br.netns], f"linux bridge {br.name} in {br.netns}",
                                index=b.created(br.netns, br.name))

    def configure(self, b: Builder) -> None:
        super().configure(b)
        for br in b.plan.linux_bridges:
            b.batch(br.netns).link(b.index[(br.netns, br.name)],
                                   f"linux bridge {br.name} in {br.netns}")

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        super().inspect(state, plan, nodes)
        for br in plan.linux_bridges:
            nodes[br.node]["bridge"] = br.name
