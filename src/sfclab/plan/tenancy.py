"""Tenants in the plan (pure): address spaces, routes and shared nodes' tables.

Each link belongs to one address space (a tenant, or the public space; see
:mod:`sfclab.spec.hosts`), and so does each segment.  Addresses: the public space is assigned
from the pool first, then every tenant from the same pool avoiding only the public subnets, so
tenants may have identical plans.  Routes: the public space is routed on its own; each tenant
on its segments plus the public ones, and only the tenant's nodes keep those routes.

A node shared by tenants has one interface per tenant link and cannot tell identical tenant
addresses apart by destination alone, so each tenant gets a routing table of its own in it
(``TABLE_BASE`` + the tenant's index): the tenant's routes and a connected route for each of
the node's tenant and public interfaces.  :class:`~sfclab.plan.model.TenancyPlan` says which
interfaces select which table; the realization adds the rules (incoming interface, and the
connection's mark for replies) and the conntrack zones.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from ..spec.hosts import spaces
from . import addressing, marks, routing
from .model import Plan, TenancyPlan

if TYPE_CHECKING:
    from ..spec.lab import Lab
    from ..spec.segments import Segment

TABLE_BASE = 100

#: (node, destination, gateway or None for a connected route, device, table or None for main)
RouteRow = tuple[str, IPv4Network | IPv6Network, IPv4Address | IPv6Address | None, str,
                 int | None]


def table_of(lab: Lab, tenant: str) -> int:
    return TABLE_BASE + lab.tenants.index(tenant)


def segment_space(lab: Lab, seg: Segment) -> str | None:
    for li, _j in seg.attachments:
        return lab.link_spaces[li] if lab.link_spaces else None
    return None


def _check_room(lab: Lab) -> None:
    """A tenant's table number is also its value in the packet mark's tenant field
    (:mod:`sfclab.plan.marks`): no more tenants than that field holds."""
    most = marks.TENANT_MASK - TABLE_BASE + 1
    if len(lab.tenants) > most:
        msg = f"{len(lab.tenants)} tenants; at most {most} (the packet mark's tenant field)"
        raise lab.doc.error(msg, ("tenants",)) if lab.doc is not None \
            else SpecError(msg, file=lab.source, place="tenants")


def assign(lab: Lab, segs: list[Segment], family: int = 4
           ) -> tuple[dict[int, Any], dict[tuple[int, int], Any]]:
    """Subnets and addresses of ``family``, space by space (one space when the lab has no
    tenants)."""
    _check_room(lab)
    subnets: dict[int, Any] = {}
    addrs: dict[tuple[int, int], Any] = {}
    groups: list[str | None] = [None, *lab.tenants]
    avoid: tuple[Any, ...] = ()
    for space in groups:
        mine = [s for s in segs if segment_space(lab, s) == space]
        sn, ad = addressing.assign(lab.addressing, lab.links, mine, lab.source, avoid, family)
        subnets.update(sn)
        addrs.update(ad)
        if space is None:
            avoid = tuple(v for v in sn.values() if v is not None)
    return subnets, addrs


def routes(lab: Lab, segs: list[Segment], nets: dict[int, Any],
           attachments: list[routing.Attachment]) -> list[RouteRow]:
    order = list(lab.nodes)
    forwards = {n: s.forwards for n, s in lab.nodes.items()}
    if not lab.tenants:
        return [(r.node, r.dst, r.gateway, r.dev, None)
                for r in routing.compute(order, forwards, nets, attachments)]
    space = {s.index: segment_space(lab, s) for s in segs}
    out: list[RouteRow] = []

    def within(allowed: set[str | None]) -> tuple[dict[int, Any],
                                                  list[routing.Attachment]]:
        return ({k: v for k, v in nets.items() if space[k] in allowed},
                [a for a in attachments if space[a.segment] in allowed])

    n, att = within({None})
    for r in routing.compute(order, forwards, n, att):
        if None in spaces(lab.nodes[r.node].tenants):
            out.append((r.node, r.dst, r.gateway, r.dev, None))
    for t in lab.tenants:
        n, att = within({t, None})
        table = table_of(lab, t)
        shared = {name for name, s in lab.nodes.items() if t in s.tenants and len(s.tenants) > 1}
        for r in routing.compute(order, forwards, n, att):
            if t in lab.nodes[r.node].tenants:
                out.append((r.node, r.dst, r.gateway, r.dev,
                            table if r.node in shared else None))
        for a in att:
            if a.node in shared:
                out.append((a.node, n[a.segment], None, a.ifname, table))
    out += _public_returns(lab, order, forwards, nets, attachments, space)
    return out


def _public_returns(lab: Lab, order: list[str], forwards: dict[str, bool],
                    nets: dict[int, Any], attachments: list[routing.Attachment],
                    space: dict[int, str | None]) -> list[RouteRow]:
    """Routes of public-only *forwarding* nodes back to tenants' subnets: a public chain
    between shared nodes (e.g. DPI -> firewall -> shaper -> router) must carry replies back
    toward the shared node its tenants came through.  Public hosts (endpoints) still get no
    route into any tenant.  Only where every tenant with that subnet is reached the
    same way from the node (identical address plans behind different shared nodes are
    ambiguous: no route, as before)."""
    tenant_nets = {v for k, v in nets.items() if space[k] is not None}
    seen: dict[tuple[str, Any], set[tuple[Any, str]]] = {}
    for t in lab.tenants:
        n = {k: v for k, v in nets.items() if space[k] in (t, None)}
        att = [a for a in attachments if space[a.segment] in (t, None)]
        for r in routing.compute(order, forwards, n, att):
            if (lab.nodes[r.node].tenants or not forwards[r.node]
                    or r.dst not in tenant_nets):
                continue
            seen.setdefault((r.node, r.dst), set()).add((r.gateway, r.dev))
    return [(node, dst, gw, dev, None) for (node, dst), ways in seen.items()
            if len(ways) == 1 for gw, dev in ways]


def plan_tenants(lab: Lab, plan: Plan, segs: list[Segment], nets: dict[int, Any]) -> None:
    """The plan's tenants (their nodes) and shared nodes' tenancy."""
    for t in lab.tenants:
        plan.tenants[t] = [n for n, s in lab.nodes.items() if t in s.tenants]
    for name, s in lab.nodes.items():
        if len(s.tenants) < 2 or not s.has_namespace:
            continue
        tp = TenancyPlan(name, plan.netns_of(name))
        for t in s.tenants:
            ifaces = [i.name for i in plan.interfaces_of(name)
                      if lab.link_spaces[i.link] == t]
            tp.tenants[t] = {"id": table_of(lab, t), "ifaces": ifaces}
        plan.tenancy.append(tp)
