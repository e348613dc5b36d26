"""``inspect``: what a lab is, read live from the kernel and OVSDB, as one JSON-ready dict.

Each node kind adds what it knows of its nodes (see the parts' ``inspect``): for a namespace
node its kind, namespace, forwarding, interfaces (state, MTU, MAC, addresses, alias, master,
offloads), routes, and a function's own ``inspect``, its host and tenants; in a lab of ``ip: 6``
or ``dual`` also each interface's ``addresses6``, the IPv6 routes (``"family": 6``), IPv6
forwarding and each segment's ``subnet6``; for an OVS bridge its name, datapath type
(and why: no kernel module means the userspace datapath) and ports.  Nodes come in lab order.  A lab with hosts also shows each host (context, underlay
address, CPUs, memory, nodes), the underlay (and how tunnels fit its MTU) and every hosted link
(attach kind, VNI, MTU, rate, tenant, ends); a lab with tenants, each tenant's nodes.

A lab-file function node that ``chain migrate`` moved (:mod:`.moved`) is shown as what it is
now: kind ``transit``, ``moved_to`` its clone, ``was`` its old kind; the clone, a function
node of that kind, says which node it ``stands_for``.
"""

from __future__ import annotations

from typing import Any

from . import moved
from .hosts import inspect_hosts, inspect_links
from .lifecycle import load_plan
from .runtime import runtime_for


def inspect(name: str) -> dict[str, Any]:
    state, plan = load_plan(name)
    meta = state.meta()
    found: dict[str, Any] = {}
    rt = runtime_for(state)
    rt.inspect(plan, found)
    order = [ns.node for ns in plan.namespaces] + [b.node for b in plan.ovs_bridges]
    nodes = {n: found[n] for n in order if n in found}
    for n, entry in nodes.items():
        host = plan.host_of(n)
        if host is not None:
            entry["host"] = host.name
        if plan.tenants:
            entry["tenants"] = plan.tenants_of(n)
    out: dict[str, Any] = {"name": plan.lab, "status": meta.get("status"), "created": meta.get("created"),
           "source": meta.get("source"), "tag": plan.tag, "nodes": nodes,
           "segments": [{"subnet": s.subnet, "members": s.members, "bridges": s.bridges,
                         **({"subnet6": s.subnet6} if s.subnet6 else {})}
                        for s in plan.segments]}
    if plan.ip != "4":
        out["ip"] = plan.ip
    if plan.hosts or plan.host_links:
        out["hosts"] = inspect_hosts(plan)
        out["underlay"] = {"netns": plan.underlay.netns, "subnet": plan.underlay.subnet,
                           "mtu": plan.underlay.mtu, "mtu_note": plan.underlay.mtu_note} \
            if plan.underlay else None
        out["host_links"] = inspect_links(plan, live=rt.here)
    if plan.tenants:
        out["tenants"] = plan.tenants
    rt.inspect_far(out)  # over SSH: each host's part read live there, by its agent
    out["nodes"] = {n: out["nodes"][n] for n in order if n in out["nodes"]}
    for n, entry in out["nodes"].items():
        if plan.tenants:
            entry["tenants"] = plan.tenants_of(n)
    _show_moved(moved.moved_nodes(state), out["nodes"])
    return out


def _show_moved(clones: dict[str, str], nodes: dict[str, Any]) -> None:
    """Migrated lab-file nodes as transit nodes, their clones as the functions."""
    for node, clone in clones.items():
        if node in nodes:
            entry = nodes[node]
            entry["was"] = entry.get("kind")
            entry["kind"] = moved.TRANSIT
            entry["moved_to"] = clone
            entry.pop("function", None)
        if clone in nodes:
            nodes[clone]["stands_for"] = node
