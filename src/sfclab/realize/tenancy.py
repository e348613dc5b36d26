"""Tenants in shared nodes, as a part of the build: tables, rules, zones and marks.

A node shared by tenants (:class:`~sfclab.plan.model.TenancyPlan`) gets, at ``prepare``:

- the plan's routes of each tenant's table (its connected routes included);
- rules: a packet arriving on a tenant's interface is routed by that tenant's table, and so is
  any packet whose connection carries the tenant's mark (replies coming back from the public
  side after NAT, and the node's own answers); in a lab with IPv6 the same rules for IPv6;
- ``table inet sfclab_tenancy`` (``ip`` in a lab of ``ip: 4``, as always): each tenant's
  incoming interfaces put new connections in the tenant's conntrack zone (original direction only, so replies from the public side still find
  them; identical tenant flows never merge) and mark them with the tenant's number; every
  packet then carries its connection's tenant in the mark's tenant field.

The tenancy writes only the mark's tenant bits (:mod:`sfclab.plan.marks`): the SFC proxy keeps
a parked label stack's id in the other bits of the same mark, through this very node.  nftables
cannot OR one register into another here, so the restore is one masked rule per tenant.

The node's function (a NAT, a router) runs unchanged on top.  All of it lives in the node's
namespace and goes with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..kernel import netns
from ..plan import marks
from ..plan.model import Plan, TenancyPlan
from .part import Part
from .step import step

if TYPE_CHECKING:
    from .build import Builder
    from .state import LabState

NFT_TABLE = "sfclab_tenancy"
RULE_PRIORITY = 1000


def ruleset(tp: TenancyPlan, family: str = "ip") -> str:
    """The tenancy's nft table, of nft family ``family`` (``ip``; ``inet`` with IPv6)."""
    keep, field = f"{marks.PROXY_MASK:#010x}", f"{marks.TENANT_MASK:#05x}"
    zone, mark, restore = [], [], []
    for t in tp.tenants.values():
        ifs = ", ".join(f'"{i}"' for i in t["ifaces"])
        if not ifs:
            continue
        zone.append(f"    iifname {{ {ifs} }} ct original zone set {t['id']}")
        mark.append(f"    ct state new iifname {{ {ifs} }} "
                    f"ct mark set ct mark and {keep} or {t['id']}")
        restore.append(f"    ct mark and {field} == {t['id']} "
                       f"meta mark set meta mark and {keep} or {t['id']}")
    return "\n".join([
        f"table {family} {NFT_TABLE}", f"delete table {family} {NFT_TABLE}",
        f"table {family} {NFT_TABLE} {{",
        "  chain zones {", "    type filter hook prerouting priority raw;", *zone, "  }",
        "  chain tag {", "    type filter hook prerouting priority mangle;", *mark,
        *restore, "  }",
        "  chain own {", "    type route hook output priority mangle;",
        *restore, "  }", "}"]) + "\n"


class Tenancy(Part):
    name = "tenancy"

    def prepare(self, b: Builder) -> None:
        for tp in b.plan.tenancy:
            with step(f"tenant tables of {tp.node} in {tp.netns}"):
                self._realize(b, tp)

    @staticmethod
    def _realize(b: Builder, tp: TenancyPlan) -> None:
        ipr = b.iproute(tp.netns)
        index = {m.get_attr("IFLA_IFNAME"): m["index"] for m in ipr.get_links()}
        for r in b.plan.routes:
            if r.node != tp.node or r.table is None:
                continue
            kw: dict[str, Any] = {"dst": r.dst, "table": r.table, "oif": index[r.dev],
                                  "family": 10 if ":" in r.dst else 2}
            if r.gateway:
                kw["gateway"] = r.gateway
            else:
                kw["scope"] = 253  # link: a connected route
            ipr.route("add", **kw)
        six = 6 in b.plan.families
        for family in (2, 10) if six else (2,):
            prio = RULE_PRIORITY
            for t in tp.tenants.values():
                for ifname in t["ifaces"]:
                    ipr.rule("add", family=family, iifname=ifname, table=t["id"], priority=prio)
                    prio += 1
                ipr.rule("add", family=family, fwmark=t["id"], fwmask=marks.TENANT_MASK,
                         table=t["id"], priority=prio)
                prio += 1
        netns.run(tp.netns, ["nft", "-f", "-"], input=ruleset(tp, "inet" if six else "ip"))

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        for tp in plan.tenancy:
            if tp.node in nodes:
                nodes[tp.node]["tenant_tables"] = {t: v["id"] for t, v in tp.tenants.items()}


TENANCY = Tenancy()
