"""A lab as a picture: Mermaid or Graphviz dot text, from a plan and the node kinds' shapes
(pure).  In a lab with hosts every host is a box of its own (a Mermaid subgraph, a dot
cluster) holding its nodes, and a hosted link is labelled with its attach kind, VNI and rate."""

from __future__ import annotations

from .model import Plan

#: node kind -> (mermaid brackets, Graphviz shape); kinds not named are drawn round
Shapes = dict[str, tuple[tuple[str, str], str]]


def _nodes(plan: Plan) -> list[tuple[str, str]]:
    out = [(ns.node, ns.kind) for ns in plan.namespaces]
    out += [(b.node, "ovs-bridge") for b in plan.ovs_bridges]
    return out


def _edges(plan: Plan) -> list[tuple[str, str, str]]:
    """(a, b, label) once per link."""
    by_link: dict[int, list] = {}
    for i in plan.interfaces:
        by_link.setdefault(i.link, []).append(i)
    edges = []
    for link in sorted(by_link):
        ifs = by_link[link]
        nodes = {i.node for i in ifs} | {i.peer for i in ifs}
        a, b = sorted(nodes, key=lambda n: (n != ifs[0].node, n))[:2]
        role = ifs[0].role
        hosted = next((h for h in plan.host_links if h.link == link), None)
        if hosted is not None:
            role = hosted.attach + (f" vni {hosted.vni}" if hosted.vni is not None else "") + \
                (f" {hosted.rate} bit/s" if hosted.rate else "")
        addrs = [i.address for i in ifs if i.address]
        label = role + (" " + ", ".join(addrs) if addrs else "")
        edges.append((a, b, label))
    return edges


def _id(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)


def _by_host(plan: Plan) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """The nodes grouped by host, in host order (one group, None, without hosts)."""
    if not plan.hosts:
        return [(None, _nodes(plan))]
    nodes = dict(_nodes(plan))
    return [(h.name, [(n, nodes[n]) for n in h.nodes if n in nodes]) for h in plan.hosts]


def mermaid(plan: Plan, shapes: Shapes) -> str:
    lines = ["graph LR"]
    for host, group in _by_host(plan):
        pad = "  " if host is None else "    "
        if host is not None:
            lines.append(f'  subgraph {_id("host " + host)}["host {host}"]')
        for node, kind in group:
            left, right = shapes[kind][0] if kind in shapes else ('("', '")')
            lines.append(f"{pad}{_id(node)}{left}{node}<br/><small>{kind}</small>{right}")
        if host is not None:
            lines.append("  end")
    for a, b, label in _edges(plan):
        lines.append(f"  {_id(a)} ---|\"{label}\"| {_id(b)}")
    return "\n".join(lines) + "\n"


def dot(plan: Plan, shapes: Shapes) -> str:
    lines = [f'graph "{plan.lab}" {{', "  rankdir=LR;", "  node [fontname=Helvetica];"]
    for host, group in _by_host(plan):
        pad = "  " if host is None else "    "
        if host is not None:
            lines.append(f'  subgraph "cluster_{host}" {{')
            lines.append(f'    label="host {host}";')
        for node, kind in group:
            shape = shapes[kind][1] if kind in shapes else "ellipse"
            lines.append(f'{pad}"{node}" [shape={shape}, label="{node}\\n{kind}"];')
        if host is not None:
            lines.append("  }")
    for a, b, label in _edges(plan):
        lines.append(f'  "{a}" -- "{b}" [label="{label}", fontsize=9];')
    lines.append("}")
    return "\n".join(lines) + "\n"
