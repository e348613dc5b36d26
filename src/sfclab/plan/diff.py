"""The difference between two plans of one lab, as a plan of its own (pure).

A change to a running lab is the difference between the lab's plan before it and after it.
:func:`removed` is what ``before`` has and ``after`` lacks -- what ``chain rm``, the end of a
migration and ``host rm`` take out -- as a :class:`~sfclab.plan.model.Plan` holding only those
objects, which the parts of the build engine remove as ``down`` removes a lab's
(:func:`sfclab.realize.change.remove`).  Objects are matched by their identity in the kernel:

=============  ===============================================
namespaces     name
interfaces     namespace and name
veths          both ends' namespaces and names
routes         namespace, destination and table
functions      node
containers     name
hosts          name
hosted links   link number, VNI and each end's host, node and
               interface (an added instance's tunnel: link -1)
=============  ===============================================

The steering plan and the underlay are no objects of a change here: the data plane's entries
are written and cleared by the live operations.  :func:`within` keeps the part of a change on
some nodes (a host's share, for its agent): of a hosted link, the ends at those nodes.
"""

from __future__ import annotations

from dataclasses import replace

from .model import HostLinkPlan, InterfacePlan, Plan, RoutePlan, VethPlan


def _iface(i: InterfacePlan) -> tuple[str | None, str]:
    return (i.netns, i.name)


def _veth(v: VethPlan) -> tuple[tuple[str | None, str], tuple[str | None, str]]:
    return (_iface(v.a), _iface(v.b))


def _route(r: RoutePlan) -> tuple[str, str, int | None]:
    return (r.netns, r.dst, r.table)


def _host_link(hl: HostLinkPlan) -> tuple[int, int | None, tuple[tuple[str, str, str], ...]]:
    return (hl.link, hl.vni, tuple((e.host, e.node, e.node_if) for e in hl.ends))


def removed(before: Plan, after: Plan) -> Plan:
    """The objects of ``before`` that ``after`` lacks, as a plan of lab ``before.lab``."""
    ns = {n.name for n in after.namespaces}
    ifs = {_iface(i) for i in after.interfaces}
    veths = {_veth(v) for v in after.veths}
    routes = {_route(r) for r in after.routes}
    cts = {c.name for c in after.containers}
    hosts = {h.name for h in after.hosts}
    links = {_host_link(hl) for hl in after.host_links}
    return Plan(before.lab, before.tag, ip=before.ip,
                namespaces=[n for n in before.namespaces if n.name not in ns],
                interfaces=[i for i in before.interfaces if _iface(i) not in ifs],
                veths=[v for v in before.veths if _veth(v) not in veths],
                routes=[r for r in before.routes if _route(r) not in routes],
                functions={n: f for n, f in before.functions.items()
                           if n not in after.functions},
                containers=[c for c in before.containers if c.name not in cts],
                hosts=[h for h in before.hosts if h.name not in hosts],
                host_links=[hl for hl in before.host_links if _host_link(hl) not in links])


def within(change: Plan, nodes: set[str]) -> Plan:
    """The part of ``change`` (from :func:`removed`) on ``nodes``: their namespaces,
    interfaces, routes, functions and containers, the veths with an end on one of them, and
    the ends at them of hosted links."""
    return Plan(change.lab, change.tag, ip=change.ip,
                namespaces=[n for n in change.namespaces if n.node in nodes],
                interfaces=[i for i in change.interfaces if i.node in nodes],
                veths=[v for v in change.veths if v.a.node in nodes or v.b.node in nodes],
                routes=[r for r in change.routes if r.node in nodes],
                functions={n: f for n, f in change.functions.items() if n in nodes},
                containers=[c for c in change.containers if c.node in nodes],
                hosts=list(change.hosts),
                host_links=[replace(hl, ends=[e for e in hl.ends if e.node in nodes])
                            for hl in change.host_links if any(e.node in nodes for e in hl.ends)])
