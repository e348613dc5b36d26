"""A symmetric chain through a NAT shared by two tenants, then a second function: the tenancy
rules and the SFC proxy share the packet mark (include/sfc.h, :mod:`sfclab.plan.marks`), so the
parked label stack survives the shared node and the chain's hops stay in order both ways.

    a1 (red) ──┐
               nat (red, blue) ── fw ── srv
    b1 (blue) ─┘

Before the mark layout, the tenancy rules overwrote the proxy's mark at the NAT: every packet
was a proxy miss there and went on by the NAT's IP routes, unlabelled, so ``fw`` never saw it
as part of the chain.
"""

from __future__ import annotations

import secrets

from .test_sfc import echo, node_counters, running, send

N = 100


def tenant_chain_lab() -> dict:
    return {
        "name": "t" + secrets.token_hex(3),
        "tenants": {"red": {"nodes": ["a1", "nat"]}, "blue": {"nodes": ["b1", "nat"]}},
        "nodes": {"a1": {"kind": "host"}, "b1": {"kind": "host"},
                  "nat": {"kind": "nat", "outside": "fw"},
                  "fw": {"kind": "firewall", "rules": []}, "srv": {"kind": "host"}},
        "links": [{"endpoints": ["a1", "nat"]}, {"endpoints": ["b1", "nat"]},
                  {"endpoints": ["nat", "fw"]}, {"endpoints": ["fw", "srv"]}],
        "chains": {"red-web": {"classifiers": [{"ingress": "a1", "proto": "udp", "dport": 7000}],
                               "functions": ["nat", "fw"], "egress": "srv",
                               "symmetric": True}},
    }


def test_a_chain_keeps_its_stack_through_a_tenant_shared_nat() -> None:
    with running(tenant_chain_lab()) as lab:
        before = node_counters(lab)
        server = echo(lab, "srv", 7000, 8)
        answered = send(lab, "a1", str(lab.address("srv")), 41000, 7000, N)
        server.wait(timeout=30)
        after = node_counters(lab)
        d = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        assert d["nat"]["proxy_miss"] == 0, d["nat"]
        assert answered == N  # traffic passed both ways
        # forward: a1 classifies, nat then fw proxy it; reverse: srv classifies, fw then nat
        assert d["a1"]["classified"] == N and d["srv"]["classified"] == N, d
        assert d["nat"]["proxy_in"] == 2 * N and d["nat"]["proxy_out"] == 2 * N, d["nat"]
        assert d["fw"]["proxy_in"] == 2 * N and d["fw"]["proxy_out"] == 2 * N, d["fw"]
