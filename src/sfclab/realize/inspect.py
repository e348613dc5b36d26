"""``inspect``: what a lab is, read live from the kernel and OVSDB, as one JSON-ready dict.

Each node kind adds what it knows of its nodes (see the parts' ``inspect``): for a namespace
node its kind, namespace, forwarding, interfaces (state, MTU, MAC, addresses, alias, master,
offloads), routes, and a function's own ``inspect``; for an OVS bridge its name, datapath type
(and why: no kernel module means the userspace datapath) and ports.  Nodes come in lab order.
"""

from __future__ import annotations

from typing import Any

from .kinds import TABLE
from .lifecycle import load_plan


def inspect(name: str) -> dict[str, Any]:
    state, plan = load_plan(name)
    meta = state.meta()
    found: dict[str, Any] = {}
    for part in TABLE.parts():
        part.inspect(state, plan, found)
    order = [ns.node for ns in plan.namespaces] + [b.node for b in plan.ovs_bridges]
    nodes = {n: found[n] for n in order if n in found}
    return {"name": plan.lab, "status": meta.get("status"), "created": meta.get("created"),
            "source": meta.get("source"), "tag": plan.tag, "nodes": nodes,
            "segments": [{"subnet": s.subnet, "members": s.members, "bridges": s.bridges}
                         for s in plan.segments]}
