"""``bpf-firewall``: an SFC-aware firewall in eBPF (``bpf/fw.bpf.c``), the kernel
``firewall``'s twin for chains.

Lab file keys (the ``firewall`` keys an eBPF program holds, so ``kind: firewall`` can be swapped
for ``kind: bpf-firewall`` with the same rules)::

    policy: accept | drop            # what happens to packets no rule decides, default accept
    rules: [{action, proto, src, dst, sport, dport}, ...]   # at most 64; first match wins
    stateful: true                   # default false: accepted flows are remembered (LRU) and
                                     # their replies pass without the rules

IPv4 and IPv6 (labs of ``ip: 6`` or ``dual``), as the kernel firewall's ``inet`` table: one rule
list for both families, a rule with IPv4 prefixes matching IPv4 packets only, one with IPv6
prefixes IPv6 packets only, one with neither both; ``proto: icmpv6`` for ICMPv6.  It filters
every packet that arrives at the node, those for the node itself too (the kernel firewall's
``forward`` and ``input`` hooks), so neighbour discovery is filtered like any ICMPv6: under
``policy: drop`` the node finds its IPv6 neighbours only if a rule accepts ``icmpv6``.

The program is not started by the function: it is the node's SFC program
(:attr:`NetworkFunction.sfc_program`), attached by the data plane in XDP on every interface of
the node in place of the forwarder and the proxy, so the function must be on a chain.  At
``start`` (after the data plane is loaded) the rules are written into the lab's maps under
the node's ``node_id`` (:mod:`.bpf_firewall_maps`); until then the node drops everything.
``inspect`` returns each rule's packet and byte counters, the policy's, and the packets the
connection map passed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..kernel import bpf
from . import bpf_firewall_maps as M
from . import rules as R
from .base import FunctionParams, register
from .sfc_aware import SfcAwareFunction

#: keys of the kernel firewall a bpf-firewall has no use for, and why
KERNEL_ONLY = {
    "backend": "the rules are an eBPF map, not nftables or iptables",
    "iptables": "the rules are an eBPF map, not iptables",
    "hooks": "the program filters in XDP on every interface of the node, not at a kernel hook",
    "generate": "generated rule lists are for the kernel firewall's benches",
    "set": "there are no nftables sets",
}


class BpfFirewallParams(FunctionParams):
    policy: Literal["accept", "drop"] = "accept"
    rules: list[R.Rule] = Field(default_factory=list)
    stateful: bool = False

    @model_validator(mode="before")
    @classmethod
    def _kernel_keys(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            for key, why in KERNEL_ONLY.items():
                if key in raw:
                    raise ValueError(f"'{key}' is a key of kind firewall, not bpf-firewall "
                                     f"({why}); expected policy, rules, stateful")
        return raw

    @field_validator("rules")
    @classmethod
    def _fits(cls, rules: list[R.Rule]) -> list[R.Rule]:
        if len(rules) > M.MAX_RULES:
            raise ValueError(f"{len(rules)} rules; a bpf-firewall holds at most {M.MAX_RULES} "
                             "(its rule map's entries per node, both families together)")
        return rules


@register
class BpfFirewall(SfcAwareFunction):
    kind = "bpf-firewall"
    Params = BpfFirewallParams
    params: BpfFirewallParams
    sfc_program = "sfc_fw"
    families = (4, 6)  # one rule list for both, as the kernel firewall's inet table

    def start(self) -> None:
        p = self.params
        node_id, maps = self._maps()
        rules = [(M.u32(node_id * M.MAX_RULES + i), M.rule_bytes(r))
                 for i, r in enumerate(p.rules)]
        with bpf.PinnedMap(str(maps / "sfc_fw_rules")) as m:
            for k, v in rules:
                m.update(k, v)
        with bpf.PinnedMap(str(maps / "sfc_fw_config")) as m:  # last: the rules are there
            m.update(M.u32(node_id), M.config_bytes(len(p.rules), p.policy, p.stateful))

    def counters(self) -> dict[str, Any]:
        node_id, maps = self._maps()
        try:
            m = bpf.PinnedMap(str(maps / "sfc_fw_counts"))
        except Exception:  # the data plane is gone (a lab half down): no counters
            return {}
        with m:
            def at(slot: int) -> dict[str, int]:
                return M.count_sum(m.lookup(M.u32(node_id * M.SLOTS + slot)))

            return {"rules": [at(i) for i in range(len(self.params.rules))],
                    "policy": at(M.POLICY), "established": at(M.ESTABLISHED)}

    def inspect(self) -> dict[str, Any]:
        p = self.params
        c = self.counters()
        rules = [dict(c["rules"][i] if c else {}, rule=r.model_dump(mode="json",
                                                                    exclude_none=True))
                 for i, r in enumerate(p.rules)]
        return {"program": f"{self.sfc_program} (XDP, bpf/fw.bpf.c)", "policy": p.policy,
                "stateful": p.stateful, "node_id": self.ctx.sfc_node_id, "rules": rules,
                "policy_counter": c.get("policy"), "established": c.get("established")}
