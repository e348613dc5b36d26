"""A chain added to a running lab, planned against the lab's saved plan (pure).

**Wiring.**  Every instance of the chain's functions is a namespace of its own joined by one
veth pair (across hosts: a tunnel, :mod:`.tunnels`) to the chain's *attach* node, a forwarding node of the lab (the chain file's
``attach``, else the router nearest the first classifier's ingress, else the nearest
forwarding node).  The function is one-armed: labelled frames come in from the attach node on
``eth0``, the proxy takes the stack off, the function forwards the plain packet back out of
``eth0`` by its default route (via the attach node) and the proxy puts the stack back.  The
link gets a /30 of its own from the top of 198.18.0.0/15 downward, clear of the lab's
segments; only the attach node knows it (functions added this way are reached by labels, not by
routes: a NAT among them needs ``symmetric: true`` for its replies).  In a lab of ``ip: dual``
the link also gets a /64 of its own from the top of 2001:2::/48 downward (the attach node's end
``::1``, the instance's ``::2``) and the instance an IPv6 default route via the attach node, as
``up`` addresses and routes a node of the lab (:func:`wire6`).

**Labels and indices.**  Existing labels are reused where a hop is the same (node, action,
out interface); new ones are numbered after the highest in use, so no existing chain's label
changes.  The chain's directions take free indices of the chain table and a free range of the
path table (recorded as ``path_base``, see :mod:`.chainpaths`); path 4095 is never handed out (the
table's empty entry: a chain whose group has no instance left points its slots there, and the
classifier drops and counts what it matches).

:func:`plan_addition` returns an :class:`Addition` (what to make, in the data plane's terms);
:func:`apply` merges it into the plan, :func:`withdraw` takes it out again.  :func:`change_of`
is the part of a merged plan that added nodes bring: a plan of its own, which the build engine
of ``up`` makes on the running lab (:mod:`sfclab.realize.change`); :func:`drop_nodes` is its
converse.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Interface, IPv6Interface
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from .arrivals import XDP_FED, arrivals
from .chainpaths import (NO_PATH, Labels, Topology, build_direction, free_ifname,
                         free_path_base, free_subnets, free_subnets6, path_ranges)
from .containers import for_node
from .encap import encap_of
from .model import (ContainerPlan, FunctionPlan, InterfacePlan, NamespacePlan, Plan, RoutePlan,
                    VethPlan)
from .names import netns_name
from .tunnels import planned_link
from .sfc import (LABEL_ROOM, DirectionPlan, Hop, PathPlan, SteeringPlan, classifier_row,
                  reversed_classifier, stack_ifaces)

if TYPE_CHECKING:  # light start-up: the agents load no chain-file models
    from ..spec.chainfile import ChainFile

__all__ = ["NO_PATH", "Addition", "Instance", "NewNode", "apply", "change_of", "plan_addition",
           "withdraw",
           "drop_nodes"]

MAX_DIRECTIONS = 256
MAX_NODE_ID = 255
BASE_MTU = 1500


@dataclass
class NewNode:
    """A function instance made by ``chain add`` (or a clone made by ``migrate``)."""

    node: str
    netns: str
    kind: str
    params: dict[str, Any]
    function: str  # the chain file's function name (a group's instances share it)
    cpu: float
    memory: int
    host: str
    attach: str  # the forwarding node it hangs off
    attach_ifname: str  # its end there
    ifname: str  # its own end ("eth0")
    subnet: str
    address: str  # its own, "198.19.255.254/30"
    gateway: str  # the attach node's end
    vni: int | None = None  # on another host than ``attach``: its tunnel (:mod:`.tunnels`)
    mtu: int = 0  # the link's MTU (0: BASE_MTU + LABEL_ROOM)
    #: its container (a :class:`~sfclab.plan.model.ContainerPlan`, JSON form), when the chain
    #: file gives the function an ``image``
    container: dict[str, Any] | None = None
    #: in a lab of ``ip: dual``: the link's IPv6 subnet, its own address and the attach
    #: node's end (its IPv6 gateway); empty in an IPv4 lab
    subnet6: str = ""
    address6: str = ""
    gateway6: str = ""


def wire6(plan: Plan, nodes: list[NewNode]) -> None:
    """Give ``nodes`` their IPv6 links in a lab that carries IPv6: a free /64 each
    (:func:`~.chainpaths.free_subnets6`), ``::1`` for the attach node's end and ``::2`` for
    the instance's; nothing in an IPv4 lab."""
    if 6 not in plan.families:
        return
    for n, net in zip(nodes, free_subnets6(plan, len(nodes))):
        n.subnet6 = str(net)
        n.gateway6 = str(IPv6Interface((int(net.network_address) + 1, 64)))
        n.address6 = str(IPv6Interface((int(net.network_address) + 2, 64)))


@dataclass
class Addition:
    chain: str
    attach: str
    nodes: list[NewNode] = field(default_factory=list)
    node_ids: dict[str, int] = field(default_factory=dict)  # new ids only
    hops: list[Hop] = field(default_factory=list)  # new labels only
    directions: list[DirectionPlan] = field(default_factory=list)
    attach_progs: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # new only
    single_segment: list[tuple[str, str]] = field(default_factory=list)  # new only
    mtu: list[tuple[str, str, int]] = field(default_factory=list)  # existing interfaces
    offloads: list[tuple[str, str, dict[str, bool]]] = field(default_factory=list)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Addition:
        return cls(
            chain=d["chain"], attach=d["attach"], nodes=[NewNode(**n) for n in d["nodes"]],
            node_ids=dict(d["node_ids"]), hops=[Hop(**h) for h in d["hops"]],
            directions=[DirectionPlan(**{**x, "paths": [PathPlan(**p) for p in x["paths"]]})
                        for x in d["directions"]],
            attach_progs={k: [(a[0], a[1], a[2]) for a in v]
                          for k, v in d["attach_progs"].items()},
            single_segment=[(x[0], x[1]) for x in d["single_segment"]],
            mtu=[(x[0], x[1], x[2]) for x in d["mtu"]],
            offloads=[(x[0], x[1], dict(x[2])) for x in d["offloads"]],
            source=d.get("source", ""))


@dataclass
class Instance:
    """One instance to make: its node name, function, kind, validated keys and host."""

    node: str
    function: str
    kind: str
    params: dict[str, Any]
    cpu: float
    memory: int
    host: str = "local"
    #: its container, planned for no node yet (:func:`sfclab.plan.containers.for_node`)
    container: ContainerPlan | None = None


# --------------------------------------------------------------------------- the planner
def plan_addition(plan: Plan, sp: SteeringPlan | None, chain: ChainFile,
                  instances: list[Instance], source: str) -> Addition:
    """What adding ``chain`` (its function instances already named and placed) makes."""
    sp = sp or SteeringPlan()
    topo = Topology(plan)
    nodes = set(topo.adj)
    if any(d.chain == chain.name for d in sp.directions):
        raise SpecError(f"the lab already has a chain '{chain.name}'", file=source,
                        place="name")
    for i, c in enumerate(chain.classifiers):
        if c.ingress not in nodes or topo.kind.get(c.ingress) == "linux-bridge":
            raise SpecError(f"expected a host or function node of the lab, got {c.ingress!r}",
                            file=source, place=f"classifiers[{i}].ingress")
    if chain.egress not in nodes or topo.kind.get(chain.egress) == "linux-bridge":
        raise SpecError(f"expected a host or function node of the lab, got {chain.egress!r}",
                        file=source, place="egress")
    for inst in instances:
        if inst.node in nodes:
            k = [f.name for f in chain.functions].index(inst.function) \
                if inst.function in [f.name for f in chain.functions] else None
            raise SpecError(f"the lab already has a node '{inst.node}' (instances are named "
                            f"<function>-1, -2 ...: give the function another name)",
                            file=source, place="functions" if k is None else
                            f"functions[{k}].name")
    attach = chain.attach or topo.nearest_forwarder(chain.classifiers[0].ingress)
    if attach is None or attach not in nodes or not topo.forwards.get(attach):
        raise SpecError(f"expected a forwarding node of the lab to attach the functions to, "
                        f"got {attach!r}", file=source, place="attach")
    add = Addition(chain.name, attach, source=source)
    subnets = free_subnets(plan, len(instances))
    taken: set[str] = set()
    for inst, net in zip(instances, subnets):
        hosts = list(net.hosts())
        a_if = free_ifname(plan, attach, taken)
        taken.add(a_if)
        container = None if inst.container is None else \
            asdict(for_node(plan.lab, inst.node, inst.container))
        add.nodes.append(NewNode(inst.node, netns_name(plan.lab, inst.node), inst.kind,
                                 inst.params, inst.function, inst.cpu, inst.memory, inst.host,
                                 attach, a_if, "eth0", str(net), f"{hosts[1]}/30",
                                 f"{hosts[0]}/30", container=container))
        topo.link(attach, inst.node, a_if, "eth0", True, inst.kind)
    wire6(plan, add.nodes)
    _steer(plan, sp, topo, chain, add)
    return add


def _steer(plan: Plan, sp: SteeringPlan, topo: Topology, chain: ChainFile,
           add: Addition) -> None:
    labels = Labels(sp.hops)
    stages: list[list[str]] = []
    weights: list[list[int]] = []
    for f in chain.functions:
        names = [n.node for n in add.nodes if n.function == f.name]
        stages.append(names)
        weights.append(f.weights())
    free_idx = [i for i in range(MAX_DIRECTIONS) if i not in {d.index for d in sp.directions}]
    ranges = path_ranges(sp)
    ingresses = list(dict.fromkeys(c.ingress for c in chain.classifiers))
    for reverse in ([False, True] if chain.symmetric else [False]):
        for ingress in ingresses:
            if not free_idx:
                raise SpecError(f"the chain table is full ({MAX_DIRECTIONS} directions)",
                                file=add.source, place="classifiers")
            start, end = (chain.egress, ingress) if reverse else (ingress, chain.egress)
            d = build_direction(topo, labels, chain.name, free_idx.pop(0), reverse, start, end,
                                stages, weights, chain.symmetric, chain.ttl, "functions",
                                chain.encap)
            d.path_base = free_path_base(ranges, len(d.paths))
            ranges.append((d.path_base, len(d.paths)))
            for i, c in enumerate(chain.classifiers):
                if c.ingress != ingress:
                    continue
                seen = reversed_classifier(c, start) if reverse else c
                d.classifiers.append(classifier_row(i, seen))
            add.directions.append(d)
    add.hops = labels.new
    hops = {h.label: h for h in sp.hops + labels.new}
    used: set[tuple[str, str]] = set()
    for d in add.directions:
        used |= stack_ifaces(d, hops)
    path_nodes = [n for d in add.directions for p in d.paths for n in p.nodes]
    next_id = max(sp.node_ids.values(), default=0) + 1
    for pn in dict.fromkeys(path_nodes):
        if pn not in sp.node_ids and pn not in add.node_ids:
            if next_id > MAX_NODE_ID:
                raise SpecError(f"more than {MAX_NODE_ID} nodes on chains", file=add.source,
                                place="functions")
            add.node_ids[pn] = next_id
            next_id += 1
    arrive = arrivals((p for d in add.directions for p in d.paths), hops, set())
    pushers = {d.ingress for d in add.directions if topo.forwards.get(d.ingress)}
    ends = {(i.node, i.name): i for i in plan.interfaces if i.netns is not None}
    # existing interfaces where the chain's plain frames arrive by XDP redirect and no XDP
    # program of the data plane runs yet need NAPI: GRO on, or (GRO kept off) the forwarder
    held = {(n, a[1]) for n, atts in sp.attach.items() for a in atts if a[2] == "xdp"}
    fed = {k for k, how in arrive.gro_only().items()
           if how == XDP_FED and k not in held and k in ends}
    kept_off = {k for k in fed if k[0] in pushers or ends[k].offloads.get("gro") is False}
    _attach(plan, sp, topo, add, arrive.labelled | kept_off)
    _fit_links(add, topo, ends, used, pushers, fed - kept_off, encap_of(chain.encap).headroom)


def _attach(plan: Plan, sp: SteeringPlan, topo: Topology, add: Addition,
            forwarded: set[tuple[str, str]]) -> None:
    """The programs the chain adds (``add.attach_progs``, those not there yet): the forwarder
    on ``forwarded``, the proxy on the new instances, the classifiers at the ingresses."""
    have = {n: set(a) for n, a in sp.attach.items()}
    want: dict[str, list[tuple[str, str, str]]] = {}
    for node, ifname in sorted(forwarded):
        want.setdefault(node, []).append(("sfc_forward", ifname, "xdp"))
    for nn in add.nodes:
        want.setdefault(nn.node, []).extend([("sfc_proxy_in", nn.ifname, "tcx-ingress"),
                                             ("sfc_proxy_out", nn.ifname, "tcx-egress")])
    for d in add.directions:
        if topo.forwards.get(d.ingress):
            ifs = [i.name for i in plan.interfaces_of(d.ingress)] + \
                [n.attach_ifname for n in add.nodes if n.attach == d.ingress]
            want.setdefault(d.ingress, []).extend(
                ("sfc_classify_ingress", i, "tcx-ingress") for i in ifs)
        else:
            for p in d.paths:
                want.setdefault(d.ingress, []).append(("sfc_classify_egress", p.ifname,
                                                       "tcx-egress"))
                if (d.ingress, p.ifname) not in sp.single_segment and \
                        (d.ingress, p.ifname) not in add.single_segment:
                    add.single_segment.append((d.ingress, p.ifname))
    for node, progs in want.items():
        fresh = [a for a in dict.fromkeys(progs) if a not in have.get(node, set())]
        if fresh:
            add.attach_progs[node] = fresh


def _fit_links(add: Addition, topo: Topology, ends: dict[tuple[str, str], InterfacePlan],
               used: set[tuple[str, str]], pushers: set[str],
               gro_on: set[tuple[str, str]], room: int) -> None:
    """Existing interfaces newly on a path: room for the chain's headers (``room``: labels,
    an SRH, an NSH header: its encoding's), checksums filled before they go on, GRO off where
    labels are pushed, GRO on at ``gro_on`` (NAPI for XDP-redirected frames)."""
    new_nodes = {n.node for n in add.nodes}
    for node, ifname in sorted(used | gro_on):
        if node in new_nodes or (node, ifname) not in ends:
            continue
        ep = ends[(node, ifname)]
        if (node, ifname) in used and topo.forwards.get(node) and \
                (ep.mtu or BASE_MTU) < BASE_MTU + room:
            add.mtu.append((node, ifname, (ep.mtu or BASE_MTU) + room))
        offl: dict[str, bool] = {}
        if (node, ifname) in used and ep.offloads.get("tx-checksum", True):
            offl["tx-checksum"] = False
        if node in pushers and ep.offloads.get("gro", True):
            offl["gro"] = False
        elif (node, ifname) in gro_on and not ep.offloads.get("gro"):
            offl["gro"] = True
        if offl:
            add.offloads.append((node, ifname, offl))


# ------------------------------------------------------------------ merging into the plan
def apply(plan: Plan, add: Addition) -> None:
    """Merge ``add`` into ``plan`` (its steering included): the saved plan then names every
    object the chain made, so ``down``, ``inspect`` and ``chain ls`` know them."""
    sp = plan.steering.copy() if plan.steering else SteeringPlan()
    for n in add.nodes:
        plan.namespaces.append(NamespacePlan(n.node, n.netns, n.kind, True))
        # beside its attach node a veth; on another host a hosted link (its tunnel)
        form = "veth" if n.vni is None else "hosted"
        mtu = n.mtu or BASE_MTU + LABEL_ROOM
        mine = InterfacePlan(n.node, n.netns, n.ifname, -1, n.attach, form, address=n.address,
                             mtu=mtu, offloads={"tx-checksum": False, "gro": False},
                             alias=f"sfclab:{plan.lab}:{n.node}:added",
                             address6=n.address6 or None)
        theirs = InterfacePlan(n.attach, netns_name(plan.lab, n.attach), n.attach_ifname, -1,
                               n.node, form, address=n.gateway, mtu=mtu,
                               offloads={"tx-checksum": False},
                               alias=f"sfclab:{plan.lab}:{n.attach}:added",
                               address6=n.gateway6 or None)
        plan.interfaces += [mine, theirs]
        if n.vni is None:
            plan.veths.append(VethPlan(-1, mine, theirs))
        else:
            plan.host_links.append(planned_link(plan, n))
        plan.routes.append(RoutePlan(n.node, n.netns, "0.0.0.0/0",
                                     str(IPv4Interface(n.gateway).ip), n.ifname))
        if n.gateway6:
            plan.routes.append(RoutePlan(n.node, n.netns, "::/0",
                                         str(IPv6Interface(n.gateway6).ip), n.ifname))
        plan.functions[n.node] = FunctionPlan(n.kind, n.params)
        if n.container is not None:  # started by the containers stage, as at up
            plan.containers.append(ContainerPlan(**n.container))
        for h in plan.hosts:  # its host's cgroups (CPUs, memory); "local" is no plan host
            if h.name == n.host and n.node not in h.nodes:
                h.nodes.append(n.node)
    for node, ifname, mtu in add.mtu:
        for i in plan.interfaces_of(node):
            if i.name == ifname:
                i.mtu = mtu
    for node, ifname, offl in add.offloads:
        for i in plan.interfaces_of(node):
            if i.name == ifname:
                i.offloads.update(offl)
    sp.node_ids.update(add.node_ids)
    sp.hops += add.hops
    sp.directions += add.directions
    for node, progs in add.attach_progs.items():
        sp.attach.setdefault(node, []).extend(progs)
    sp.single_segment += add.single_segment
    plan.steering = sp


def withdraw(plan: Plan, add: Addition) -> list[int]:
    """Take ``add``'s chain out of ``plan``: its directions, its nodes and their links; labels
    no other direction uses.  Returns the labels freed.  (Node ids, attached programs on nodes
    that stay and interface settings stay: they harm no other chain.)"""
    sp = plan.steering.copy() if plan.steering else SteeringPlan()
    gone = {n.node for n in add.nodes}
    sp.directions = [d for d in sp.directions if d.chain != add.chain]
    in_use = {lbl for d in sp.directions for p in d.paths for lbl in p.stack}
    freed = [h.label for h in sp.hops if h.label not in in_use and
             (h.node in gone or h.label in {x.label for x in add.hops})]
    sp.hops = [h for h in sp.hops if h.label not in freed]
    for n in gone:
        sp.node_ids.pop(n, None)
        sp.attach.pop(n, None)
    for node in {n.attach for n in add.nodes}:
        ifs = {n.attach_ifname for n in add.nodes}
        sp.attach[node] = [a for a in sp.attach.get(node, []) if a[1] not in ifs]
    drop_nodes(plan, gone)
    plan.steering = sp
    return freed


def change_of(plan: Plan, nodes: set[str]) -> Plan:
    """What ``nodes`` (added by ``chain add`` or ``migrate``, each joined to its attach node by
    a veth, or across hosts by a hosted link) bring to ``plan``, as a plan of their own: their
    namespaces, their links (both ends, the attach node's included; a tunnel with its ends in
    both host contexts), their routes, functions and containers.  Nothing else of the lab is
    in it: the build engine makes exactly these objects (:mod:`sfclab.realize.change`).
    The converse of :func:`drop_nodes`."""
    return Plan(plan.lab, plan.tag, ip=plan.ip,
                namespaces=[n for n in plan.namespaces if n.node in nodes],
                interfaces=[i for i in plan.interfaces if i.node in nodes or i.peer in nodes],
                veths=[v for v in plan.veths if v.a.node in nodes or v.b.node in nodes],
                routes=[r for r in plan.routes if r.node in nodes],
                functions={n: f for n, f in plan.functions.items() if n in nodes},
                containers=[c for c in plan.containers if c.node in nodes],
                host_links=[hl for hl in plan.host_links
                            if hl.link == -1 and any(e.node in nodes for e in hl.ends[1:])])


def drop_nodes(plan: Plan, gone: set[str]) -> None:
    """Remove nodes made by ``chain add``/``migrate`` (and their links) from the plan."""
    plan.namespaces = [n for n in plan.namespaces if n.node not in gone]
    plan.interfaces = [i for i in plan.interfaces if i.node not in gone and i.peer not in gone]
    plan.veths = [v for v in plan.veths if v.a.node not in gone and v.b.node not in gone]
    plan.routes = [r for r in plan.routes if r.node not in gone]
    plan.host_links = [hl for hl in plan.host_links  # added instances' tunnels (link -1)
                       if hl.link != -1 or not any(e.node in gone for e in hl.ends)]
    plan.containers = [c for c in plan.containers if c.node not in gone]
    for n in gone:
        plan.functions.pop(n, None)
    for h in plan.hosts:
        h.nodes = [x for x in h.nodes if x not in gone]
