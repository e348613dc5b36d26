"""SRv6 service programming (``encap: srv6``, issue 28 item 3) on real namespaces: the P4-SFC
paper's three functional tests, functions and the egress that never see the outer header or
the SRH (by capture of their incoming frames), the SRH on the wire between two functions, a NAT
in a symmetric chain with TCP both ways, an IPv4 and an IPv6 flow each through an SRv6 chain,
hop limit expiry counted, an MPLS chain beside an SRv6 chain in one lab, and ``chain add`` of
an SRv6 chain to a running lab."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sfclab.live import request
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import chains
from sfclab.plan import srv6

from .test_chain_ops import counters as live_counters
from .test_sfc import (FW, HOST, ROUTER, TOPOLOGIES, Capture, echo,
                       lab_dict, line, nat_chain_lab, node_counters, running, send, steering,
                       tcp_through_the_nat_both_ways)
from .test_sfc_family import RECEIVER, SENDER, UNTIL_SENT


def live_plan(lab: str) -> Any:
    """The steering plan as the lab's state holds it now (after ``chain add``)."""
    from sfclab.realize import lifecycle

    return lifecycle.load_plan(lab)[1].steering


def srv6_chain(fns: list[str], **more: Any) -> dict[str, Any]:
    return {"classifiers": [{"ingress": "src", "proto": "udp", "dport": "7000-7010"}],
            "functions": fns, "egress": "dst", "encap": "srv6", **more}


def incoming(cap: Capture) -> list[dict[str, Any]]:
    return [x for x in cap.frames() if not x["out"]]


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_p4sfc_functional_by_srv6(topology: str) -> None:
    nodes, links, fns = TOPOLOGIES[topology]
    with running(lab_dict(nodes, links, {"c": srv6_chain(fns)})) as lab:
        dst = str(lab.address("dst"))
        sp = steering(lab)
        assert sp.directions[0].encap == "srv6"
        path = sp.directions[0].paths[0]
        # the hops in order: hop limit k expires at the k-th SID's node
        t = chains.trace(lab.name, "c")
        assert t["delivered"] and t["in_order"], t
        assert [h["seen_at"] for h in t["paths"][0]["hops"]] == \
            [sp.hops[lbl - 16].node for lbl in path.stack]
        server = echo(lab, "dst", 7005)
        ins = {f: Capture(lab, f, "eth0") for f in fns}
        at_dst = Capture(lab, "dst", "eth0")
        at_src = Capture(lab, "src", "eth0")
        before = node_counters(lab)
        assert send(lab, "src", dst, 40000, 7005, 20) == 20
        bypass = echo(lab, "dst", 9999, 3)
        assert send(lab, "src", dst, 40001, 9999, 5) == 5
        after = node_counters(lab)
        for f in fns:
            frames = incoming(ins[f])
            assert frames and all(x["ethertype"] == 0x0800 and "srh" not in x
                                  for x in frames), frames[:3]
            assert after[f]["proxy_in"] - before[f]["proxy_in"] == 20
        got = [x for x in incoming(at_dst) if x.get("dport") == 7005]
        assert len(got) == 20 and all(x["ethertype"] == 0x0800 and "srh" not in x
                                      for x in got), got[:3]
        assert after["src"]["classified"] - before["src"]["classified"] == 20
        # on the wire out of the ingress: H.Encaps, every SID of the path, the first active
        owner = {h.label: sp.node_ids[h.node] for h in sp.hops}
        sent = [x for x in at_src.frames() if x["out"] and x.get("dport") == 7005]
        assert len(sent) == 20 and all("srh" in x for x in sent), sent[:3]
        srh = sent[0]["srh"]
        assert srh["segments"] == [str(s) for s in srv6.segment_list(path.stack, owner)]
        assert srh["segments_left"] == len(path.stack) - 1 and srh["hop_limit"] == 64
        assert srh["dst"] == srh["segments"][-1]
        server.wait(timeout=30)
        bypass.wait(timeout=30)


def test_the_srh_on_the_wire_between_two_functions() -> None:
    """Out of f1 toward f2 the frames carry an outer IPv6 header and an SRH holding the SIDs
    still to come (f2's proxy active), the hop limit down by one per SID done."""
    nodes, links, fns = TOPOLOGIES["two functions side by side"]
    with running(lab_dict(nodes, links, {"c": srv6_chain(fns, ttl=50)})) as lab:
        sp = steering(lab)
        path = sp.directions[0].paths[0]
        owner = {h.label: sp.node_ids[h.node] for h in sp.hops}
        out = Capture(lab, "f1", "eth1")
        server = echo(lab, "dst", 7000, 3)
        send(lab, "src", str(lab.address("dst")), 40000, 7000, 3)
        sent = [x for x in out.frames() if x["out"] and "srh" in x]
        assert len(sent) == 3, sent
        srh = sent[0]["srh"]
        # src encapsulated 4 SIDs (f1 proxy, f1 forward, f2 proxy, f2 forward); f1 used two
        rest = [str(s) for s in srv6.segment_list(path.stack[2:], owner)]
        assert srh["segments"] == rest and srh["segments_left"] == 1
        assert srh["dst"] == str(srv6.sid(sp.node_ids["f2"], path.stack[2]))
        assert srh["hop_limit"] == 48 and srh["next_header"] == 4
        assert sent[0]["ethertype"] == 0x86DD and sent[0]["dport"] == 7000
        server.wait(timeout=30)


def test_nat_in_a_symmetric_srv6_chain_tcp_both_ways() -> None:
    with running(nat_chain_lab("srv6")) as lab:
        out_src = Capture(lab, "src", "eth0", 6.0)
        out_dst = Capture(lab, "dst", "eth0", 6.0)
        before, after = tcp_through_the_nat_both_ways(lab)
        assert after["r2"]["forwarded"] > before["r2"]["forwarded"]
        # both directions left their ingress under an SRH, the replies from the server's port
        fwd = [x for x in out_src.frames() if x["out"] and x.get("dport") == 8080]
        rev = [x for x in out_dst.frames() if x["out"] and x.get("sport") == 8080]
        assert fwd and rev and all("srh" in x for x in fwd + rev), (fwd[:2], rev[:2])


def test_an_ipv4_and_an_ipv6_flow_each_through_an_srv6_chain() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, f2=FW, dst=HOST), line("src", "f1", "f2", "dst"),
                 {"four": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7100,
                                            "family": "ipv4"}],
                           "functions": ["f1"], "egress": "dst", "encap": "srv6"},
                  "six": {"classifiers": [{"ingress": "src", "proto": "udp",
                                           "dst": "2001:2::/32", "dport": 7100}],
                          "functions": ["f2"], "egress": "dst", "encap": "srv6"}})
    with running({**d, "ip": "dual"}) as lab:
        dst6 = lab._plan().address_of("dst", 6)
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7100", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        at_f2 = Capture(lab, "f2", "eth0", 5.0)
        at_dst = Capture(lab, "dst", "eth0", 5.0)
        at_src = Capture(lab, "src", "eth0", 5.0)
        before = node_counters(lab)
        for dst in (str(lab.address("dst")), str(dst6)):
            lab.exec("src", [sys.executable, "-c", SENDER, dst, "7100", "20"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 20, "6": 20}, got
        delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        assert delta["src"]["classified"] == 40, delta
        assert delta["f1"]["proxy_in"] == 20 and delta["f2"]["proxy_in"] == 20, delta
        six_in = [x for x in incoming(at_f2) if x.get("dport") == 7100 and
                  ":" in x.get("dst", "")]
        assert len(six_in) == 20 and all(x["ethertype"] == 0x86DD and "srh" not in x
                                         for x in six_in), six_in[:3]
        at = [x for x in incoming(at_dst) if x.get("dport") == 7100]
        assert sorted({x["ethertype"] for x in at}) == [0x0800, 0x86DD], at[:3]
        assert all("srh" not in x for x in at)
        # H.Encaps of either family: next header 4 (IPv4 inside) and 41 (IPv6 inside)
        sent = [x for x in at_src.frames() if x["out"] and x.get("dport") == 7100]
        assert len(sent) == 40 and all("srh" in x for x in sent), sent[:2]
        assert sorted(x["srh"]["next_header"] for x in sent) == [4] * 20 + [41] * 20


def test_hop_limit_expiry_drops_and_counts() -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, f=FW, r2=ROUTER, dst=HOST),
                 line("src", "r1", "f", "r2", "dst"),
                 {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}], "functions": ["f"],
                        "egress": "dst", "ttl": 3, "encap": "srv6"}})
    with running(d) as lab:
        server = echo(lab, "dst", 7000, 4)
        # SIDs: r1 (hop limit 3), f proxy (2), f forward (1: expires)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 4) == 0
        c = node_counters(lab)
        assert c["f"]["ttl_expired"] == 4 and c["f"]["proxy_in"] == 4
        assert c["r1"]["forwarded"] == 4 and c["r2"]["popped"] == 0
        server.wait(timeout=30)


def test_an_mpls_chain_and_an_srv6_chain_in_one_lab() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, f2=FW, dst=HOST), line("src", "f1", "f2", "dst"),
                 {"m": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                        "functions": ["f1", "f2"], "egress": "dst"},
                  "s": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 8000}],
                        "functions": ["f1", "f2"], "egress": "dst", "encap": "srv6"}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        between = Capture(lab, "f1", "eth1", 5.0)
        sm, ss = echo(lab, "dst", 7000, 4), echo(lab, "dst", 8000, 4)
        before = node_counters(lab)
        assert send(lab, "src", dst, 40000, 7000, 6) == 6
        assert send(lab, "src", dst, 40001, 8000, 9) == 9
        after = node_counters(lab)
        assert after["f2"]["proxy_in"] - before["f2"]["proxy_in"] == 15
        out = [x for x in between.frames() if x["out"] and x.get("sport") in (40000, 40001)]
        by_port = {p: {x["ethertype"] for x in out if x["dport"] == p} for p in (7000, 8000)}
        assert by_port == {7000: {0x8847}, 8000: {0x86DD}}, by_port
        sm.wait(timeout=30)
        ss.wait(timeout=30)


def test_chain_add_of_an_srv6_chain_on_a_running_lab(tmp_path: Path) -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, f1=FW, dst=HOST), line("src", "r1", "f1", "dst"),
                 {"base": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7999}],
                           "functions": ["f1"], "egress": "dst"}})
    body = {"name": "video", "attach": "r1", "encap": "srv6",
            "classifiers": [{"ingress": "src", "proto": "udp", "dport": "5000-5010"}],
            "egress": "dst",
            "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.1}]}
    f = tmp_path / "video.json"
    f.write_text(json.dumps(body))
    with running(d) as lab:
        got = chain_add.add_chain(request.read_chain_file(lab.name, str(f)))
        assert set(got["instances"]) == {"fw-1"}
        at_fw = Capture(lab, "fw-1", "eth0", 4.0)
        at_src = Capture(lab, "src", "eth0", 4.0)
        server = echo(lab, "dst", 5005, 3)
        before = live_counters(lab.name)
        assert send(lab, "src", str(lab.address("dst")), 41000, 5005, 10) == 10
        after = live_counters(lab.name)
        server.wait(timeout=30)
        assert next(d for d in live_plan(lab.name).directions
                    if d.chain == "video").encap == "srv6"
        assert after["fw-1"]["proxy_in"] - before["fw-1"]["proxy_in"] == 10
        frames = [x for x in incoming(at_fw) if x.get("dport") == 5005]
        assert len(frames) == 10 and all("srh" not in x for x in frames)
        sent = [x for x in at_src.frames() if x["out"] and x.get("dport") == 5005]
        assert len(sent) == 10 and all("srh" in x for x in sent), sent[:2]
        rm = chain_add.remove_chain(request.RemoveChain(lab.name, "video"))
        assert rm["errors"] == []
