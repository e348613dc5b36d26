"""``bpf-pipeline``: several SFC-aware eBPF functions on one node, run in order in one XDP hook
by tail calls (``bpf/pipeline.bpf.c``, ``include/sfc_stage.h``).

Lab file keys::

    functions:                       # 2 to 4, in the order a packet meets them; each kind once
      - {kind: bpf-firewall, policy: drop, rules: [...]}
      - {kind: bpf-balancer, vip: 198.18.9.10, backends: [...]}     # or bpf-nat

Each entry takes the keys of its kind (validated by the kind's own model, so its limits hold);
the node's lifecycle hooks (``check``, ``configure``, ``start``, ``stop``) run each function's
in order.
The node is one function of a chain, as a single eBPF function is: the data plane attaches the
dispatcher ``sfc_pipe`` on every interface in place of the forwarder and the proxy, and puts
each function's *stage program* (:data:`STAGES`: a kind -> its program, one line per kind) in
the lab's tail-call table (``sfc_stages``, a ``BPF_MAP_TYPE_PROG_ARRAY``) as the node's stage
0, 1, ...  The dispatcher tail-calls stage 0 with the frame; each stage does its function on the
IPv4 or IPv6 packet (plain, or under the node's labels), as the kind alone does it (a drop ends
it there), and tail-calls the next; after the last, the node's labels are popped and the frame
redirected, as a single function's program does.  So a packet crosses a firewall and a balancer
in one XDP run and one node, with the result of two nodes.

The node carries the families every kind that can be a stage carries (:data:`FAMILIES`: IPv4
and IPv6, so it is taken in labs of ``ip: 4``, ``6`` and ``dual``); a stage's own limits by
family hold as for the kind alone (a balancer's ``vip`` of a family the lab's links carry).

At ``start`` each function writes its own maps under the node's ``node_id`` (their maps are
keyed by the node, hence each kind once).  ``inspect`` returns each function's own inspect, in
order, under ``functions``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from . import bpf_balancer, bpf_firewall, bpf_nat
from .base import FunctionParams, NetworkFunction, register

#: eBPF functions on one node at most (``SFC_MAX_STAGES``, include/sfc_stage.h)
MAX_STAGES = 4
#: a kind that can be a stage -> (its class, its stage program)
STAGES: dict[str, tuple[type[NetworkFunction], str]] = {
    "bpf-firewall": (bpf_firewall.BpfFirewall, "sfc_fw_stage"),
    "bpf-balancer": (bpf_balancer.BpfBalancer, "sfc_lb_stage"),
    "bpf-nat": (bpf_nat.BpfNat, "sfc_nat_stage"),
}
#: the address families a pipeline carries: those of every kind that can be a stage
FAMILIES: tuple[int, ...] = tuple(f for f in (4, 6)
                                  if all(f in cls.families for cls, _ in STAGES.values()))


class FirewallStage(bpf_firewall.BpfFirewallParams):
    kind: Literal["bpf-firewall"]


class BalancerStage(bpf_balancer.BpfBalancerParams):
    kind: Literal["bpf-balancer"]


class NatStage(bpf_nat.BpfNatParams):
    kind: Literal["bpf-nat"]


Stage = Annotated[FirewallStage | BalancerStage | NatStage, Field(discriminator="kind")]


class BpfPipelineParams(FunctionParams):
    functions: list[Stage] = Field(min_length=2, max_length=MAX_STAGES)

    @field_validator("functions", mode="before")
    @classmethod
    def _stage_kinds(cls, raw: Any) -> Any:
        for i, f in enumerate(raw if isinstance(raw, list) else []):
            kind = f.get("kind") if isinstance(f, dict) else None
            if kind not in STAGES:
                raise ValueError(f"an eBPF function kind ({', '.join(STAGES)}) as the 'kind' of "
                                 f"functions[{i}], got {kind!r}")
        return raw

    @field_validator("functions")
    @classmethod
    def _each_kind_once(cls, stages: list[Stage]) -> list[Stage]:
        kinds = [s.kind for s in stages]
        twice = next((k for k in kinds if kinds.count(k) > 1), None)
        if twice:
            raise ValueError(f"at most one function of each kind ({twice} is listed twice: "
                             "a function's maps are keyed by its node)")
        return stages

    def sfc_stages(self) -> list[str]:
        """The stage programs, in order (the data plane puts them in the tail-call table)."""
        return [STAGES[s.kind][1] for s in self.functions]


@register
class BpfPipeline(NetworkFunction):
    kind = "bpf-pipeline"
    Params = BpfPipelineParams
    params: BpfPipelineParams
    sfc_program = "sfc_pipe"
    families = FAMILIES

    def stages(self) -> list[NetworkFunction]:
        """Each function of the node, as its own kind, sharing the node's context."""
        return [STAGES[s.kind][0](self.ctx, s) for s in self.params.functions]

    def check(self) -> None:
        for f in self.stages():
            f.check()

    def configure(self) -> None:
        for f in self.stages():
            f.configure()

    def start(self) -> None:
        for f in self.stages():
            f.start()

    def stop(self) -> None:
        for f in self.stages():
            f.stop()

    def programs(self) -> list[str]:
        return sorted({p for f in self.stages() for p in f.programs()})

    def inspect(self) -> dict[str, Any]:
        return {"program": f"{self.sfc_program} (XDP, bpf/pipeline.bpf.c), tail calls to "
                + ", ".join(self.params.sfc_stages()), "node_id": self.ctx.sfc_node_id,
                "functions": [dict(f.inspect(), kind=f.kind) for f in self.stages()]}
