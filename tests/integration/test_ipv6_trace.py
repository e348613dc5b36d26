"""``chain trace`` of a chain whose classifier is of family ipv6, in a dual-stack lab on real
namespaces: the probes are IPv6 packets from the
ingress's IPv6 address to the egress's, hashed onto each path of a two-instance group as the
classifier hashes IPv6 (the addresses folded to one word), and each path's label traceroute
sees its instance and delivers the probe, both directions of a symmetric chain."""

from __future__ import annotations

from sfclab.live.ops import chains

from .test_chain_ops import running
from .test_chain_trace import pool_lab


def test_trace_of_an_ipv6_chain_follows_each_path(lab_name: str) -> None:
    d = pool_lab(lab_name, True)
    d["chains"]["web"]["classifiers"] = [{"ingress": "src", "proto": "udp", "family": "ipv6",
                                          "dport": "7000-7100"}]
    with running({**d, "ip": "dual"}) as lab:
        t = chains.trace(lab.name, "web")
        assert t["delivered"] and t["in_order"], t
        assert len(t["paths"]) == 4
        for p in t["paths"]:
            assert p["took_path"] and p["delivered"], p
            assert p["instances_seen"] == p["instances"], p
        fwd = [p for p in t["paths"] if not p["reverse"]]
        assert {p["instances_seen"][0] for p in fwd} == {"fw1", "fw2"}
