"""Chains -> the SFC data plane's plan: paths, labels, stacks, classifier entries, attachments.

Pure: from a validated lab and its plan, without the kernel.

**Paths.**  Each chain direction runs from the classifier's ingress node through its functions
(one instance of each group) to the egress node; between two stops the planner takes the
shortest path over direct links between namespaces, through forwarding nodes only.  Every
combination of group instances is a *path* of its own; a chain's 256 *slots* are shared out
among its paths in proportion to the product of the instances' weights, and the classifier
picks a slot by a hash of the flow (for a symmetric chain the same hash both ways, and the
reverse direction's path k is path k backwards, so a flow returns through its instances).

**Labels (RFC 8595 stacking).**  A label is owned by one node and says what it does: *forward*
labels, one per (node, outgoing link) used by some path, send the packet to that neighbour; a
*proxy* label, one per function instance, hands it to the function.  The ingress pushes, in
one step, the labels of every later node of the path in order (a function's proxy label, then
its forward label); each node pops its own; the node before the egress pops the bottom one and
delivers plain IPv4.  Transit nodes keep no per-flow state.  An SFC-aware eBPF function
(``bpf-firewall``: its kind's ``sfc_program``) takes its node's proxy label itself: its program
is attached on every interface of the node in place of the forwarder and the proxy; a node
running several (``bpf-pipeline``: its params' ``sfc_stages()``) also gets their stage
programs as attachments ``(program, "0", "tail")``, ... (entries of the tail-call table, put
before the hook's).  Labels start at 16 (0-15 are
reserved by RFC 3032) and are given in order of first use, so the same lab always gets the
same labels.

**Padding.**  A chain's ``pad_labels: K`` makes every one of its stacks K entries deeper on
the same hops, to measure what the stack depth costs apart from the path: the ingress pushes
K padding entries below the path's labels (label :data:`PAD_LABEL`, owned by no node, so a
frame whose top is padding is dropped as an unknown label), and the path's last label gets the
action *unpad* in place of *forward*: its owner, the node before the egress, pops it and the
padding in one step and delivers plain IPv4 as before.  Each hop of the path then carries K
labels more than it would unpadded (a function's proxy parks and restores them with the rest).

**Encodings.**  A chain's ``encap`` (:mod:`.encap`) says how these same paths and labels go on
the wire: as the label stack (mpls) or as an NSH header whose (SPI, SI) each node maps back to
its label; the planning here is the same for all of them.

**Fitting the links.**  Labelled frames are longer than the IP packets inside them: every
interface of a non-host node on a path takes ``4 x 16`` bytes more MTU (an NSH chain's: 8, its
header; the most of the chains crossing it) (hosts keep theirs, so
what they send still fits once labelled).  Interfaces on paths get transmit checksum offload
off (the checksum is filled before a label is pushed), and interfaces where a stack is pushed
after the kernel's receive path (functions, forwarding ingress nodes) GRO off, since labels
cannot be pushed onto a GSO packet; a host that classifies is told to send one segment per
packet (realized as ``gso_max_segs 1``).  The forwarder is attached only where labelled frames
arrive (:mod:`.arrivals`); an interface where only a path's last, plain delivery arrives by XDP
redirect gets GRO on instead (its veth then runs NAPI, which redirected frames need), or keeps
the forwarder where GRO stays off.  Lab-file settings win over all of these.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from ipaddress import ip_network
from itertools import product
from typing import TYPE_CHECKING, Any, cast

from ..errors import SpecError
from ..spec.limits import (LABELS_PER_FUNCTION, MAX_CHAIN_PATHS, MAX_DIRECTIONS,  # noqa: F401
                           MAX_HOPS, MAX_LABELS, MAX_MASKS, SLOTS)
from ..spec.ports import port_prefixes  # noqa: F401 - one copy (light, for the agent)
from . import maglev
from .arrivals import XDP_FED, Arrivals, arrivals
from .encap import encap_of, encap_problem
from .labels import FAMILIES, PAD_LABEL, PROTOS, lse  # noqa: F401 - one copy, light
from .model import InterfacePlan, Plan
from .steering import (ClassifierRow, DirectionPlan, EntryRow, Hop, PathPlan,  # noqa: F401
                       SteeringPlan)

if TYPE_CHECKING:  # light start-up: the agents and watchers load no lab-file models
    from ..spec.lab import Lab
    from ..spec.sfc import ClassifierSpec, SfcChainSpec

FIRST_LABEL = 16
LABEL_ROOM = 4 * MAX_LABELS

def _error(lab: Lab, msg: str, loc: tuple[Any, ...]) -> SpecError:
    if lab.doc is not None:
        return lab.doc.error(msg, loc)
    return SpecError(msg, file=lab.source)


class _Graph:
    """Direct links between namespace nodes: node -> [(neighbour, my interface, its interface)]."""

    def __init__(self, lab: Lab, plan: Plan):
        ends: dict[tuple[int, str], InterfacePlan] = {(i.link, i.node): i for i in plan.interfaces
                                                      if i.netns is not None}
        self.adj: dict[str, list[tuple[str, str, str]]] = {n: [] for n in lab.nodes}
        for li, lk in enumerate(lab.links):
            a, b = lk.endpoints[0].node, lk.endpoints[1].node
            if lab.nodes[a].is_bridge or lab.nodes[b].is_bridge or a == b:
                continue
            ia, ib = ends.get((li, a)), ends.get((li, b))
            if ia is None or ib is None:
                continue
            self.adj[a].append((b, ia.name, ib.name))
            self.adj[b].append((a, ib.name, ia.name))
        self.forwards = {n: s.forwards for n, s in lab.nodes.items()}

    def shortest(self, src: str, dst: str) -> list[tuple[str, str, str, str]] | None:
        """Edges (node, out interface, next node, its interface) from ``src`` to ``dst``,
        through forwarding nodes only; None if there is no such path."""
        return shortest_path(self.adj, self.forwards, src, dst)


Adjacency = dict[str, list[tuple[str, str, str]]]  # node -> [(neighbour, my if, its if)]
Edges = list[tuple[str, str, str, str]]  # (node, out interface, next node, its interface)


def shortest_path(adj: Adjacency, forwards: dict[str, bool], src: str, dst: str
                  ) -> list[tuple[str, str, str, str]] | None:
    """Breadth-first: the edges (node, out interface, next node, its interface) of a shortest
    path from ``src`` to ``dst`` whose inner nodes all forward; None if there is none."""
    prev: dict[str, tuple[str, str, str]] = {}
    seen, todo = {src}, deque([src])
    while todo:
        n = todo.popleft()
        if n == dst:
            break
        if n != src and not forwards.get(n):
            continue
        for m, my, their in adj.get(n, []):
            if m not in seen:
                seen.add(m)
                prev[m] = (n, my, their)
                todo.append(m)
    if dst not in seen:
        return None
    edges: list[tuple[str, str, str, str]] = []
    n = dst
    while n != src:
        p, my, their = prev[n]
        edges.append((p, my, n, their))
        n = p
    return edges[::-1]


class _Labels:
    """Labels by what they do: one per (node, action, out interface), numbered in order of
    first use from ``FIRST_LABEL``."""

    def __init__(self) -> None:
        self.hops: dict[tuple[str, str, str | None], Hop] = {}

    def label(self, hop: Hop) -> int:
        known = self.hops.setdefault((hop.node, hop.action, hop.ifname), hop)
        if known is hop:
            hop.label = FIRST_LABEL + len(self.hops) - 1
        return known.label


def path_count(stages: list[list[str]]) -> int:
    """Paths of a direction through ``stages`` (each a stop's instances), counted without
    making them (the product of the instance counts: at most 16 factors, plain arithmetic)."""
    return math.prod(len(s) for s in stages)


def _weights(instances: list[list[str]], weights: list[list[int]]) -> list[tuple[list[str], int]]:
    combos = []
    for pick in product(*[range(len(x)) for x in instances]):
        w = 1
        for g, k in enumerate(pick):
            w *= weights[g][k]
        combos.append(([instances[g][k] for g, k in enumerate(pick)], w))
    return combos


def _slots(paths: list[PathPlan]) -> list[int]:
    """Slot -> index into ``paths``: a Maglev table of :data:`sfclab.plan.maglev.SIZE` slots
    over the paths' keys (their instances' names), shared by their weights."""
    return maglev.table([maglev.path_key(p.instances) for p in paths],
                        [p.weight for p in paths])


def build(lab: Lab, plan: Plan) -> SteeringPlan | None:
    """The steering plan of ``lab``'s chains (None without chains); fits ``plan``'s interfaces
    (MTU, offloads) to labelled traffic.  Raises a located SpecError for a chain the topology
    cannot carry."""
    if not lab.chains:
        return None
    g = _Graph(lab, plan)
    labels = _Labels()
    sp = SteeringPlan()
    path_nodes: set[str] = set()
    functions_used: set[str] = set()
    ingress_used: set[str] = set()
    edges_used: set[tuple[str, str]] = set()  # (node, interface)
    first_hops: set[tuple[str, str]] = set()
    room: dict[tuple[str, str], int] = {}  # (node, interface) -> MTU its encodings add

    for cname, chain in lab.chains.items():
        _check_encap(lab, cname, chain)
        dirs = [False, True] if chain.symmetric else [False]
        ingresses = sorted({c.ingress for c in chain.classifiers},
                           key=[c.ingress for c in chain.classifiers].index)
        for reverse in dirs:
            for ingress in ingresses:
                d = _direction(lab, g, labels, cname, chain, ingress, reverse,
                               len(sp.directions))
                sp.directions.append(d)
                for p in d.paths:
                    path_nodes.update(p.nodes)
                    functions_used.update(p.instances)
                    first_hops.add((p.nodes[0], p.ifname))
                ingress_used.add(d.ingress)
                edges_used.update(_path_ifaces(d, labels))
                for key in stack_ifaces(d, {h.label: h for h in labels.hops.values()}):
                    room[key] = max(room.get(key, 0), encap_of(d.encap).headroom)
    if len(sp.directions) > MAX_DIRECTIONS:
        raise _error(lab, f"{len(sp.directions)} chain directions; at most {MAX_DIRECTIONS}",
                     ("chains",))
    sp.hops = list(labels.hops.values())
    if FIRST_LABEL + len(sp.hops) > MAX_HOPS:  # a label indexes sfc_labels: below MAX_HOPS
        raise _error(lab, f"{len(sp.hops):,} labels; at most {MAX_HOPS - FIRST_LABEL:,}",
                     ("chains",))
    _refuse_shadowing(lab, sp.directions)
    masks = {mask_key(e) for d in sp.directions for c in d.classifiers for e in c["entries"]}
    if len(masks) > MAX_MASKS:
        raise _error(lab, f"the classifiers need {len(masks)} distinct wildcard masks (port "
                     f"ranges count one per prefix length); at most {MAX_MASKS}", ("chains",))
    for i, n in enumerate(sorted(path_nodes, key=list(lab.nodes).index)):
        sp.node_ids[n] = i + 1

    # the links fitted to labelled traffic, then the programs per node
    pushers = functions_used | {n for n in ingress_used if lab.nodes[n].forwards}
    arrive = _arrivals(lab, sp)
    plain = arrive.gro_only()
    for end in plan.interfaces:
        if end.netns is None or end.node not in sp.node_ids:
            continue
        on_path = (end.node, end.name) in edges_used
        if on_path or end.node in pushers:
            end.offloads.setdefault("tx-checksum", False)
        if end.node in pushers:
            end.offloads.setdefault("gro", False)
        elif plain.get((end.node, end.name)) == XDP_FED:
            end.offloads.setdefault("gro", True)  # NAPI for the redirected frames
        if on_path and lab.nodes[end.node].forwards:
            end.mtu = (end.mtu or 1500) + room.get((end.node, end.name), LABEL_ROOM)
    gro_off = {(i.node, i.name) for i in plan.interfaces if i.offloads.get("gro") is False}
    # the forwarder where labelled frames arrive, and where XDP-redirected plain frames
    # arrive on a veth that keeps GRO off (its program keeps NAPI on there)
    rx = arrive.labelled | {k for k, how in plain.items() if how == XDP_FED and k in gro_off}
    for n in sp.node_ids:
        sp.attach[n] = _programs(lab, plan, sp, n, (rx, edges_used), functions_used,
                                 ingress_used, first_hops)
    return sp


def _arrivals(lab: Lab, sp: SteeringPlan) -> Arrivals:
    """Where the planned paths' frames arrive (:mod:`.arrivals`)."""
    hops = {h.label: h for h in sp.hops}
    aware = {n for n in sp.node_ids if lab.nodes[n].kind_ref.sfc_program}
    return arrivals((p for d in sp.directions for p in d.paths), hops, aware)


def _programs(lab: Lab, plan: Plan, sp: SteeringPlan, n: str,
              where: tuple[set[tuple[str, str]], set[tuple[str, str]]],
              functions_used: set[str], ingress_used: set[str],
              first_hops: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Node ``n``'s attachments (program, interface, hook), each once: ``where`` is (the
    interfaces that need the forwarder, every interface on a path: a function's proxy); a host
    that classifies is added to ``sp.single_segment``."""
    rx, on_path = where
    ifaces = sorted({i for (m, i) in on_path if m == n})
    forwarded = sorted({i for (m, i) in rx if m == n})
    # each encoding of the chains through the node brings its programs (one set for
    # MPLS and NSH: they dispatch by ethertype), each attachment once
    encs = [encap_of(e) for e in dict.fromkeys(d.encap for d in sp.directions
                                                if any(n in p.nodes for p in d.paths))]
    att = [(e.forwarder, i, "xdp") for e in encs for i in forwarded]
    own = lab.nodes[n].kind_ref.sfc_program
    if own:  # an eBPF function forwards and filters by itself, on every interface
        att = [(own, i.name, "xdp") for i in plan.interfaces_of(n)]
        # several on one node (bpf-pipeline): their stages in the tail-call table, first
        stages = getattr(lab.nodes[n].params, "sfc_stages", None)
        att[:0] = [(s, str(k), "tail") for k, s in enumerate(stages() if stages else [])]
    elif n in functions_used:
        att += [(e.proxy[0], i, "tcx-ingress") for e in encs for i in ifaces]
        att += [(e.proxy[1], i, "tcx-egress") for e in encs for i in ifaces]
    if n in ingress_used:
        if lab.nodes[n].forwards:
            att += [(e.classify[1], i.name, "tcx-ingress") for e in encs
                    for i in plan.interfaces_of(n)]
        else:
            outs = sorted({i for (m, i) in first_hops if m == n})
            att += [(e.classify[0], i, "tcx-egress") for e in encs for i in outs]
            sp.single_segment += [(n, i) for i in outs]
    return list(dict.fromkeys(att))


def _check_encap(lab: Lab, cname: str, chain: SfcChainSpec) -> None:
    """A chain's ``encap`` against what it is built with (:func:`.encap.encap_problem`)."""
    aware = []
    for i, f in enumerate(chain.functions):
        names = lab.groups[f].instances if f in lab.groups else [f]
        if any(lab.nodes[n].kind_ref.sfc_program for n in names):
            aware.append((i, f))
    problem = encap_problem(chain.encap, chain.pad_labels, aware)
    if problem:
        raise _error(lab, problem[0], ("chains", cname, *problem[1]))


def stack_ifaces(d: DirectionPlan, hops: Mapping[int, Hop]) -> set[tuple[str, str]]:
    """The interfaces direction ``d``'s frames cross with their header on: its first hops and
    both ends of its forward (and unpad) labels' links (``hops``: label -> hop)."""
    out: set[tuple[str, str]] = set()
    for p in d.paths:
        out.add((p.nodes[0], p.ifname))
        out.add((p.next, p.next_ifname))
        for lbl in p.stack:
            h = hops[lbl]
            if h.action in ("forward", "unpad") and h.ifname and h.next and h.next_ifname:
                out.add((h.node, h.ifname))
                out.add((h.next, h.next_ifname))
    return out


def _path_ifaces(d: DirectionPlan, labels: _Labels) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for p in d.paths:
        out.add((p.nodes[0], p.ifname))
        out.add((p.next, p.next_ifname))
    for h in labels.hops.values():
        if h.action in ("forward", "unpad") and h.ifname and h.next and h.next_ifname:
            out.add((h.node, h.ifname))
            out.add((h.next, h.next_ifname))
    return out


def _direction(lab: Lab, g: _Graph, labels: _Labels, cname: str, chain: SfcChainSpec,
               ingress: str, reverse: bool, index: int) -> DirectionPlan:
    fplace: tuple[Any, ...] = ("chains", cname, "functions")
    stages: list[list[str]] = []
    weights: list[list[int]] = []
    for f in chain.functions:
        if f in lab.groups:
            stages.append(list(lab.groups[f].instances))
            weights.append(lab.groups[f].weight_list())
        else:
            stages.append([f])
            weights.append([1])
    start, end = (chain.egress, ingress) if reverse else (ingress, chain.egress)
    if reverse:
        stages, weights = stages[::-1], weights[::-1]
    d = DirectionPlan(index, cname, reverse, start, end, chain.symmetric, chain.ttl,
                      encap=chain.encap)
    d.paths = assemble(cname, start, end, stages, weights, g.shortest, labels.label,
                       lambda msg: _error(lab, msg, fplace), chain.pad_labels,
                       lambda msg: _error(lab, msg, ("chains", cname, "pad_labels")))
    d.slots = _slots(d.paths)
    for i, c in enumerate(chain.classifiers):
        if c.ingress != ingress:
            continue
        seen = reversed_classifier(c, start) if reverse else c
        d.classifiers.append(classifier_row(i, seen))
    return d


def entry_key(e: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the classifier table is keyed by: the ingress and the masked 5-tuple (the mask
    follows from the prefix lengths); the priority is in the value, not the key."""
    return (e["ingress"], e["src"], e["dst"], tuple(e["sport"]), tuple(e["dport"]), e["proto"])


def _refuse_shadowing(lab: Lab, directions: list[DirectionPlan]) -> None:
    """Two chains' classifiers that make one table entry: one would shadow the other whatever
    the priorities (the table holds one chain per entry), as ``chain add`` refuses too."""
    owner: dict[tuple[Any, ...], tuple[str, int]] = {}
    for d in directions:
        for c in d.classifiers:
            for e in c["entries"]:
                had = owner.setdefault(entry_key(e), (d.chain, c["index"]))
                if had[0] != d.chain:
                    raise _error(lab, f"this classifier makes the same classifier entry as "
                                 f"chains.{had[0]}.classifiers[{had[1]}] (one would shadow the "
                                 "other, whatever the priorities): make them differ",
                                 ("chains", d.chain, "classifiers", c["index"]))


def assemble(cname: str, start: str, end: str, stages: list[list[str]],
             weights: list[list[int]], shortest: Callable[[str, str], Edges | None],
             label: Callable[[Hop], int], error: Callable[[str], Exception], pad: int = 0,
             pad_error: Callable[[str], Exception] | None = None) -> list[PathPlan]:
    """A direction's paths, one per combination of the stages' instances (weight: the product
    of theirs): the shortest way from ``start`` through the instances in order to ``end``,
    and its RFC 8595 stack (per inner node, a function instance's proxy label, then its
    forward label), labels from ``label``.  Shared by a lab file's chains (:func:`build`) and
    those added to a running lab (:mod:`.chainpaths`); ``error`` makes their errors.  ``pad``
    padding entries go below each stack, its last label then unpads (the module docstring);
    ``pad_error`` makes the error of a padded stack too deep (default ``error``)."""
    count = path_count(stages)
    if count > MAX_CHAIN_PATHS:
        raise error(f"the groups make {count:,} paths; at most {MAX_CHAIN_PATHS} per chain "
                    "(the product of the groups' instance counts)")
    if LABELS_PER_FUNCTION * len(stages) > MAX_LABELS:
        raise error(f"chain '{cname}' visits {len(stages)} functions, each taking at least "
                    f"{LABELS_PER_FUNCTION} labels; at most {MAX_LABELS} labels per stack")
    combos = _weights(stages, weights)
    paths = []
    for k, (instances, w) in enumerate(combos):
        stops = [start, *instances, end]
        edges: Edges = []
        for a, b in zip(stops, stops[1:]):
            seg = shortest(a, b) if a != b else None
            if not seg:
                raise error(f"no path from {a} to {b} over direct links through forwarding "
                            "nodes (chains do not cross bridges)")
            edges += seg
        nodes = [start] + [e[2] for e in edges]
        stop_at = {}  # position in nodes -> function instance
        pos = 0
        for inst in instances:
            pos = nodes.index(inst, pos + 1)
            stop_at[pos] = inst
        stack: list[int] = []
        for i in range(1, len(nodes) - 1):
            if i in stop_at:
                stack.append(label(Hop(0, nodes[i], "proxy")))
            _, my, nxt, their = edges[i]
            last = pad and i == len(nodes) - 2
            stack.append(label(Hop(0, nodes[i], "unpad" if last else "forward", my, nxt,
                                   their)))
        if len(stack) > MAX_LABELS:
            raise error(f"chain '{cname}' needs a stack of {len(stack)} labels "
                        f"({' '.join(nodes)}); at most {MAX_LABELS}")
        if len(stack) + pad > MAX_LABELS:
            raise (pad_error or error)(
                f"expected at most {MAX_LABELS - len(stack)} padding labels: the path of "
                f"chain '{cname}' ({' '.join(nodes)}) takes {len(stack)} labels and a stack "
                f"holds at most {MAX_LABELS}, got {pad}")
        _, my0, _, their0 = edges[0]
        paths.append(PathPlan(k, nodes, instances, stack, my0, nodes[1], their0, w, pad))
    return paths


def reversed_classifier(c: ClassifierSpec, ingress: str) -> ClassifierSpec:
    """``c`` as the reverse direction of a symmetric chain sees it, at ``ingress``: the ends
    swapped."""
    return c.model_copy(update={"ingress": ingress, "src": c.dst, "dst": c.src,
                                "sport": c.dport, "dport": c.sport})


def classifier_row(index: int, c: ClassifierSpec) -> ClassifierRow:
    """Classifier ``index`` of a chain as a direction holds it: its keys as the file wrote
    them (:meth:`ClassifierSpec.as_dict`) and its data-plane entries."""
    return cast(ClassifierRow, {"index": index, **c.as_dict(), "entries": entries_of(c)})


def entries_of(c: ClassifierSpec) -> list[EntryRow]:
    """A classifier's data-plane entries: one per combination of port prefixes (each an
    :class:`EntryRow`)."""
    any_net = "::/0" if c.family == "ipv6" else "0.0.0.0/0"
    out = [EntryRow(ingress=c.ingress, src=str(c.src or any_net), dst=str(c.dst or any_net),
                    sport=s, dport=t, proto=PROTOS[c.proto], priority=c.priority)
           for s in (port_prefixes(*c.sport) if c.sport else [(0, 0)])
           for t in (port_prefixes(*c.dport) if c.dport else [(0, 0)])]
    if c.family != "ipv4":  # an IPv4 entry is written as before families
        for e in out:
            e["family"] = FAMILIES[c.family]
    return out


def mask_key(e: Mapping[str, Any]) -> tuple[int, int, int, int, bool, bool]:
    """An entry's wildcard mask: prefix lengths of addresses and ports, and whether the
    protocol and the family are matched (an entry recorded before families is IPv4's)."""
    return (ip_network(e["src"]).prefixlen, ip_network(e["dst"]).prefixlen,
            e["sport"][1], e["dport"][1], e["proto"] != 0, e.get("family", 4) != 0)
