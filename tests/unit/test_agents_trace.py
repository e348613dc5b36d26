"""``chain trace`` through hosts' agents (:mod:`sfclab.live.runtime.agents_trace`), without
root: the agents faked behind the runtime's two calls the trace makes (``probe``, and
``data_plane`` for the counters), the plan a real one.  A probe a loaded host loses is sent
again, the last one (the one that should be delivered) too: a person's ``chain trace`` on a
loaded machine said "delivered: no" of a path that delivers."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from sfclab.live.runtime import agents_trace as T
from sfclab.plan.encap import encap_of, trace_steps
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

from .test_sfc_plan import chain, lab


class Agents:
    """Hosts that count each probe where its TTL ends, losing the first ``lose`` probes that
    should be delivered."""

    def __init__(self, sp: Any, path: Any, d: Any, lose: int):
        self.counter = encap_of(d.encap).ttl_counter
        self.counts = {i: {self.counter: 0, "delivered": 0} for i in sp.node_ids.values()}
        by_label = {h.label: h for h in sp.hops}
        self.at = {ttl: sp.node_ids[by_label[path.stack[at]].node]
                   for ttl, at in trace_steps(d.encap, path.stack,
                                              {lb: by_label[lb].node for lb in path.stack})}
        self.last = sp.node_ids[by_label[path.stack[-1]].node]
        self.d, self.lose, self.sent_last = d, lose, 0

    def probe(self, plan: Any, req: dict[str, Any]) -> None:
        if req["ttl"] == self.d.ttl:
            self.sent_last += 1
            if self.sent_last > self.lose:
                self.counts[self.last]["delivered"] += 1
        else:
            self.counts[self.at[req["ttl"]]][self.counter] += 1

    def data_plane(self, node_ids: dict[str, int]) -> Any:
        counts = {i: dict(c) for i, c in self.counts.items()}

        class Snap:
            def counters(self, i: int) -> dict[str, int]:
                return counts[i]
        return Snap()


def _traced(lose: int) -> tuple[list[dict[str, Any]], bool, Agents]:
    plan = plan_for(load_lab_dict(lab(chain(), n_routers=2)))
    sp = plan.steering
    d = sp.directions[0]
    path = d.paths[0]
    rt = Agents(sp, path, d, lose)
    hops, delivered = T._trace_remote(rt, plan, sp, d, path, 0, b"", ip_address("198.18.0.9"),
                                      0.0)
    return hops, delivered, rt


def test_every_hop_is_seen_where_it_is_planned_and_the_probe_delivered() -> None:
    hops, delivered, rt = _traced(lose=0)
    assert delivered and rt.sent_last == 1
    assert all(h["seen_at"] == h["expected"] for h in hops), hops


def test_a_last_probe_lost_is_sent_again_and_a_path_that_delivers_says_so() -> None:
    _, delivered, rt = _traced(lose=T.PROBE_TRIES - 1)
    assert delivered and rt.sent_last == T.PROBE_TRIES
    _, delivered, rt = _traced(lose=T.PROBE_TRIES)  # lost every time: not delivered
    assert not delivered and rt.sent_last == T.PROBE_TRIES
