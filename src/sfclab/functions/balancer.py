"""``balancer``: a load balancer in nftables, the kernel twin of ``bpf-balancer`` (this kernel
has no IPVS: ``CONFIG_IP_VS`` is off).

Lab file keys: those of :mod:`.balancer_params` (``vip``, ``proto``, ``ports``, ``backends``,
``sticky``), an IPv4 or IPv6 ``vip`` with backends of its family (one family per balancer: the
VIP's, which the lab's ``ip:`` must carry).  In ``table ip sfclab_lb`` (``table
ip6 sfclab_lb`` for an IPv6 VIP) of the node's namespace:

- ``prerouting`` (nat): the first packet of a connection to the VIP (its protocol and ports)
  is DNATed to ``jhash(...) mod W`` looked up in a map where each backend appears ``weight``
  times (W the sum of the weights); the hash is of the 5-tuple, or of the source address for
  ``sticky: source``.  Conntrack keeps every later packet of the connection on its backend and
  gives replies the VIP back as their source.
- ``forward`` (filter): one counting rule per backend (packets of connections to the VIP going
  to that backend) and one for the replies, read by ``inspect``.

Unlike the eBPF twin's Maglev table, ``mod W`` moves most flows when a backend is added or
removed; conntrack keeps established connections where they are.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import SpecError
from .balancer_params import BalancerParams, vip_family_problem
from .base import NetworkFunction, register

TABLE = "sfclab_lb"
#: the jhash seed (any constant: the same lab gives the same choices)
SEED = 0x5FC1


@register
class Balancer(NetworkFunction):
    kind = "balancer"
    Params = BalancerParams
    params: BalancerParams
    families = (4, 6)

    @property
    def nft_family(self) -> str:
        """The nftables family of its table: ``ip`` for an IPv4 VIP, ``ip6`` for IPv6."""
        return "ip" if self.params.vip.version == 4 else "ip6"

    def check(self) -> None:
        problem = vip_family_problem(self.params.vip, self.ctx.families)
        if problem:
            raise SpecError(problem, place="vip")

    def programs(self) -> list[str]:
        return ["nft"]

    def ruleset(self) -> str:
        p = self.params
        proto = "meta l4proto { tcp, udp }" if p.proto == "any" else f"meta l4proto {p.proto}"
        lo, hi = p.ports
        ports = f"th dport {lo}" if lo == hi else f"th dport {lo}-{hi}"
        fam = self.nft_family
        of = f"{fam} saddr" if p.sticky == "source" else \
            f"{fam} saddr . {fam} daddr . meta l4proto . th sport . th dport"
        entries = [str(b.address) for b in p.backends for _ in range(b.weight)]
        mapping = ", ".join(f"{i} : {a}" for i, a in enumerate(entries))
        lines = [f"table {fam} {TABLE}", f"delete table {fam} {TABLE}", f"table {fam} {TABLE} {{",
                 "  chain prerouting {", "    type nat hook prerouting priority dstnat;",
                 f"    {fam} daddr {p.vip} {proto} {ports} dnat to jhash {of} mod {len(entries)} "
                 f'seed {SEED:#x} map {{ {mapping} }} comment "sfclab balance"',
                 "  }", "  chain forward {", "    type filter hook forward priority filter;"]
        for i, b in enumerate(p.backends):
            lines.append(f"    ct original {fam} daddr {p.vip} ct direction original "
                         f'{fam} daddr {b.address} counter comment "sfclab backend {i}"')
        lines += [f"    ct original {fam} daddr {p.vip} ct direction reply counter "
                  'comment "sfclab replies"', "  }", "}"]
        return "\n".join(lines) + "\n"

    def configure(self) -> None:
        self.ctx.run(["nft", "-f", "-"], input=self.ruleset())

    def counters(self) -> dict[str, dict[str, int]]:
        cp = self.ctx.run(["nft", "-j", "list", "table", self.nft_family, TABLE], check=False)
        out: dict[str, dict[str, int]] = {}
        if cp.returncode == 0:
            for item in json.loads(cp.stdout).get("nftables", []):
                rule = item.get("rule")
                if not rule or not rule.get("comment", "").startswith("sfclab "):
                    continue
                c = next((e["counter"] for e in rule["expr"] if "counter" in e), None)
                if c:
                    out[rule["comment"][len("sfclab "):]] = {"packets": c["packets"],
                                                             "bytes": c["bytes"]}
        return out

    def inspect(self) -> dict[str, Any]:
        p = self.params
        c = self.counters()
        total = sum(b.weight for b in p.backends)
        backends = [dict(c.get(f"backend {i}", {}), address=str(b.address), weight=b.weight,
                         up=True, slots=b.weight) for i, b in enumerate(p.backends)]
        return {"program": f"nftables (table {self.nft_family} {TABLE}: jhash mod {total})",
                "vip": str(p.vip), "proto": p.proto, "ports": f"{p.ports[0]}-{p.ports[1]}",
                "sticky": p.sticky, "table": total, "backends": backends,
                "replies": c.get("replies")}
