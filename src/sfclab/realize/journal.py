"""What the journal says a plan will make: one entry per object that outlives a namespace.

Interfaces inside lab namespaces need no entry of their own: they disappear with the namespace.
Entries: ``netns`` (name), ``link`` (a root-namespace interface: name and alias mark),
``ovs-bridge`` (name), ``function`` (node and kind: its ``stop`` runs at ``down``).
"""

from __future__ import annotations

from typing import Any

from ..plan.model import Plan
from ..plan.names import STAGING_NODE, netns_name


def entries(plan: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"op": "netns", "name": ns.name} for ns in plan.namespaces]
    roots = [i for v in plan.veths for i in (v.a, v.b) if i.netns is None]
    if roots:
        out.append({"op": "netns", "name": netns_name(plan.lab, STAGING_NODE)})
    out += [{"op": "link", "name": i.name, "alias": i.alias} for i in roots]
    out += [{"op": "ovs-bridge", "name": b.name} for b in plan.ovs_bridges]
    out += [{"op": "function", "node": n, "kind": f["kind"]} for n, f in plan.functions.items()]
    return out
