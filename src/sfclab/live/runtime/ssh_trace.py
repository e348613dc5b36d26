"""``chain trace`` on hosts driven over SSH (the ``ssh`` runtime's ``trace_paths``): each step's
probe sent by the ingress's host's agent (which sets and puts back the path's TTL), the TTL
expiries read on every host (the model: :mod:`sfclab.live.ops.chains`; the probes:
:mod:`sfclab.live.chains.trace`).
"""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from ...plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ...realize.runtime.ssh import SshRuntime
from ...spec.sfc import ClassifierSpec
from ..chains.trace import probe_packet

PROBE_TRIES = 3  # tries of a step whose probe no host counted


def _trace_remote(rt: SshRuntime, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                  path: PathPlan, index: int, packet: bytes, dst: IPv4Address, wait: float
                  ) -> tuple[list[dict[str, Any]], bool]:
    """``trace`` on hosts driven over SSH: each step's probe sent by the ingress's host's
    agent (which sets and puts back the path's TTL), the TTL expiries read on every host."""
    hops_by_label = {h.label: h for h in sp.hops}

    def expired() -> dict[str, int]:
        snap = rt.data_plane(sp.node_ids)
        return {n: snap.counters(i)["ttl_expired"] for n, i in sp.node_ids.items()}

    def step(ttl: int) -> None:
        rt.probe(plan, {"index": index, "stack": path.stack, "pad": path.pad, "ttl": ttl,
                                       "restore": d.ttl, "node": d.ingress, "encap": d.encap,
                                       "packet": packet.hex(), "dst": str(dst),
                                       "wait": wait})

    hops: list[dict[str, Any]] = []
    before = expired()
    for k in range(1, len(path.stack) + 1):
        for _ in range(PROBE_TRIES):  # a probe lost on a loaded host is sent again
            step(k)
            after = expired()
            seen = [n for n in sp.node_ids if after[n] > before[n]]
            if seen:
                break
        h = hops_by_label[path.stack[k - 1]]
        hops.append({"hop": k, "label": h.label, "action": h.action, "expected": h.node,
                     "seen_at": seen[0] if seen else None})
        before = after
    last = hops_by_label[path.stack[-1]].node
    snap = rt.data_plane(sp.node_ids)
    was = snap.counters(sp.node_ids[last])["delivered"]
    step(d.ttl)
    snap = rt.data_plane(sp.node_ids)
    return hops, snap.counters(sp.node_ids[last])["delivered"] > was


def trace_over_ssh(rt: SshRuntime, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                        wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                        src: IPv4Address, dst: IPv4Address, wait: float) -> dict[str, Any]:
    """``trace`` over SSH: the slot table lives on the ingress's host, so probes are not
    hashed onto paths; each wanted path is traced by the label traceroute with the default
    probe (its TTL steps set in that path's own entry), which shows the path's hops."""
    packet, _ = probe_packet(spec, src, dst)
    probe = {"sport": spec.sport[0] if spec.sport else 40000,
             "dport": spec.dport[0] if spec.dport else 33434}
    out = []
    for p in wanted:
        hops, delivered = _trace_remote(rt, plan, sp, d, p, base + p.index, packet, dst,
                                        wait)
        out.append({"path": p.index, "nodes": p.nodes, "instances": p.instances,
                    "probe": probe, "hops": hops, "delivered": delivered,
                    "took_path": None,  # not read over SSH: the path's entry was set directly
                    "instances_seen": [h["seen_at"] for h in hops if h["action"] == "proxy"],
                    "in_order": all(h["seen_at"] == h["expected"] for h in hops)})
    return {"lab": rt.state.name, "chain": d.chain, "ingress": d.ingress, "egress": d.egress,
            "paths": out, "delivered": bool(out) and all(x["delivered"] for x in out),
            "in_order": bool(out) and all(x["in_order"] for x in out)}
