"""The SFC data plane split over hosts that are separate machines (pure).

On emulated hosts the whole data plane is one set of maps on this machine.  On hosts driven
over SSH each host's agent builds its *share*: the programs of the nodes placed there, maps of
its own (pinned on that host under the lab's bpffs directory, one sub-directory per host,
:func:`share_dir_name`), and only the entries those nodes use: the paths, chain slots and
classifier entries of the chain directions whose ingress is there, and the labels its nodes
own.  Node ids, labels and path indexes are the lab's (the same on every host), so the
counters of a node are read on its host and a path's packet count on its ingress's host.

A label that forwards to a node on another host needs that node's interface MAC, which this
host cannot read: every interface of a chain's nodes gets a MAC derived from the lab, node and
interface names (:func:`interface_mac`, locally administered), set by its host's agent before
the tables are written, so every host computes every other host's MACs.

An SRv6 chain writes its labels as SIDs, and a SID names the label's owner
(:mod:`.srv6`): the classifier writing a path's segment list, and a proxy putting back the
SIDs after its function, look every label's owner up in ``sfc_labels``.  So a host's share
also holds, for each SRv6 path that visits one of its nodes, the other hosts' labels of that
path (:func:`foreign_sid_labels`), written with their owner and action only (no interface): the
forwarder drops a frame whose active label is another node's, as it would a label it lacks.
"""

from __future__ import annotations

import hashlib

from collections.abc import Iterable

from .model import HostPlan, Plan
from .steering import DirectionPlan, Hop, SteeringPlan


def remote_host(plan: Plan) -> HostPlan | None:
    """The host of a host's part built by its agent (one host, not emulated), else None."""
    if len(plan.hosts) == 1 and not plan.hosts[0].emulated:
        return plan.hosts[0]
    return None


def interface_mac(lab: str, node: str, ifname: str) -> bytes:
    """The MAC of interface ``ifname`` of chain node ``node``: locally administered, unicast,
    the same on every host."""
    digest = hashlib.sha256(f"{lab}/{node}/{ifname}".encode()).digest()
    return bytes([0x02]) + digest[:5]


def addressed(hops: Iterable[Hop], directions: Iterable[DirectionPlan]) -> set[tuple[str, str]]:
    """The chain nodes' interfaces (node, interface) that ``hops`` and ``directions`` address:
    each label's own and next interface, each path's first (at its ingress) and its next
    node's: those whose MAC another host writes into its tables."""
    out: set[tuple[str, str]] = set()
    for h in hops:
        out |= {(h.node, h.ifname or ""), (h.next or "", h.next_ifname or "")}
    for d in directions:
        for p in d.paths:
            out |= {(d.ingress, p.ifname), (p.next, p.next_ifname)}
    return {(n, i) for n, i in out if n and i}


def share_dir_name(host: str) -> str:
    """The host's sub-directory of the lab's bpffs directory (hosts sharing one bpffs, as the
    tests' emulated machines do, do not meet)."""
    return f"@{host}"


def owner_hosts(plan: Plan, steering: SteeringPlan) -> dict[str, str]:
    """Every chain node -> the host it is placed on."""
    where = {n: h.name for h in plan.hosts for n in h.nodes}
    return {n: where[n] for n in steering.node_ids if n in where}


def foreign_sid_labels(steering: SteeringPlan, local: set[str],
                       directions: list[DirectionPlan] | None = None) -> list[Hop]:
    """The labels owned outside ``local`` that a share of ``local``'s nodes needs to write the
    SIDs of the SRv6 paths (of ``directions``, else every direction) that visit one of its
    nodes (the ingress, a forwarder, a function), each once."""
    owner = {h.label: h for h in steering.hops}
    out: dict[int, Hop] = {}
    for d in steering.directions if directions is None else directions:
        if d.encap != "srv6":
            continue
        for p in d.paths:
            if not local & {d.ingress, *p.nodes}:
                continue
            for lbl in p.stack:
                h = owner.get(lbl)
                if h is not None and h.node not in local:
                    out.setdefault(lbl, h)
    return list(out.values())
