"""A lab as a picture: Mermaid or Graphviz dot text, from a plan and the node kinds' shapes
(pure)."""

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
        addrs = [i.address for i in ifs if i.address]
        label = role + (" " + ", ".join(addrs) if addrs else "")
        edges.append((a, b, label))
    return edges


def _id(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)


def mermaid(plan: Plan, shapes: Shapes) -> str:
    lines = ["graph LR"]
    for node, kind in _nodes(plan):
        left, right = shapes[kind][0] if kind in shapes else ('("', '")')
        lines.append(f"  {_id(node)}{left}{node}<br/><small>{kind}</small>{right}")
    for a, b, label in _edges(plan):
        lines.append(f"  {_id(a)} ---|\"{label}\"| {_id(b)}")
    return "\n".join(lines) + "\n"


def dot(plan: Plan, shapes: Shapes) -> str:
    lines = [f'graph "{plan.lab}" {{', "  rankdir=LR;", "  node [fontname=Helvetica];"]
    for node, kind in _nodes(plan):
        shape = shapes[kind][1] if kind in shapes else "ellipse"
        lines.append(f'  "{node}" [shape={shape}, label="{node}\\n{kind}"];')
    for a, b, label in _edges(plan):
        lines.append(f'  "{a}" -- "{b}" [label="{label}", fontsize=9];')
    lines.append("}")
    return "\n".join(lines) + "\n"
