"""A lab's plan split per host (pure): what each host makes of the lab.

A host's *part* is a :class:`~sfclab.plan.model.Plan` of the same lab holding only what lives
on that host: the namespaces of the nodes placed there and their interfaces, the veths whose
two ends are both there, their routes, functions, containers and tenant tables, the host itself (its
context), and the host-context ends of every hosted link that has an end there (a tunnel's two
ends are on two hosts: each part has its own end, VNI, local and remote addresses).  The
underlay is kept only for its facts (VXLAN port, MTU): a part never builds it, since a real
host's underlay is its own network.

A host reached over SSH gets its part as JSON (``Plan.to_dict``) and builds it with the same
builder as a local lab (:mod:`sfclab.realize.agent`).  Every object of the lab is in exactly
one part; :func:`check_partition` says so (unit tested), so a lab split over hosts makes the
same objects as the lab built in one place.

A lab's service chains (``plan.steering``) go whole into every part: each host makes its share
of the data plane from it (the programs of its nodes, its own maps, the entries of its nodes;
:mod:`sfclab.plan.sfc_hosts`).
"""

from __future__ import annotations

import copy

from .model import HostLinkPlan, Plan


class SplitError(ValueError):
    """A plan that cannot be split per host (an object that is on no host, or on two)."""


def host_part(plan: Plan, host: str) -> Plan:
    """The part of ``plan`` that host ``host`` makes (a new plan; ``plan`` is not changed)."""
    hp = next((h for h in plan.hosts if h.name == host), None)
    if hp is None:
        raise SplitError(f"plan of lab {plan.lab} has no host {host!r}")
    nodes = set(hp.nodes)
    spaces = {ns.name for ns in plan.namespaces if ns.node in nodes}
    for i in plan.interfaces:
        if i.netns is None:
            raise SplitError(f"interface {i.name} of node {i.node} is in this machine's root "
                             "namespace, which belongs to no host")
    links = []
    for hl in plan.host_links:
        here = [e for e in hl.ends if e.host == host]
        if here:
            links.append(HostLinkPlan(hl.link, hl.attach, hl.mtu, copy.deepcopy(here), hl.vni,
                                      hl.rate, hl.space))
    out = Plan(
        lab=plan.lab, tag=plan.tag, ip=plan.ip,
        namespaces=[copy.deepcopy(n) for n in plan.namespaces if n.name in spaces],
        interfaces=[copy.deepcopy(i) for i in plan.interfaces if i.netns in spaces],
        veths=[copy.deepcopy(v) for v in plan.veths
               if v.a.netns in spaces and v.b.netns in spaces],
        ovs_bridges=[],
        linux_bridges=[copy.deepcopy(b) for b in plan.linux_bridges if b.netns in spaces],
        routes=[copy.deepcopy(r) for r in plan.routes if r.netns in spaces],
        segments=copy.deepcopy(plan.segments),
        functions={n: copy.deepcopy(f) for n, f in plan.functions.items() if n in nodes},
        steering=None,
        hosts=[copy.deepcopy(hp)],
        underlay=copy.deepcopy(plan.underlay),
        host_links=links,
        tenants=copy.deepcopy(plan.tenants),
        tenancy=[copy.deepcopy(t) for t in plan.tenancy if t.netns in spaces],
        containers=[copy.deepcopy(c) for c in plan.containers if c.node in nodes],
    )
    for v in plan.veths:
        if (v.a.netns in spaces) != (v.b.netns in spaces):
            raise SplitError(f"veth of link {v.link} joins {v.a.netns} and {v.b.netns}, on two "
                             "hosts: a link between hosts must be hosted (a tunnel)")
    return out


def split(plan: Plan) -> dict[str, Plan]:
    """Every host's part, by host name, in host order."""
    if plan.ovs_bridges:
        raise SplitError("ovs-bridge nodes live in this machine's root namespace, on no host")
    parts = {h.name: host_part(plan, h.name) for h in plan.hosts}
    for part in parts.values():  # each host builds its share of it (sfclab.plan.sfc_hosts)
        part.steering = copy.deepcopy(plan.steering)
    return parts


def check_partition(plan: Plan, parts: dict[str, Plan]) -> None:
    """Raise :class:`SplitError` unless every namespace, interface, veth, route, container and
    hosted-link end of ``plan`` is in exactly one part."""
    def count(key: str, items: list[tuple[str, ...]]) -> None:
        got: dict[tuple[str, ...], int] = {}
        for p in parts.values():
            for x in _keys(p, key):
                got[x] = got.get(x, 0) + 1
        for x in items:
            if got.get(x, 0) != 1:
                raise SplitError(f"{key} {'/'.join(map(str, x))} is in {got.get(x, 0)} parts")
    for key in ("namespaces", "interfaces", "veths", "routes", "containers", "ends"):
        count(key, _keys(plan, key))


def _keys(p: Plan, key: str) -> list[tuple[str, ...]]:
    if key == "namespaces":
        return [(n.name,) for n in p.namespaces]
    if key == "interfaces":
        return [(str(i.netns), i.name) for i in p.interfaces]
    if key == "veths":
        return [(str(v.a.netns), v.a.name, str(v.b.netns), v.b.name) for v in p.veths]
    if key == "routes":
        return [(r.netns, r.dst, r.gateway, str(r.table)) for r in p.routes]
    if key == "containers":
        return [(c.name,) for c in p.containers]
    return [(str(hl.link), e.host, e.node) for hl in p.host_links for e in hl.ends]
