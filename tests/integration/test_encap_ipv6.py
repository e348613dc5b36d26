"""IPv6 through chains of each encapsulation (``mpls``, ``srv6``, ``nsh``) on real namespaces
(issue 28, items 1, 2 and 4): in a lab of ``ip: dual`` an IPv4 flow takes one chain (through
``f4``) and an IPv6 flow another (through ``fw6``, a firewall whose IPv6 rule drops one port):
the IPv6 firewall filters what it is handed, the functions and the egress receive plain IPv4 or
IPv6 (captured on their incoming interfaces), and the ingress sends each flow under the
encapsulation; an IPv6 flow keeps its chain through a function that loses the packet mark (a
TUN program: the proxy finds it by its IPv6 5-tuple); the classifier walks IPv6 extension
headers to the ports; and an IPv6-only lab (``ip: 6``) chains TCP both ways through an IPv6
firewall and a NAT66, traced hop by hop, and refuses a classifier of family ipv4 at its
place."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from sfclab.live.ops import chains

from .test_chain_ops import counters
from .test_encap_live import under_encap
from .test_sfc import FW, HOST, Capture, lab_dict, line, node_counters, running
from .test_sfc_family import RECEIVER, SENDER, UNTIL_SENT

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
            rx[port] = lab.popen("dst", [sys.executable, "-c", RECEIVER, str(port), *UNTIL_SENT],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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


#: a program on a TUN device: the packets it writes back have lost their packet mark
TUN = {"kind": "tun", "exec": ["{python}", "-m", "sfclab.functions.examples.tun_count"]}


@pytest.mark.parametrize("encap", ["mpls", "srv6", "nsh"])
def test_an_ipv6_flow_keeps_its_chain_through_a_function_that_loses_the_mark(encap: str
                                                                             ) -> None:
    """The TUN program's packets leave without the proxy's mark: the proxy finds their parked
    header by the IPv6 flow it handed up, and the chain goes on to f2."""
    d = lab_dict(dict(src=HOST, t=TUN, f2=FW, dst=HOST), line("src", "t", "f2", "dst"),
                 {"six": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7100,
                                           "family": "ipv6"}],
                          "functions": ["t", "f2"], "egress": "dst", "encap": encap}})
    with running({**d, "ip": "dual"}) as lab:
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7100", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        out_t = Capture(lab, "t", "eth1", 4.0)  # what t's proxy sent on toward f2
        before = node_counters(lab)
        lab.exec("src", [sys.executable, "-c", SENDER, str(lab._plan().address_of("dst", 6)),
                         "7100", "20"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        assert got == {"4": 0, "6": 20}, f"{got} {json.dumps(delta)}"  # where the rest went
        assert delta["t"]["proxy_in"] == 20 and delta["t"]["proxy_out"] == 20, delta["t"]
        assert delta["t"]["proxy_miss"] == 0, delta["t"]
        assert delta["f2"]["proxy_in"] == 20, delta["f2"]  # the chain went on after t
        frames = [x for x in out_t.frames() if x["out"] and x.get("dport") == 7100]
        assert len(frames) == 20 and all(under_encap(x, encap) for x in frames), frames[:2]


#: n UDP datagrams to (address, port), each with an IPv6 destination options header (PadN)
SENDER_DSTOPTS = r"""
import socket, sys, time
a, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
opts = bytes([0, 0, 1, 4, 0, 0, 0, 0])  # next header, length 0, PadN of 4 bytes
for _ in range(n):
    s.sendmsg([b"sfclab dstopts"], [(socket.IPPROTO_IPV6, socket.IPV6_DSTOPTS, opts)], 0,
              (a, port))
    time.sleep(0.01)
"""


def test_the_classifier_walks_ipv6_extension_headers_to_the_ports() -> None:
    """Datagrams with a destination options header are classified by their UDP ports, as
    those without one are."""
    d = lab_dict(dict(src=HOST, f1=FW, dst=HOST), line("src", "f1", "dst"),
                 {"six": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7100,
                                           "family": "ipv6"}],
                          "functions": ["f1"], "egress": "dst"}})
    with running({**d, "ip": "dual"}) as lab:
        dst6 = str(lab._plan().address_of("dst", 6))
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7100", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        wire = Capture(lab, "src", "eth0", 4.0)
        before = node_counters(lab)
        lab.exec("src", [sys.executable, "-c", SENDER, dst6, "7100", "10"])
        lab.exec("src", [sys.executable, "-c", SENDER_DSTOPTS, dst6, "7100", "10"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 0, "6": 20}, got
        assert after["src"]["classified"] - before["src"]["classified"] == 20
        assert after["f1"]["proxy_in"] - before["f1"]["proxy_in"] == 20
        # the ten with the header really carried it (next header 60 under the labels)
        sent = [x for x in wire.frames() if x["out"] and x["labels"]]
        assert sorted(x["proto"] for x in sent) == [17] * 10 + [60] * 10, sent[:2]


#: answers each TCP connection to [::]:9000 with "hello", and prints the peer's address
TCP6_SERVER = r"""
import socket
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 9000)); s.listen(4); s.settimeout(20); print("ready", flush=True)
c, peer = s.accept(); c.sendall(b"hello " * 2000); c.close(); print(peer[0], flush=True)
"""
TCP6_CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], 9000), timeout=10); got = b""
while True:
    d = c.recv(65536)
    if not d: break
    got += d
print(len(got))
"""


@pytest.mark.parametrize("encap", ["mpls", "srv6", "nsh"])
def test_an_ipv6_only_lab_chains_through_a_firewall_and_nat66(encap: str, tmp_path: Any
                                                               ) -> None:
    """``ip: 6`` with a symmetric chain through an IPv6 firewall and a NAT66: TCP both ways
    (the server sees the NAT's address), UDP filtered by the firewall's IPv6 rule, the chain
    traced hop by hop; a classifier of family ipv4 added to it later exits 2 at its place."""
    v6 = {"proto": "udp", "dport": "7100-7101", "family": "ipv6"}
    d = lab_dict(dict(src=HOST, r1={"kind": "router"}, fw=FW6,
                      nat={"kind": "nat", "outside": "dst"}, dst=HOST),
                 line("src", "r1", "fw", "nat", "dst"),
                 {"web": {"classifiers": [{"ingress": "src", "proto": "tcp", "dport": 9000,
                                           "family": "ipv6"}, {"ingress": "src", **v6}],
                          "functions": ["fw", "nat"], "egress": "dst", "symmetric": True,
                          "encap": encap}})
    with running({**d, "ip": 6}) as lab:
        plan = lab._plan()
        dst6 = str(plan.address_of("dst", 6))
        assert not [a for n in ("src", "dst") for a in plan.addresses_of(n)]  # no IPv4
        t = chains.trace(lab.name, "web")
        assert t["delivered"] and t["in_order"], t
        srv = lab.popen("dst", [sys.executable, "-c", TCP6_SERVER], stdout=subprocess.PIPE,
                        text=True)
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        before = node_counters(lab)
        got = lab.exec("src", [sys.executable, "-c", TCP6_CLIENT, dst6]).stdout.strip()
        peer = srv.communicate(timeout=30)[0].strip()
        assert got == str(len(b"hello " * 2000)), got
        assert peer in {str(a.ip) for a in plan.addresses_of("nat", 6)}, peer  # NAT66
        mid = node_counters(lab)
        for end in ("src", "dst"):  # both ways classified
            assert mid[end]["classified"] > before[end]["classified"], end
        rx = {p: lab.popen("dst", [sys.executable, "-c", RECEIVER, str(p), *UNTIL_SENT],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
              for p in (7100, 7101)}
        for r in rx.values():
            assert r.stdout is not None and r.stdout.readline().strip() == "ready"
        for port in (7100, 7101):
            lab.exec("src", [sys.executable, "-c", SENDER, dst6, str(port), "10"])
        counts = {p: json.loads(r.communicate(timeout=30)[0].strip().splitlines()[-1])
                  for p, r in rx.items()}
        assert counts == {7100: {"4": 0, "6": 10}, 7101: {"4": 0, "6": 0}}, counts
        after = node_counters(lab)
        assert after["fw"]["proxy_in"] - mid["fw"]["proxy_in"] == 20
        assert after["nat"]["proxy_in"] - mid["nat"]["proxy_in"] == 10
        f = tmp_path / "v4.json"
        f.write_text(json.dumps({"name": "v4", "egress": "dst", "encap": encap,
                                 "classifiers": [{"ingress": "src", "proto": "udp"}],
                                 "functions": [{"name": "fw", "kind": "firewall"}]}))
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "add", lab.name,
                             str(f)], capture_output=True, text=True, timeout=120)
        assert cp.returncode == 2 and "classifiers[0].family" in cp.stderr, cp.stderr
        assert "in a lab without IPv4 (ip: 6)" in cp.stderr
        more = tmp_path / "more.yaml"
        more.write_text("- {ingress: src, proto: udp, family: ipv6, dport: 7200}\n"
                        "- {ingress: src, proto: udp, dport: 7201}\n")
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "classify", lab.name,
                             "web", "--from-file", str(more)], capture_output=True, text=True,
                            timeout=120)
        assert cp.returncode == 2 and "[1].family" in cp.stderr, cp.stderr
        # a chain of family ipv6 added to the running IPv6-only lab carries its flow
        f.write_text(json.dumps({"name": "v6", "egress": "dst", "encap": encap,
                                 "attach": "r1",
                                 "classifiers": [{"ingress": "src", "proto": "udp",
                                                  "dport": 7300, "family": "ipv6"}],
                                 "functions": [{"name": "g", "kind": "firewall"}]}))
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "add", lab.name,
                             str(f)], capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
        rx7300 = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7300", *UNTIL_SENT],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx7300.stdout is not None and rx7300.stdout.readline().strip() == "ready"
        c0 = counters(lab.name)
        lab.exec("src", [sys.executable, "-c", SENDER, dst6, "7300", "10"])
        c1 = counters(lab.name)
        got = json.loads(rx7300.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 0, "6": 10}, got
        assert c1["g-1"]["proxy_in"] - c0["g-1"]["proxy_in"] == 10, c1["g-1"]


@pytest.mark.parametrize("change, place, words", [
    ({"family": "ipv5"}, "chains.c.classifiers[0].family", "'ipv4', 'ipv6' or 'any'"),
    ({"family": "ipv4"}, "chains.c.classifiers[0].family", "in a lab without IPv4 (ip: 6)"),
    ({"encap": "gre"}, "chains.c.encap", "expected one of"),
])
def test_bad_family_and_encap_exit_2_on_up_with_the_place_and_make_nothing(
        tmp_path: Any, capsys: pytest.CaptureFixture[str], change: dict[str, Any], place: str,
        words: str) -> None:
    from sfclab.cli import main

    cl = {"ingress": "src", "proto": "udp", "family": "ipv6"}
    chain = {"classifiers": [cl], "functions": ["f1"], "egress": "dst", "encap": "srv6"}
    if "family" in change:
        cl["family"] = change["family"]
    else:
        chain.update(change)
    d = {**lab_dict(dict(src=HOST, f1=FW, dst=HOST), line("src", "f1", "dst"), {"c": chain}),
         "ip": 6}
    f = tmp_path / "lab.json"
    f.write_text(json.dumps(d))
    assert main(["up", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}" in err and f"{place}: " in err and words in err, err
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert d["name"] not in listed
