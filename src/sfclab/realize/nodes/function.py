"""A function node kind (``router``, ``firewall``, ``nat`` ...): a forwarding namespace plus the
behaviour of one :class:`~sfclab.functions.base.NetworkFunction` class.

One :class:`FunctionNode` stands in the node table for each class of the function registry.  It
records the node's validated keys in the plan (so ``down`` in a fresh process can rebuild the
function), loads every function's kernel state in stage 7 before any starts in stage 8, stops
them first at ``down``, and adds the function's own ``inspect`` to the node's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import functions
from ...errors import SpecError
from ...plan.model import FunctionPlan
from .. import ownership
from ..step import step
from .namespace import NamespaceNode

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...functions.base import NetworkFunction
    from ...plan.build import Planner
    from ...plan.model import Plan
    from ...spec.lab import NodeSpec
    from ..build import Builder
    from ..state import LabState
    from ..teardown import TeardownReport


class FunctionNode(NamespaceNode):
    forwards = True
    teardown_rank = 10

    def __init__(self, kind: str):
        self.name = kind  # type: ignore[misc]  # one table entry per function kind

    @property
    def cls(self) -> type[NetworkFunction]:
        return functions.get(self.name)

    @property  # per function class (loaded when asked), not per node kind
    def sfc_program(self) -> str | None:  # type: ignore[override]
        return self.cls.sfc_program

    @property  # per function class, as sfc_program
    def families(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.cls.families

    def params_model(self) -> type[BaseModel]:
        return self.cls.Params

    def function(self, state: LabState, plan: Plan, node: str) -> NetworkFunction:
        from ..functions import instantiate  # light start-up: pydantic only when needed

        return instantiate(state, plan, node)

    def params_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in raw.items() if k != "kind"}

    def plan_node(self, p: Planner, node: NodeSpec) -> None:
        super().plan_node(p, node)
        params = node.params.model_dump(mode="json", by_alias=True, exclude_unset=True)
        p.plan.functions[node.name] = FunctionPlan(self.name, params)
        if self.cls.sfc_program and not _on_a_chain(p, node.name):
            raise p.lab.error_at(SpecError(
                f"a {self.name} reads the label stack, so it works only as a function of a "
                "chain: expected a chain (or a group of a chain) listing it in 'functions'"),
                ("nodes", node.name))
        if self.cls.runs_image:  # the node's container is the function: it must have one
            self._plan_container(p, node)

    def _plan_container(self, p: Planner, node: NodeSpec) -> None:
        mine = [c for c in p.plan.containers if c.node == node.name]
        if not mine:
            raise p.lab.error_at(SpecError(
                f"a {self.name} function runs its image: expected an 'image' key (an image "
                "in this machine's store, e.g. one 'sfclab image build' made)"),
                ("nodes", node.name))
        try:
            self.cls.plan_container(node.params, mine[0])
        except SpecError as e:
            raise p.lab.error_at(e, ("nodes", node.name)) from None

    def nodes(self, plan: Plan) -> list[str]:
        return [n for n, f in plan.functions.items() if f.kind == self.name]

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return super().journal(plan) + [{"op": "function", "node": n, "kind": self.name}
                                        for n in self.nodes(plan)]

    def prepare(self, b: Builder) -> None:
        for node in self.nodes(b.plan):
            with step(f"function {node} ({self.name}) in {b.plan.netns_of(node)}"):
                self.function(b.state, b.whole, node).configure()

    def start(self, b: Builder) -> None:
        for node in self.nodes(b.plan):
            with step(f"function {node} ({self.name}) in {b.plan.netns_of(node)}"):
                self.function(b.state, b.whole, node).start()

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        if plan is None:
            return
        for node in self.nodes(plan):
            problem = ownership.function_problem(state.name, plan, node)
            if problem:
                report.errors.append(f"function {node}: {problem}; not stopped")
                continue
            if not state.node_dir(node).exists():
                continue  # only functions that left state (processes, cgroups) need a stop
            try:
                self.function(state, plan, node).stop()
            except Exception as e:  # a broken function must not keep the lab alive
                report.errors.append(f"function {node}: {e}")

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        super().inspect(state, plan, nodes)
        for node in self.nodes(plan):
            if not nodes[node]["present"]:
                continue
            try:
                nodes[node]["function"] = self.function(state, plan, node).inspect()
            except Exception as e:  # inspect must still show the rest
                nodes[node]["function"] = {"error": str(e)}


def _on_a_chain(p: Planner, node: str) -> bool:
    """True if some chain of the lab lists ``node`` among its functions, or a group of it."""
    for chain in p.lab.chains.values():
        for f in chain.functions:
            if f == node or (f in p.lab.groups and node in p.lab.groups[f].instances):
                return True
    return False
