"""Dual-stack chains by each encapsulation on real namespaces (issue 28, item 4): in one lab of
``ip: dual``, an IPv4 flow takes one chain (through ``f4``) and an IPv6 flow another (through
``fw6``, a firewall whose IPv6 rule drops one port), both by ``mpls``, ``srv6`` or ``nsh``; the
IPv6 firewall filters the IPv6 flow it is handed, the functions and the egress receive plain
IPv4 or IPv6 (captured on their incoming interfaces), and the ingress sends each flow under
the encapsulation."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from .test_encap_live import under_encap
from .test_sfc import FW, HOST, Capture, lab_dict, line, node_counters, running
from .test_sfc_family import RECEIVER, SENDER

#: an IPv6 firewall: drops UDP to port 7101 of the lab's IPv6 addresses, passes the rest
FW6 = {"kind": "firewall", "rules": [{"action": "drop", "proto": "udp", "dst": "2001:2::/48",
                                      "dport": 7101}]}


def incoming(cap: Capture) -> list[dict[str, Any]]:
    return [x for x in cap.frames() if not x["out"] and x.get("dport") in (7100, 7101)]


def family(x: dict[str, Any]) -> int:
    return 6 if ":" in x.get("dst", "") else 4


@pytest.mark.parametrize("encap", ["mpls", "srv6", "nsh"])
def test_ipv4_and_ipv6_flows_take_their_chains_through_an_ipv6_firewall(encap: str) -> None:
    udp = {"ingress": "src", "proto": "udp", "dport": "7100-7101"}
    d = lab_dict(dict(src=HOST, f4=FW, fw6=FW6, dst=HOST), line("src", "f4", "fw6", "dst"),
                 {"four": {"classifiers": [{**udp, "family": "ipv4"}], "functions": ["f4"],
                           "egress": "dst", "encap": encap},
                  "six": {"classifiers": [{**udp, "family": "ipv6"}], "functions": ["fw6"],
                          "egress": "dst", "encap": encap}})
    with running({**d, "ip": "dual"}) as lab:
        dst4, dst6 = str(lab.address("dst")), str(lab._plan().address_of("dst", 6))
        rx = {}
        for port in (7100, 7101):
            rx[port] = lab.popen("dst", [sys.executable, "-c", RECEIVER, str(port), "8"],
                                 stdout=subprocess.PIPE, text=True)
            assert rx[port].stdout is not None
            assert rx[port].stdout.readline().strip() == "ready"
        caps = {n: Capture(lab, n, "eth0", 7.0) for n in ("f4", "fw6", "dst")}
        wire = Capture(lab, "src", "eth0", 7.0)
        before = node_counters(lab)
        for dst, port, n in ((dst4, 7100, 20), (dst6, 7100, 20), (dst4, 7101, 10),
                             (dst6, 7101, 10)):
            lab.exec("src", [sys.executable, "-c", SENDER, dst, str(port), str(n)])
        after = node_counters(lab)
        got = {p: json.loads(r.communicate(timeout=30)[0].strip().splitlines()[-1])
               for p, r in rx.items()}
        # the IPv6 firewall dropped the IPv6 flow to 7101, and nothing else
        assert got == {7100: {"4": 20, "6": 20}, 7101: {"4": 10, "6": 0}}, got
        delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        assert delta["src"]["classified"] == 60, delta["src"]
        assert delta["f4"]["proxy_in"] == 30 and delta["f4"]["proxy_out"] == 30, delta["f4"]
        assert delta["fw6"]["proxy_in"] == 30 and delta["fw6"]["proxy_out"] == 20, delta["fw6"]
        # each function got its own family, plain; the egress both, plain
        at = {n: incoming(c) for n, c in caps.items()}
        assert len(at["f4"]) == 30 and {(x["ethertype"], family(x)) for x in at["f4"]} == \
            {(0x0800, 4)}, at["f4"][:3]
        assert len(at["fw6"]) == 30 and {(x["ethertype"], family(x)) for x in at["fw6"]} == \
            {(0x86DD, 6)}, at["fw6"][:3]
        assert {(x["ethertype"], family(x)) for x in at["dst"]} == {(0x0800, 4), (0x86DD, 6)}
        assert len(at["dst"]) == 50
        for x in at["f4"] + at["fw6"] + at["dst"]:
            assert not x["labels"] and "srh" not in x and "nsh" not in x, x
        sent = [x for x in wire.frames() if x["out"] and x.get("dport") in (7100, 7101)]
        assert len(sent) == 60 and all(under_encap(x, encap) for x in sent), sent[:3]
        assert sorted(family(x) for x in sent) == [4] * 30 + [6] * 30
