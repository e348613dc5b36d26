"""``firewall``: a router whose forward path (and optionally input path) is filtered.

Lab file keys::

    backend: nftables | iptables     # default nftables
    iptables: legacy | nft           # which iptables, default legacy (the classic linear list)
    policy: accept | drop            # what happens to packets no rule decides, default accept
    hooks: [forward, input]          # filtered paths, default [forward]
    rules: [{action, proto, src, dst, sport, dport}, ...]   # src/dst: IPv4 or IPv6 prefixes
    generate: {count: N, type: stateless | stateful}
    set: true                        # nftables: generated rules as one rule + a set of N

The whole rule list is loaded in one batch (``nft -f -`` or ``iptables-restore``) — see
:mod:`sfclab.functions.rules` for the text and the order of rules.  ``inspect`` returns each
user rule's packet and byte counters, the generated rules' sum and the policy counter.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field, model_validator

from . import rules as R
from .base import FunctionParams, NetworkFunction, register


class FirewallParams(FunctionParams):
    backend: Literal["nftables", "iptables"] = "nftables"
    iptables: Literal["legacy", "nft"] = "legacy"
    policy: Literal["accept", "drop"] = "accept"
    hooks: list[R.Hook] = Field(default=["forward"], min_length=1)
    rules: list[R.Rule] = Field(default_factory=list)
    generate: R.Generate | None = None
    set: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "FirewallParams":
        if len(set(self.hooks)) != len(self.hooks):
            raise ValueError("each hook at most once")
        if self.set:
            if self.backend != "nftables":
                raise ValueError("set: true needs backend: nftables")
            if self.generate is None or self.generate.type != "stateless":
                raise ValueError("set: true needs generate: {count: N, type: stateless}")
        if self.backend == "iptables":
            R.refuse_ipv6(self.rules, "backend iptables")
        return self


@register
class Firewall(NetworkFunction):
    kind = "firewall"
    Params = FirewallParams
    params: FirewallParams
    #: the nftables backend's ``inet`` table filters both; the iptables backend only IPv4
    #: (its IPv6 rules are refused, and IPv6 packets pass it unfiltered)
    families = (4, 6)

    def _tool(self, what: str) -> str:
        return f"iptables-{self.params.iptables}-{what}"

    def programs(self) -> list[str]:
        return ["nft"] if self.params.backend == "nftables" else \
            [self._tool("restore"), self._tool("save")]

    def ruleset(self) -> str:
        p = self.params
        if p.backend == "nftables":
            return R.nft_ruleset(p.rules, p.generate, use_set=p.set, policy=p.policy,
                                 hooks=p.hooks)
        return R.iptables_ruleset(p.rules, p.generate, policy=p.policy, hooks=p.hooks)

    def configure(self) -> None:
        p = self.params
        if p.generate and p.generate.type == "stateful":
            self.ctx.write_sysctl("net.netfilter.nf_conntrack_acct", "1")
        text = self.ruleset()
        t0 = time.perf_counter()
        if p.backend == "nftables":
            self.ctx.run(["nft", "-f", "-"], input=text, timeout=300)
        else:
            self.ctx.run([self._tool("restore")], input=text, timeout=300)
        self.install_seconds = time.perf_counter() - t0

    def counters(self) -> dict[str, Any]:
        p = self.params
        if p.backend == "nftables":
            cp = self.ctx.run(["nft", "-j", "list", "table", "inet", R.NFT_TABLE], check=False)
            if cp.returncode != 0:
                return {}
            return R.nft_counters(cp.stdout)
        cp = self.ctx.run([self._tool("save"), "-c", "-t", "filter"])
        return R.iptables_counters(cp.stdout, p.hooks)

    def inspect(self) -> dict[str, Any]:
        p = self.params
        counters = self.counters()
        for chain in counters.values():
            chain["rules"] = [dict(counters_of, rule=p.rules[i].model_dump(mode="json",
                                                                          exclude_none=True))
                              for i, counters_of in sorted(chain["rules"].items())]
        return {"backend": p.backend if p.backend == "nftables" else f"iptables-{p.iptables}",
                "policy": p.policy,
                "generated": p.generate.model_dump() if p.generate else None,
                "set": p.set, "hooks": counters}
