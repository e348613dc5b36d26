"""``ovs-bridge``: an Open vSwitch bridge (no namespace); links meeting it become its ports.

Its datapath is the kernel's when the ``openvswitch`` module is there and the userspace one
(``datapath_type=netdev``) otherwise; ``auto`` picks.  The bridge and every port carry the lab's
mark in ``external_ids``; ``down`` removes only journaled bridges that carry it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...kernel import ovs
from ...plan.model import OvsBridgePlan
from ..part import Part

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...plan.build import Planner
    from ...plan.model import Plan
    from ...spec.lab import NodeSpec
    from ..build import Builder
    from ..state import LabState
    from ..teardown import TeardownReport


class OvsBridge(Part):
    name = "ovs-bridge"
    attachment = "ovs-bridge"
    has_namespace = False
    forwards = False
    sfc_program = None
    families = (4, 6)  # a bridge forwards frames of either family
    teardown_rank = 20
    mermaid = ('[["', '"]]')
    dot = "box3d"

    def params_model(self) -> type[BaseModel]:
        from ...spec.lab import OvsBridgeParams  # light start-up: pydantic only to validate

        return OvsBridgeParams

    def params_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        return raw

    def plan_node(self, p: Planner, node: NodeSpec) -> None:
        dp = node.params.datapath if node.params.datapath != "auto" else p.ovs_datapath
        p.plan.ovs_bridges.append(OvsBridgePlan(node.name, p.root_name("b"), dp))

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return [{"op": "ovs-bridge", "name": b.name} for b in plan.ovs_bridges]

    def ovs(self, b: Builder) -> None:
        for br in b.plan.ovs_bridges:
            b.ovs_commands.append(["add-br", br.name])
            b.ovs_commands.append(["set", "bridge", br.name, f"datapath_type={br.datapath}",
                                   f"external_ids:{ovs.MARK}={b.plan.lab}",
                                   f"external_ids:sfclab-node={br.node}"])

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        bridges = [e["name"] for e in journal if e.get("op") == "ovs-bridge"]
        if not bridges:
            return
        try:
            mine = set(ovs.owned_bridges(state.name))
            doomed = [b for b in bridges if b in mine]
            if doomed:
                ovs.vsctl([["--if-exists", "del-br", b] for b in doomed])
                report.bridges = len(doomed)
        except Exception as e:  # keep going: namespaces must still go
            report.errors.append(f"ovs: {e}")

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        live = ovs.bridge_info([b.name for b in plan.ovs_bridges]) if plan.ovs_bridges else {}
        for b in plan.ovs_bridges:
            info = live.get(b.name, {})
            dp = info.get("datapath_type", b.datapath)
            nodes[b.node] = {
                "kind": "ovs-bridge", "bridge": b.name, "present": bool(info),
                "datapath": dp,
                "datapath_note": ("userspace datapath (datapath_type=netdev): this kernel has no "
                                  "openvswitch module; tx checksum offload is off on attached "
                                  "interfaces") if dp == "netdev" else "kernel datapath",
                "ports": info.get("ports", sorted(p.name for p in b.ports)),
            }
