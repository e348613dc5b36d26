"""A lab as a picture: Mermaid or Graphviz dot text, from a plan and the node kinds' shapes
(pure).

The topology is drawn as undirected links (role and addresses on each).  In a lab with hosts
every host is a box of its own (a Mermaid subgraph, a dot cluster) holding its nodes, and a
hosted link is labelled with its attach kind, VNI and rate.  A lab with service function chains
also gets, per chain, its steered path over the topology: one coloured, dashed arrow per hop,
labelled with the chain's name (a function instance as ``name: fw1``), in the direction the
classifier sends; a symmetric chain's arrows point both ways.  Every path of a chain is drawn
(a group makes one path per instance), each hop once.

A running lab is drawn as it runs: its saved plan holds what ``chain add``, ``chain migrate``
and ``host add`` made (function instances, their links, each drawn once, and their tunnels
with VNI; added hosts as boxes, the nodes no host holds in a box ``local``), and the chains'
paths as they are now (through clones after a migration).  A lab-file function node whose
function ``chain migrate`` moved (``moved``: node -> clone, from the lab's state) is drawn as
what it is now, a ``transit`` node "moved to <clone>", and its clone as the function.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.quantities import format_rate
from .model import Plan

#: the implicit host of a lab whose file names no hosts (its nodes, once hosts were added)
LOCAL_HOST = "local"

#: one colour per chain, in order of the chains (repeats after eight chains)
CHAIN_COLOURS = ("#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628", "#f781bf",
                 "#999999")


@dataclass(frozen=True)
class ChainHop:
    """One hop of a chain's steered path: from ``a`` to ``b``; ``into`` the function instance
    ``b`` is visited as, if it is one."""

    chain: str
    a: str
    b: str
    symmetric: bool
    colour: str
    into: bool = False


def chain_hops(plan: Plan) -> list[ChainHop]:
    """Every hop of every chain's forward paths, each (chain, a, b) once, in path order."""
    sp = plan.steering
    if sp is None:
        return []
    out: dict[tuple[str, str, str], ChainHop] = {}
    colours: dict[str, str] = {}
    for d in sp.directions:
        if d.reverse:
            continue
        colour = colours.setdefault(d.chain, CHAIN_COLOURS[len(colours) % len(CHAIN_COLOURS)])
        for p in d.paths:
            for a, b in zip(p.nodes, p.nodes[1:]):
                out.setdefault((d.chain, a, b), ChainHop(d.chain, a, b, d.symmetric, colour,
                                                         b in p.instances))
    return list(out.values())

#: node kind -> (mermaid brackets, Graphviz shape); kinds not named are drawn round
Shapes = dict[str, tuple[tuple[str, str], str]]


#: what a lab-file function node whose function moved to a clone is drawn as
TRANSIT = "transit"


def _nodes(plan: Plan, moved: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(node, kind) in lab order; a migrated lab-file node's kind is :data:`TRANSIT`."""
    moved = moved or {}
    out = [(ns.node, TRANSIT if ns.node in moved else ns.kind) for ns in plan.namespaces]
    out += [(b.node, "ovs-bridge") for b in plan.ovs_bridges]
    return out


def _caption(node: str, kind: str, moved: dict[str, str] | None, plan: Plan,
             states: dict[str, str] | None = None) -> str:
    """The text under a node's name: its kind, for a migrated node where its function is
    now (a clone: which node it stands in for), and the image of a node in a container with
    its state (``states``: node -> a few words, for a running lab)."""
    moved = moved or {}
    image = next((f", image {c.image}" for c in plan.containers if c.node == node), "")
    if image and states and node in states:
        image += f" ({states[node]})"
    if node in moved:
        return f"{kind}, moved to {moved[node]}{image}"
    stood = [n for n, c in moved.items() if c == node]
    return (f"{kind} in place of {stood[0]}" if stood else kind) + image


def link_key(link: int, node: str, peer: str) -> tuple[int, str, str]:
    """What one link of a running lab is known by: its index in the lab file, or for a link
    made on the running lab (``chain add``/``migrate``: index -1) its two nodes."""
    return (link, "", "") if link >= 0 else (link, min(node, peer), max(node, peer))


def _edges(plan: Plan) -> list[tuple[str, str, str]]:
    """(a, b, label) once per link: the lab file's and those made on the running lab."""
    by_link: dict[tuple[int, str, str], list] = {}
    for i in plan.interfaces:
        by_link.setdefault(link_key(i.link, i.node, i.peer), []).append(i)
    edges = []
    for key in sorted(by_link):
        ifs = by_link[key]
        nodes = {i.node for i in ifs} | {i.peer for i in ifs}
        a, b = sorted(nodes, key=lambda n: (n != ifs[0].node, n))[:2]
        role = ifs[0].role
        hosted = next((h for h in plan.host_links if h.link == key[0] and
                       (key[0] >= 0 or {e.node for e in h.ends} == {a, b})), None)
        if hosted is not None:
            role = hosted.attach + (f" vni {hosted.vni}" if hosted.vni is not None else "") + \
                (f" {format_rate(hosted.rate)}" if hosted.rate else "")
        addrs = [a for i in ifs for a in (i.address, i.address6) if a]
        label = role + (" " + ", ".join(addrs) if addrs else "")
        edges.append((a, b, label))
    return edges


def _id(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)


def _by_host(plan: Plan, moved: dict[str, str] | None = None
             ) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """The nodes grouped by host, in host order (one group, None, without hosts)."""
    if not plan.hosts:
        return [(None, _nodes(plan, moved))]
    nodes = dict(_nodes(plan, moved))
    out: list[tuple[str | None, list[tuple[str, str]]]] = [
        (h.name, [(n, nodes[n]) for n in h.nodes if n in nodes]) for h in plan.hosts]
    held = {n for h in plan.hosts for n in h.nodes}
    rest = [(n, k) for n, k in nodes.items() if n not in held]
    if rest:  # hosts added to a lab whose file named none: the rest is on the machine
        out.insert(0, (LOCAL_HOST, rest))
    return out


def mermaid(plan: Plan, shapes: Shapes, moved: dict[str, str] | None = None,
            states: dict[str, str] | None = None) -> str:
    lines = ["graph LR"]
    for host, group in _by_host(plan, moved):
        pad = "  " if host is None else "    "
        if host is not None:
            lines.append(f'  subgraph {_id("host " + host)}["host {host}"]')
        for node, kind in group:
            left, right = shapes[kind][0] if kind in shapes else ('("', '")')
            lines.append(f"{pad}{_id(node)}{left}{node}<br/><small>"
                         f"{_caption(node, kind, moved, plan, states)}</small>{right}")
        if host is not None:
            lines.append("  end")
    edges = _edges(plan)
    for a, b, label in edges:
        lines.append(f"  {_id(a)} ---|\"{label}\"| {_id(b)}")
    for i, h in enumerate(chain_hops(plan), start=len(edges)):
        arrow = "<-.->" if h.symmetric else "-.->"
        text = f"{h.chain}: {h.b}" if h.into else h.chain
        lines.append(f"  {_id(h.a)} {arrow}|\"{text}\"| {_id(h.b)}")
        lines.append(f"  linkStyle {i} stroke:{h.colour},stroke-width:2px,color:{h.colour}")
    return "\n".join(lines) + "\n"


def dot(plan: Plan, shapes: Shapes, moved: dict[str, str] | None = None,
        states: dict[str, str] | None = None) -> str:
    lines = [f'graph "{plan.lab}" {{', "  rankdir=LR;", "  node [fontname=Helvetica];"]
    for host, group in _by_host(plan, moved):
        pad = "  " if host is None else "    "
        if host is not None:
            lines.append(f'  subgraph "cluster_{host}" {{')
            lines.append(f'    label="host {host}";')
        for node, kind in group:
            shape = shapes[kind][1] if kind in shapes else "ellipse"
            lines.append(f'{pad}"{node}" [shape={shape}, '
                         f'label="{node}\\n{_caption(node, kind, moved, plan, states)}"];')
        if host is not None:
            lines.append("  }")
    for a, b, label in _edges(plan):
        lines.append(f'  "{a}" -- "{b}" [label="{label}", fontsize=9];')
    for h in chain_hops(plan):
        text = f"{h.chain}: {h.b}" if h.into else h.chain
        lines.append(f'  "{h.a}" -- "{h.b}" [label="{text}", color="{h.colour}", '
                     f'fontcolor="{h.colour}", style=dashed, penwidth=2, '
                     f'dir={"both" if h.symmetric else "forward"}, constraint=false, '
                     "fontsize=9];")
    lines.append("}")
    return "\n".join(lines) + "\n"
