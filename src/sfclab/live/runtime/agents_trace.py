"""``chain trace`` on hosts driven by their agents (the ``ssh`` and ``kubernetes`` runtimes'
``trace_paths``, :mod:`.agents`): each step's
probe sent by the ingress's host's agent (which sets the path's TTL and puts it back once the
probe has taken the path), the TTL expiries read on every host until one is seen or the wait
has passed; a step no host counted is probed again, :data:`PROBE_TRIES` times at most, and so
is the last probe until the egress counts it delivered (the model:
:mod:`sfclab.live.ops.chains`; the probes: :mod:`sfclab.live.chains.trace`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, Any, TypeVar

from ...plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ...realize.runtime.agents import AgentHosts
from ...plan.encap import encap_of, trace_steps
from ..chains.trace import hop_row, probe_packet

if TYPE_CHECKING:  # light start-up: the agents load no chain-file models
    from ...spec.sfc import ClassifierSpec

PROBE_TRIES = 3  # tries of a step whose probe no host counted

T = TypeVar("T")


def _until(wait: float, look: Callable[[], T]) -> T:
    """``look()`` (one read of every host) until it is true or ``wait`` seconds have passed,
    at least once: a probe is counted at once on an idle machine, later on a loaded one."""
    deadline = time.monotonic() + wait
    while True:
        got = look()
        if got or time.monotonic() >= deadline:
            return got


def _trace_remote(rt: AgentHosts, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                  path: PathPlan, index: int, packet: bytes, dst: IPv4Address | IPv6Address,
                  wait: float
                  ) -> tuple[list[dict[str, Any]], bool]:
    """``trace`` on hosts driven by their agents: each step's probe sent by the ingress's host's
    agent (which sets the path's TTL and puts it back once the probe took the path), the TTL
    expiries read on every host until one has grown (up to ``wait`` seconds)."""
    hops_by_label = {h.label: h for h in sp.hops}
    last = sp.node_ids[hops_by_label[path.stack[-1]].node]

    counter = encap_of(d.encap).ttl_counter

    def expired() -> dict[str, int]:
        snap = rt.data_plane(sp.node_ids)
        return {n: snap.counters(i)[counter] for n, i in sp.node_ids.items()}

    def step(ttl: int) -> None:
        rt.probe(plan, {"index": index, "stack": path.stack, "pad": path.pad, "ttl": ttl,
                                       "restore": d.ttl, "node": d.ingress, "encap": d.encap,
                                       "packet": packet.hex(), "dst": str(dst),
                                       "wait": wait})

    def delivered() -> int:
        return rt.data_plane(sp.node_ids).counters(last)["delivered"]

    before = after = expired()

    def counted() -> list[str]:
        nonlocal after
        after = expired()
        return [n for n in sp.node_ids if after[n] > before[n]]

    hops: list[dict[str, Any]] = []
    for ttl, at in trace_steps(d.encap, path.stack,
                               {lbl: hops_by_label[lbl].node for lbl in path.stack}):
        seen: list[str] = []
        for _ in range(PROBE_TRIES):  # a probe lost on a loaded host is sent again
            step(ttl)
            seen = _until(wait, counted)
            if seen:
                break
        hops.append(hop_row(ttl, hops_by_label[path.stack[at]], seen))
        before = after
    was = delivered()
    arrived = False
    for _ in range(PROBE_TRIES):  # the last probe too: one lost on a loaded host is sent again
        step(d.ttl)
        arrived = _until(wait, lambda: delivered() > was)
        if arrived:
            break
    return hops, arrived


def trace_through_agents(rt: AgentHosts, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                         wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                         src: IPv4Address | IPv6Address, dst: IPv4Address | IPv6Address,
                         wait: float) -> dict[str, Any]:
    """``trace`` through the hosts' agents: the slot table lives on the ingress's host, so probes are not
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
                    "took_path": None,  # not read there: the path's entry was set directly
                    "instances_seen": [h["seen_at"] for h in hops if h["action"] == "proxy"],
                    "in_order": all(h["seen_at"] == h["expected"] for h in hops)})
    return {"lab": rt.state.name, "chain": d.chain, "ingress": d.ingress, "egress": d.egress,
            "paths": out, "delivered": bool(out) and all(x["delivered"] for x in out),
            "in_order": bool(out) and all(x["in_order"] for x in out)}
