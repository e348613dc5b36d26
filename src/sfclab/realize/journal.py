"""What the journal says a plan will make: one entry per object that outlives a namespace.

Interfaces inside lab namespaces need no entry of their own: they disappear with the namespace.
Entries: ``netns`` (name), ``link`` (a root-namespace interface: name and alias mark),
``ovs-bridge`` (name), ``function`` (node and kind: its ``stop`` runs at ``down``).
"""

from __future__ import annotations

from typing import Any

from ..plan.model import Plan


def entries(plan: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"op": "netns", "name": ns.name} for ns in plan.namespaces]
    for i in plan.interfaces:
        if i.netns is None and i.role == "veth":
            out.append({"op": "link", "name": i.name, "alias": i.alias})
    out += [{"op": "ovs-bridge", "name": b.name} for b in plan.ovs_bridges]
    out += [{"op": "function", "node": n, "kind": f["kind"]} for n, f in plan.functions.items()]
    return out
