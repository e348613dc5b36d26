"""Firewall rule lists as text for one-batch loading: ``nft -f -`` or ``iptables-restore``.

A rule list is, in order: the *generated* rules (``generate: {count, type}``: the worst case of
the paper, rules that never match so every packet walks the whole list), then the user's
``rules`` in the order given, then a counter for packets that reach the chain's policy.

- stateless generated rule ``i``: source address ``240.0.0.0 + i`` (reserved, never used) → drop;
  with ``set: true`` (nftables only) one rule and a set holding the same N addresses.
- stateful generated rule ``i``: the flow's original-direction byte count from conntrack
  ``≥ 2^60 + i`` → drop (needs conntrack accounting, switched on by the firewall in its namespace).

A rule's ``src`` and ``dst`` are IPv4 or IPv6 prefixes (one family per rule): in the nftables
``inet`` table one rule set covers both families; an IPv4 prefix matches only IPv4 packets
(``ip saddr``), an IPv6 one only IPv6 packets (``ip6 saddr``), a rule without either both.
``proto: icmp`` is ICMP for IPv4, ``icmpv6`` ICMP for IPv6.  iptables filters IPv4 only: its
backend refuses IPv6 prefixes and ``icmpv6`` (:func:`refuse_ipv6`).  The ``bpf-firewall`` holds
the same rules in its maps, of both families, with the same meaning.

User rules carry the comment ``sfclab rule <index>`` and the policy counter ``sfclab policy``;
:func:`nft_counters` and :func:`iptables_counters` read the counters back by those names.
"""

from __future__ import annotations

import json
import re
from ipaddress import IPv4Address
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .params import Ports, Prefix46

NFT_TABLE = "sfclab_fw"
GEN_BASE = int(IPv4Address("240.0.0.0"))
STATEFUL_BASE = 1 << 60


class Rule(BaseModel):
    """``{action, proto, src, dst, sport, dport}``; ports need ``proto: tcp`` or ``udp``."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["drop", "accept"]
    proto: Literal["tcp", "udp", "icmp", "icmpv6", "any"] = "any"
    src: Prefix46 | None = None
    dst: Prefix46 | None = None
    sport: Ports | None = None
    dport: Ports | None = None

    @model_validator(mode="after")
    def _ports_need_proto(self) -> "Rule":
        if (self.sport or self.dport) and self.proto not in ("tcp", "udp"):
            raise ValueError("sport/dport need proto: tcp or udp")
        if self.src is not None and self.dst is not None \
                and self.src.version != self.dst.version:
            raise ValueError(f"src and dst of one family (src is IPv{self.src.version}, dst "
                             f"IPv{self.dst.version})")
        fam = self.family
        if fam is not None and self.proto in ("icmp", "icmpv6") \
                and (self.proto == "icmpv6") != (fam == 6):
            raise ValueError(f"proto {self.proto} with IPv{fam} prefixes: expected "
                             f"{'icmpv6' if fam == 6 else 'icmp'}")
        return self

    @property
    def family(self) -> int | None:
        """The family its prefixes are of (4 or 6), None if it has none."""
        p = self.src or self.dst
        return None if p is None else p.version

    def ipv4_only_problem(self) -> str | None:
        """Why an IPv4-only backend cannot load this rule, or None."""
        if self.family == 6 or self.proto == "icmpv6":
            return "an IPv6 rule (IPv6 prefixes or proto icmpv6)"
        return None


def refuse_ipv6(rules: list[Rule], who: str) -> list[Rule]:
    """``rules`` unchanged, or a ValueError naming the first IPv6 rule ``who`` cannot load."""
    for i, r in enumerate(rules):
        problem = r.ipv4_only_problem()
        if problem:
            raise ValueError(f"rule {i} is {problem}; {who} filters IPv4 only (kind firewall "
                             "with backend nftables filters both)")
    return rules


class Generate(BaseModel):
    """``{count: N, type: stateless | stateful}``."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=0, le=1_000_000)
    type: Literal["stateless", "stateful"] = "stateless"


Hook = Literal["forward", "input"]


def generated_address(i: int) -> str:
    return str(IPv4Address(GEN_BASE + i))


# ---------------------------------------------------------------- nftables

def _nft_rule(r: Rule) -> str:
    parts = []
    if r.proto != "any":
        parts.append(f"meta l4proto {r.proto}")
    ip = "ip6" if r.family == 6 else "ip"
    if r.src:
        parts.append(f"{ip} saddr {r.src}")
    if r.dst:
        parts.append(f"{ip} daddr {r.dst}")
    for key, ports in (("sport", r.sport), ("dport", r.dport)):
        if ports:
            lo, hi = ports
            parts.append(f"{r.proto} {key} {lo}" if lo == hi else f"{r.proto} {key} {lo}-{hi}")
    parts.append("counter")
    parts.append(r.action)
    return " ".join(parts)


def nft_ruleset(rules: list[Rule], generate: Generate | None, *, use_set: bool,
                policy: str, hooks: Sequence[str]) -> str:
    """The whole ``table inet sfclab_fw`` as one ``nft -f`` script (replacing any previous)."""
    out = [f"table inet {NFT_TABLE}", f"delete table inet {NFT_TABLE}",
           f"table inet {NFT_TABLE} {{"]
    n = generate.count if generate else 0
    stateful = generate is not None and generate.type == "stateful"
    if use_set:
        elems = ", ".join(generated_address(i) for i in range(n))
        out.append("  set generated { type ipv4_addr;"
                   + (f" elements = {{ {elems} }};" if n else "") + " }")
    body: list[str] = []
    if use_set:
        body.append("    ip saddr @generated counter drop")
    elif stateful:
        body.extend(f"    ct original bytes >= {STATEFUL_BASE + i} counter drop" for i in range(n))
    else:
        body.extend(f"    ip saddr {generated_address(i)} counter drop" for i in range(n))
    for idx, r in enumerate(rules):
        body.append(f'    {_nft_rule(r)} comment "sfclab rule {idx}"')
    body.append('    counter comment "sfclab policy"')
    for hook in hooks:
        out.append(f"  chain {hook} {{")
        out.append(f"    type filter hook {hook} priority filter; policy {policy};")
        out.extend(body)
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def nft_counters(listing: str) -> dict[str, Any]:
    """Counters from ``nft -j list table inet sfclab_fw``: per hook, the user rules (by index),
    the generated rules (summed) and the policy counter."""
    data = json.loads(listing)
    out: dict[str, Any] = {}
    for item in data.get("nftables", []):
        rule = item.get("rule")
        if not rule:
            continue
        chain = out.setdefault(rule["chain"], {"rules": {}, "generated": {"rules": 0,
                                                                          "packets": 0,
                                                                          "bytes": 0},
                                               "policy": {"packets": 0, "bytes": 0}})
        counter = next((e["counter"] for e in rule.get("expr", []) if "counter" in e), None)
        if counter is None:
            continue
        c = {"packets": counter["packets"], "bytes": counter["bytes"]}
        comment = rule.get("comment", "")
        m = re.fullmatch(r"sfclab rule (\d+)", comment)
        if m:
            chain["rules"][int(m.group(1))] = c
        elif comment == "sfclab policy":
            chain["policy"] = c
        else:
            g = chain["generated"]
            g["rules"] += 1
            g["packets"] += c["packets"]
            g["bytes"] += c["bytes"]
    return out


# ---------------------------------------------------------------- iptables

def _ipt_rule(r: Rule, chain: str, idx: int) -> str:
    parts = [f"-A {chain}"]
    if r.proto != "any":
        parts.append(f"-p {r.proto}")
    if r.src:
        parts.append(f"-s {r.src}")
    if r.dst:
        parts.append(f"-d {r.dst}")
    if r.sport or r.dport:
        parts.append(f"-m {r.proto}")
    for key, ports in (("sport", r.sport), ("dport", r.dport)):
        if ports:
            lo, hi = ports
            parts.append(f"--{key} {lo}" if lo == hi else f"--{key} {lo}:{hi}")
    parts.append(f'-m comment --comment "sfclab rule {idx}"')
    parts.append(f"-j {r.action.upper()}")
    return " ".join(parts)


def iptables_ruleset(rules: list[Rule], generate: Generate | None, *, policy: str,
                     hooks: Sequence[str]) -> str:
    """The filter table as one ``iptables-restore`` input (flushing what was there)."""
    pol = {h: "ACCEPT" for h in ("INPUT", "FORWARD", "OUTPUT")}
    for h in hooks:
        pol[h.upper()] = policy.upper()
    out = ["*filter"] + [f":{c} {p} [0:0]" for c, p in pol.items()]
    n = generate.count if generate else 0
    for hook in hooks:
        chain = hook.upper()
        if generate and generate.type == "stateful":
            out.extend(f"-A {chain} -m connbytes --connbytes {STATEFUL_BASE + i}: "
                       "--connbytes-dir original --connbytes-mode bytes -j DROP"
                       for i in range(n))
        else:
            out.extend(f"-A {chain} -s {generated_address(i)}/32 -j DROP" for i in range(n))
        out.extend(_ipt_rule(r, chain, idx) for idx, r in enumerate(rules))
    out.append("COMMIT")
    return "\n".join(out) + "\n"


_SAVE_LINE = re.compile(r"^\[(\d+):(\d+)\] -A (\S+) (.*)$")
_SAVE_CHAIN = re.compile(r"^:(\S+) (\S+) \[(\d+):(\d+)\]$")


def iptables_counters(save: str, hooks: Sequence[str]) -> dict[str, Any]:
    """Counters from ``iptables-save -c -t filter``, shaped like :func:`nft_counters`."""
    chains = {h.upper(): h for h in hooks}
    out: dict[str, Any] = {h: {"rules": {}, "generated": {"rules": 0, "packets": 0, "bytes": 0},
                               "policy": {"packets": 0, "bytes": 0}} for h in hooks}
    for line in save.splitlines():
        m = _SAVE_CHAIN.match(line)
        if m and m.group(1) in chains:
            out[chains[m.group(1)]]["policy"] = {"packets": int(m.group(3)),
                                                 "bytes": int(m.group(4))}
            continue
        m = _SAVE_LINE.match(line)
        if not m or m.group(3) not in chains:
            continue
        chain = out[chains[m.group(3)]]
        c = {"packets": int(m.group(1)), "bytes": int(m.group(2))}
        rm = re.search(r'--comment "?sfclab rule (\d+)"?', m.group(4))
        if rm:
            chain["rules"][int(rm.group(1))] = c
        else:
            g = chain["generated"]
            g["rules"] += 1
            g["packets"] += c["packets"]
            g["bytes"] += c["bytes"]
    return out
