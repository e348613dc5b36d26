"""Chains of ``encap: nsh`` (RFC 8300) on real namespaces: P4-SFC's three functional tests by
NSH; the header on the wire (version 0, MD type 2, length 2, TTL down one per node, SPI the
path, SI down one per function); functions and the egress never see it; a NAT in a symmetric
chain with TCP both ways; TTL and SI expiry counted; an IPv6 flow; an MPLS chain and an NSH
chain in one lab; ``chain add`` of an NSH chain on a running lab; ``chain trace`` node by
node."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.live.ops import chains
from sfclab.realize.dataplane import DataPlane, nsh_key

from .test_sfc import (FW, HOST, ROUTER, TOPOLOGIES, Capture, echo,
                       lab_dict, line, nat_chain_lab, node_counters, running, send, steering,
                       tcp_through_the_nat_both_ways)
from .test_sfc_family import RECEIVER, SENDER, UNTIL_SENT


def nsh_chain(fns: list[str], **kw: object) -> dict:
    return {"c": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": "7000-7010"}],
                  "functions": fns, "egress": "dst", "encap": "nsh", **kw}}


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_p4sfc_functional_by_nsh(topology: str) -> None:
    """Classified flows go through every function in order and reach the egress plain; the
    functions and the egress see no NSH; unclassified traffic follows routes."""
    nodes, links, fns = TOPOLOGIES[topology]
    with running(lab_dict(nodes, links, nsh_chain(fns))) as lab:
        dst = str(lab.address("dst"))
        # the nodes in order: the header's TTL k expires at the k-th node (a function's
        # forwarder once, though it owns two labels)
        sp = steering(lab)
        owners = [sp.hops[lbl - 16].node for lbl in sp.directions[0].paths[0].stack]
        t = chains.trace(lab.name, "c")
        assert t["delivered"] and t["in_order"], t
        assert [h["seen_at"] for h in t["paths"][0]["hops"]] == \
            [n for k, n in enumerate(owners) if k == 0 or owners[k - 1] != n]
        server = echo(lab, "dst", 7005)
        ins = {f: Capture(lab, f, "eth0") for f in fns}
        at_dst = Capture(lab, "dst", "eth0")
        on_wire = Capture(lab, "src", "eth0")
        before = node_counters(lab)
        assert send(lab, "src", dst, 40000, 7005, 20) == 20
        bypass = echo(lab, "dst", 9999, 3)
        assert send(lab, "src", dst, 40001, 9999, 5) == 5
        after = node_counters(lab)
        d = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        for f in fns:
            frames = [x for x in ins[f].frames() if not x["out"]]
            assert not [x for x in frames if x["ethertype"] == 0x894F], frames[:3]
            assert len([x for x in frames if x.get("dport") == 7005 and
                        x["ethertype"] == 0x0800]) == 20, frames[:3]
            assert d[f]["proxy_in"] == 20 and d[f]["proxy_out"] == 20, d
        got = [x for x in at_dst.frames() if not x["out"] and x.get("dport") == 7005]
        assert len(got) == 20 and all(x["ethertype"] == 0x0800 for x in got)
        assert d["src"]["classified"] == 20
        # what src put on the wire: the NSH header of path 0, TTL 63, SI 255, IPv4 inside
        sent = [x for x in on_wire.frames() if x["out"] and x["ethertype"] == 0x894F]
        assert len(sent) == 20 and sent[0]["nsh"] == {"ver": 0, "ttl": 63, "len": 2, "md": 2,
                                                      "np": 1, "spi": 0, "si": 255}
        assert sent[0].get("dport") == 7005
        assert all(v[k] == 0 for v in d.values() for k in
                   ("nsh_ttl_expired", "nsh_si_expired", "nsh_unknown", "errors"))
        server.wait(timeout=30)
        bypass.wait(timeout=30)


def test_the_header_between_functions_counts_ttl_by_node_and_si_by_function() -> None:
    nodes, links, fns = TOPOLOGIES["two functions apart"]  # src f1 r1 r2 f2 dst
    with running(lab_dict(nodes, links, nsh_chain(fns, ttl=40))) as lab:
        # (what leaves by XDP redirect passes no capture tap: f1's proxy sends by tc)
        out_f1 = Capture(lab, "f1", "eth1")
        server = echo(lab, "dst", 7000, 3)
        before = node_counters(lab)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 3) == 3
        after = node_counters(lab)
        a = [x for x in out_f1.frames() if x["out"] and x["ethertype"] == 0x894F]
        assert len(a) == 3
        # one node (f1) passed: TTL 39; one function passed: SI 254; the path's SPI
        assert a[0]["nsh"] == {"ver": 0, "ttl": 39, "len": 2, "md": 2, "np": 1, "spi": 0,
                               "si": 254}
        assert a[0]["dport"] == 7000
        for n, k in (("r1", "forwarded"), ("r2", "forwarded"), ("f2", "delivered")):
            assert after[n][k] - before[n][k] == 3, (n, k, after[n])
        server.wait(timeout=30)


def test_nat_in_a_symmetric_nsh_chain_tcp_both_ways() -> None:
    with running(nat_chain_lab("nsh")) as lab:
        at_nat = Capture(lab, "nat", "eth0", 6.0)
        tcp_through_the_nat_both_ways(lab)
        seen = [x for x in at_nat.frames() if not x["out"]]
        assert [x for x in seen if x["ethertype"] == 0x0800 and x.get("dport") == 8080]
        assert not [x for x in seen if x["ethertype"] == 0x894F]


def test_ttl_and_si_expiry_are_dropped_and_counted() -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, f=FW, r2=ROUTER, dst=HOST),
                 line("src", "r1", "f", "r2", "dst"), nsh_chain(["f"], ttl=3))
    with running(d) as lab:
        server = echo(lab, "dst", 7000, 4)
        # TTL 3 at r1 (leaves with 2), 2 at f (parked with 1), 1 at r2: expires there
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 4) == 0
        c = node_counters(lab)
        assert c["r2"]["nsh_ttl_expired"] == 4 and c["f"]["proxy_in"] == 4, c
        assert c["r2"]["delivered"] == 0
        server.wait(timeout=30)
        # SI: the path's header rewritten with SI 1 reaches f's proxy, which may not lower
        # it to 0; an SI no hop has is dropped as unknown at the first node
        sp = steering(lab)
        with DataPlane(lab.name) as dp:
            raw = bytearray(dp.maps["sfc_paths"].lookup(struct.pack("<I", 0)))
            struct.pack_into(">II", raw, 20, 20 << 22 | 2 << 16 | 2 << 8, 0 << 8 | 1)
            dp.maps["sfc_paths"].update(struct.pack("<I", 0), bytes(raw))
            for node, si in (("r1", 1), ("f", 1)):  # the path's hops at SI 1 (for the test)
                good = dp.nsh_map().lookup(nsh_key(sp.node_ids[node], 0, 255))
                dp.nsh_map().update(nsh_key(sp.node_ids[node], 0, si), good)
        server = echo(lab, "dst", 7000, 4)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 3) == 0
        c = node_counters(lab)
        assert c["f"]["nsh_si_expired"] == 3 and c["r2"]["nsh_ttl_expired"] == 4, c
        with DataPlane(lab.name) as dp:
            dp.nsh_map().delete(nsh_key(sp.node_ids["r1"], 0, 1))
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 2) == 0
        assert node_counters(lab)["r1"]["nsh_unknown"] == 2
        server.wait(timeout=30)
        out = chains.inspect(lab.name, "c")["chains"]["c"]
        assert out["encap"] == "nsh" and out["directions"][0]["encap"] == "nsh"
        assert out["nodes"]["f"]["nsh_si_expired"] == 3


def test_an_ipv6_flow_through_an_nsh_chain() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, r1=ROUTER, dst=HOST), line("src", "f1", "r1", "dst"),
                 {"six": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7100,
                                           "family": "ipv6"}],
                          "functions": ["f1"], "egress": "dst", "encap": "nsh"}})
    with running({**d, "ip": "dual"}) as lab:
        dst6 = lab._plan().address_of("dst", 6)
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7100", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        at_f1 = Capture(lab, "f1", "eth0", 4.0)
        wire = Capture(lab, "f1", "eth1", 4.0)
        before = node_counters(lab)
        lab.exec("src", [sys.executable, "-c", SENDER, str(dst6), "7100", "20"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 0, "6": 20}, got
        assert after["src"]["classified"] - before["src"]["classified"] == 20
        assert after["f1"]["proxy_in"] - before["f1"]["proxy_in"] == 20
        seen = [x for x in at_f1.frames() if not x["out"] and x.get("dport") == 7100]
        assert len(seen) == 20 and all(x["ethertype"] == 0x86DD for x in seen)
        out = [x for x in wire.frames() if x["out"] and x["ethertype"] == 0x894F]
        assert len(out) == 20 and out[0]["nsh"]["np"] == 2 and out[0]["nsh"]["si"] == 254
        assert ":" in out[0]["dst"]


def test_an_mpls_chain_and_an_nsh_chain_in_one_lab() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, f2=FW, dst=HOST), line("src", "f1", "f2", "dst"),
                 {"m": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7001}],
                        "functions": ["f1", "f2"], "egress": "dst"},
                  "n": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7002}],
                        "functions": ["f2"], "egress": "dst", "encap": "nsh"}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        wire = Capture(lab, "src", "eth0")  # as the classifier sent them
        s1, s2 = echo(lab, "dst", 7001, 4), echo(lab, "dst", 7002, 4)
        before = node_counters(lab)
        assert send(lab, "src", dst, 40000, 7001, 10) == 10
        assert send(lab, "src", dst, 40000, 7002, 10) == 10
        after = node_counters(lab)
        out = [x for x in wire.frames() if x["out"]]
        assert {x["ethertype"] for x in out if x.get("dport") == 7001} == {0x8847}
        assert {x["ethertype"] for x in out if x.get("dport") == 7002} == {0x894F}
        assert after["f1"]["proxy_in"] - before["f1"]["proxy_in"] == 10
        assert after["f2"]["proxy_in"] - before["f2"]["proxy_in"] == 20
        s1.wait(timeout=30)
        s2.wait(timeout=30)


def test_chain_add_of_an_nsh_chain_on_a_running_lab(tmp_path: Path) -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, dst=HOST), line("src", "r1", "dst"),
                 {"m": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7001}],
                        "functions": [], "egress": "dst"}})
    d["chains"] = {}
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({
        "name": "v", "encap": "nsh", "egress": "dst",
        "classifiers": [{"ingress": "src", "proto": "udp", "dport": 7300}],
        "functions": [{"name": "fw", "kind": "firewall"}]}))
    with running(d) as lab:
        assert main(["chain", "add", lab.name, str(f)]) == 0
        dst = str(lab.address("dst"))
        server = echo(lab, "dst", 7300, 4)
        before = chains.inspect(lab.name, "v")["chains"]["v"]
        wire = Capture(lab, "src", "eth0")
        assert send(lab, "src", dst, 40000, 7300, 10) == 10
        after = chains.inspect(lab.name, "v")["chains"]["v"]
        assert after["encap"] == "nsh"
        for n, k in (("src", "classified"), ("fw-1", "proxy_in"), ("fw-1", "proxy_out")):
            assert after["nodes"][n][k] - before["nodes"][n][k] == 10, (n, k, after["nodes"])
        sent = [x for x in wire.frames() if x["out"] and x.get("dport") == 7300]
        assert len(sent) == 10 and all(x["ethertype"] == 0x894F for x in sent)
        server.wait(timeout=30)
        assert main(["chain", "rm", lab.name, "v"]) == 0


def test_bad_encap_exits_2_with_the_place(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    d = lab_dict(dict(src=HOST, f1=FW, dst=HOST), line("src", "f1", "dst"),
                 nsh_chain(["f1"], encap="gre"))
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["up", str(f)]) == 2
    err = capsys.readouterr().err
    assert "chains.c.encap" in err and str(f) in err
    assert subprocess.run(["ip", "netns", "list"], capture_output=True,
                          text=True).stdout.find(d["name"]) < 0
