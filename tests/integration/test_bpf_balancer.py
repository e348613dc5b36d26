"""The bpf-balancer against its kernel twin (``balancer``, nftables DNAT) on real namespaces:
3,000 UDP flows (one client port each) to the VIP through the same symmetric chain; every flow
reaches exactly one backend, the shares follow the weights, every reply reaches the client from
the VIP (un-NATed on the labelled way back), and the per-backend counters of ``inspect`` and
``chain inspect`` are what the backends counted; the same to an IPv6 VIP over IPv6 backends in a
dual-stack lab, with the checksums right over the IPv6 pseudo-header.  Then the Maglev table's
consistency with the eBPF one: a backend taken out moves only its own flows, one added takes
only its share, and established connections stay on their backend when the table changes."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import pytest

from sfclab.api import Lab
from sfclab.errors import SpecError
from sfclab.functions import bpf_balancer_maps as M
from sfclab.plan.flowhash import flow_hash
from sfclab.realize.dataplane import lab_dir

from . import test_bpf_nat as N
from .labtools import dual_stack
from .test_sfc import node_counters

CLIENT = "10.92.1.2"
VIP, PORT = "10.92.9.10", 5000
BACKENDS = ("10.92.5.2", "10.92.6.2", "10.92.7.2", "10.92.8.2")
FLOWS = 3000
#: the same in IPv6, in a dual-stack lab (10.92.X.Y is also 2001:2:92:X::Y)
CLIENT6, VIP6 = "2001:2:92:1::2", "2001:2:92:9::10"
BACKENDS6 = ("2001:2:92:5::2", "2001:2:92:6::2", "2001:2:92:7::2", "2001:2:92:8::2")

#: a backend: echoes every datagram with its own address (of either family: it listens on that
#: one); at the end (a 'stop' from 127.0.0.1), the packets and the client ports it saw
ECHO = r"""
import json, socket, sys, time
me = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ":" in me else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
if ":" in me:  # the stop comes by IPv4 all the same
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::" if ":" in me else "0.0.0.0", int(sys.argv[2])))
print("ready", flush=True)
seen, packets, end = {}, 0, time.monotonic() + float(sys.argv[3])
stopping = False
while time.monotonic() < end:
    try:
        data, peer = s.recvfrom(2048)
    except socket.timeout:  # quiet for 0.5 s after the stop: nothing is still on its way
        break
    if peer[0] in ("127.0.0.1", "::ffff:127.0.0.1") and data == b"stop":
        # a flow's last try may still be crossing the chain (sent before its reply came
        # back): take in what arrives until the path is quiet, so it is counted here as it was
        # by the balancer
        stopping = True
        s.settimeout(0.5)
        continue
    packets += 1
    seen[peer[1]] = peer[0]
    if not stopping:
        s.sendto(me.encode(), peer)
print(json.dumps({"packets": packets, "flows": seen}), flush=True)
"""

#: the client: one flow per source port, in batches; a flow is sent again (the same 5-tuple)
#: until its reply comes (WAIT s, default 1), up to 5 times; prints {port: [reply source, backend
#: named]}
CLIENT_PROG = r"""
import json, selectors, socket, sys, time
vip, port, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
wait = float(sys.argv[5]) if sys.argv[5:] else 1.0  # for the answers to each try
fam, any_addr = (socket.AF_INET6, "::") if ":" in vip else (socket.AF_INET, "0.0.0.0")
got, batch = {}, 200
for start in range(first, first + count, batch):
    socks = {}
    for p in range(start, min(start + batch, first + count)):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.bind((any_addr, p)); s.setblocking(False); socks[p] = s
    for attempt in range(5):
        todo = [p for p in socks if str(p) not in got]
        if not todo:
            break
        for i, p in enumerate(todo):
            socks[p].sendto(b"flow %d" % p, (vip, port))
            if i % 20 == 19:
                time.sleep(0.002)
        sel = selectors.DefaultSelector()
        for p in todo:
            sel.register(socks[p], selectors.EVENT_READ, p)
        end = time.monotonic() + wait
        while time.monotonic() < end and any(str(p) not in got for p in todo):
            for key, _ in sel.select(0.1):
                data, peer = key.fileobj.recvfrom(2048)
                got[str(key.data)] = [peer[0], data.decode()]
        sel.close()
    for s in socks.values():
        s.close()
print(json.dumps(got), flush=True)
"""


def link(a: str, aa: str, b: str, ba: str) -> dict[str, Any]:
    return {"endpoints": [{"node": a, "address": aa}, {"node": b, "address": ba}]}


def lab_dict(lb: dict[str, Any], nbackends: int = 3) -> dict[str, Any]:
    """cl -> r0 -> lb -> r1 -> backends b0.. (one link each); a symmetric chain from cl for UDP
    to port 5000 through lb, so the replies come back labelled through lb."""
    host = {"kind": "host"}
    d: dict[str, Any] = {
        "name": "lb" + secrets.token_hex(3),
        "nodes": {"cl": host, "r0": {"kind": "router"}, "lb": lb, "r1": {"kind": "router"}},
        "links": [link("cl", f"{CLIENT}/24", "r0", "10.92.1.1/24"),
                  link("r0", "10.92.3.1/24", "lb", "10.92.3.2/24"),
                  link("lb", "10.92.4.1/24", "r1", "10.92.4.2/24")],
        "chains": {"c": {"classifiers": [{"ingress": "cl", "proto": "udp", "dport": PORT}],
                         "functions": ["lb"], "egress": "r1", "symmetric": True}}}
    for i in range(nbackends):
        d["nodes"][f"b{i}"] = host
        d["links"].append(link("r1", f"10.92.{5 + i}.1/24", f"b{i}", f"{BACKENDS[i]}/24"))
    return d


def balancer(kind: str, weights: list[int], **more: Any) -> dict[str, Any]:
    return {"kind": kind, "vip": VIP, "proto": "udp", "ports": PORT,
            "backends": [{"address": BACKENDS[i], "weight": w} for i, w in enumerate(weights)],
            **more}


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_bpf_balancer")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        assert not lab_dir(lab.name).exists()


STOP = "import socket; socket.socket(2, 2).sendto(b'stop', ('127.0.0.1', %d))" % PORT


def traffic(lab: Lab, nbackends: int, first: int = 20000, flows: int = FLOWS,
            vip: str = VIP) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """``flows`` UDP flows from the client to ``vip``: what the client got back per port
    ([reply source, backend]), and what each backend counted ({packets, flows: {port: src}}),
    by its address of the VIP's family."""
    backends = BACKENDS6 if ":" in vip else BACKENDS
    echoes = {}
    try:
        for i in range(nbackends):
            e = lab.popen(f"b{i}", [sys.executable, "-c", ECHO, backends[i], str(PORT), "120"],
                          stdout=subprocess.PIPE, text=True)
            echoes[i] = e
            assert e.stdout is not None and e.stdout.readline().strip() == "ready"
        client = lab.popen("cl", [sys.executable, "-c", CLIENT_PROG, vip, str(PORT),
                                  str(first), str(flows)], stdout=subprocess.PIPE, text=True)
        out, _ = client.communicate(timeout=180)
        got = json.loads(out.strip().splitlines()[-1])
        seen = {}
        for i, e in echoes.items():
            lab.popen(f"b{i}", [sys.executable, "-c", STOP]).wait(timeout=30)
            text, _ = e.communicate(timeout=30)
            seen[backends[i]] = json.loads(text.strip().splitlines()[-1])
        return got, seen
    finally:
        for e in echoes.values():
            if e.poll() is None:
                e.kill()
                e.wait()


def placement(got: dict[str, list[str]]) -> dict[str, str]:
    """client port -> the backend that answered it"""
    return {p: backend for p, (_, backend) in got.items()}


def chain_inspect(lab: Lab) -> tuple[dict[str, Any], str]:
    cli = [sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name, "c"]
    cp = subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=60,
                        check=True)
    text = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(cp.stdout)["chains"]["c"], text


WEIGHTS = [1, 2, 1]


@pytest.mark.parametrize("kind", ["balancer", "bpf-balancer"])
def test_flows_are_balanced_by_weight_and_replies_come_from_the_vip(kind: str) -> None:
    with running(lab_dict(balancer(kind, WEIGHTS))) as lab:
        before = node_counters(lab)
        got, seen = traffic(lab, 3)
        after = node_counters(lab)
        info = lab.inspect()["nodes"]["lb"]["function"]
        shown, text = chain_inspect(lab) if kind == "bpf-balancer" else ({}, "")
    # every flow answered, from the VIP, by exactly one backend
    assert len(got) == FLOWS, f"{FLOWS - len(got)} flows unanswered"
    assert {src for src, _ in got.values()} == {VIP}
    ports: Counter[str] = Counter(p for s in seen.values() for p in s["flows"])
    assert len(ports) == FLOWS and set(ports.values()) == {1}, "a flow reached two backends"
    assert all(backend == BACKENDS[[str(p) in s["flows"] for s in seen.values()].index(True)]
               for p, (_, backend) in ((int(p), v) for p, v in got.items()))
    print(kind, "flows per backend", [len(seen[a]["flows"]) for a in BACKENDS[:3]],
          "weights", WEIGHTS)
    # shares within 5 % of the flows of the weights
    for i, w in enumerate(WEIGHTS):
        share = len(seen[BACKENDS[i]]["flows"])
        assert abs(share - FLOWS * w / sum(WEIGHTS)) < 0.05 * FLOWS, (kind, i, share)
    # the per-backend counters are what the backends counted
    counted = [b["packets"] for b in info["backends"]]
    assert counted == [seen[a]["packets"] for a in BACKENDS[:3]], (kind, info, seen)
    assert info["replies"]["packets"] >= FLOWS, info
    if kind == "bpf-balancer":
        # every flow is where the Maglev table computed in Python puts its hash
        assert placement(got) == predicted(WEIGHTS, got, "tuple")
        # the replies came back labelled: lb took them in as a function both ways
        assert after["lb"]["proxy_in"] - before["lb"]["proxy_in"] >= 2 * FLOWS
        slots = [b["slots"] for b in info["backends"]]
        assert sum(slots) == info["table"] == 1021 and all(
            abs(n - 1021 * w / sum(WEIGHTS)) <= 10 for n, w in zip(slots, WEIGHTS)), slots
        assert [b["packets"] for b in shown["functions"]["lb"]["backends"]] == counted
        assert f"function lb: vip {VIP} udp ports {PORT}-{PORT}" in text, text
        assert f"backend 1: {counted[1]:,} packets  {BACKENDS[1]} weight 2" in text, text


def predicted(weights: list[int], got: dict[str, list[str]], sticky: str,
              family: int = 4) -> dict[str, str]:
    """client port -> the backend the table puts it on: ``flow_hash`` (the data plane's hash,
    in Python; an IPv6 address folded to a word as there) of the 5-tuple, or of the source
    alone, modulo the table's size"""
    addrs = list((BACKENDS6 if family == 6 else BACKENDS)[:len(weights)])
    client, vip = (IPv6Address(CLIENT6), IPv6Address(VIP6)) if family == 6 else \
        (IPv4Address(CLIENT), IPv4Address(VIP))
    table = M.table(addrs, weights)
    out = {}
    for p in got:
        if sticky == "source":
            h = flow_hash(client, IPv4Address(0), 0, 0, 0, 0)
        else:
            h = flow_hash(client, vip, int(p), PORT, 17, 0)
        out[p] = addrs[table[h % M.TABLE_SIZE]]
    return out


FLOWS6 = 300


@pytest.mark.parametrize("kind", ["balancer", "bpf-balancer"])
def test_flows_to_an_ipv6_vip_are_balanced_and_replies_come_from_it(kind: str) -> None:
    """An IPv6 VIP over IPv6 backends (weights 1, 2, 1) in a dual-stack lab: 300 UDP flows,
    each answered from the VIP by one backend, all three used about by weight, the per-backend
    counters what the backends counted; the bpf-balancer's flows where its Maglev table, the
    IPv4 one's, puts their hash; then every packet's checksum right where it is received."""
    lb = {"kind": kind, "vip": VIP6, "proto": "udp", "ports": PORT,
          "backends": [{"address": BACKENDS6[i], "weight": w} for i, w in enumerate(WEIGHTS)]}
    with running(dual_stack(lab_dict(lb), "2001:2:92")) as lab:
        got, seen = traffic(lab, 3, flows=FLOWS6, vip=VIP6)
        info = lab.inspect()["nodes"]["lb"]["function"]
        shown, text = chain_inspect(lab) if kind == "bpf-balancer" else ({}, "")
        # then 100 flows more, the checksums of each end checked (apart: the checkers' load
        # would delay the counted flows' last tries past the backends' stop)
        with N.checksums(lab, ("cl", "b0", "b1", "b2")) as sums:
            more, _ = traffic(lab, 3, first=30000, flows=100, vip=VIP6)
    assert len(got) == FLOWS6 and {src for src, _ in got.values()} == {VIP6}, got
    ports: Counter[str] = Counter(p for b in seen.values() for p in b["flows"])
    assert len(ports) == FLOWS6 and set(ports.values()) == {1}, "a flow reached two backends"
    for i, w in enumerate(WEIGHTS):
        share = len(seen[BACKENDS6[i]]["flows"])
        assert abs(share - FLOWS6 * w / sum(WEIGHTS)) < 0.1 * FLOWS6, (kind, i, share)
    assert [b["packets"] for b in info["backends"]] == \
        [seen[a]["packets"] for a in BACKENDS6[:3]], (kind, info, seen)
    assert [b["address"] for b in info["backends"]] == list(BACKENDS6[:3])
    assert info["vip"] == VIP6 and info["replies"]["packets"] >= FLOWS6, info
    assert len(more) == 100 and {src for src, _ in more.values()} == {VIP6}, more
    for node, n in sums.items():
        assert n["bad"] == n["zero"] == 0 and n["ok"] > 0, (kind, node, sums)
    assert sum(sums[f"b{i}"]["ok"] for i in range(3)) >= 100 and sums["cl"]["ok"] >= 100
    if kind == "bpf-balancer":
        assert placement(got) == predicted(WEIGHTS, got, "tuple", family=6)
        assert [b["packets"] for b in shown["functions"]["lb"]["backends"]] == \
            [b["packets"] for b in info["backends"]]
        assert f"function lb: vip {VIP6} udp ports {PORT}-{PORT}" in text, text
        assert f"{BACKENDS6[1]} weight 2, 511 of 1021 slots" in text, text


@pytest.mark.parametrize("kind", ["balancer", "bpf-balancer"])
def test_sticky_by_source_sends_a_client_to_one_backend(kind: str) -> None:
    with running(lab_dict(balancer(kind, WEIGHTS, sticky="source"))) as lab:
        got, seen = traffic(lab, 3, flows=400)
    assert len(got) == 400 and {src for src, _ in got.values()} == {VIP}
    assert len(set(placement(got).values())) == 1, Counter(placement(got).values())
    assert sum(1 for s in seen.values() if s["flows"]) == 1
    if kind == "bpf-balancer":
        assert placement(got) == predicted(WEIGHTS, got, "source")


def moved(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {p for p in a if a[p] != b[p]}


def test_a_backend_out_or_in_moves_only_its_own_flows_and_connections_stay() -> None:
    """Four backends of equal weight, the fourth out at first.  Between rounds of the same
    3,000 flows the connection map is emptied (so the table alone places them): bringing the
    fourth in moves only flows onto it, about its share; taking b1 out moves only b1's flows.
    Then b1 back in with the connections kept: every flow stays where it is (sticky)."""
    with running(lab_dict(balancer("bpf-balancer", [1, 1, 1, 1]), nbackends=4)) as lab:
        lb = lab.function("lb")
        lb.set_live([True, True, True, False])
        lb.forget_connections()
        three = placement(traffic(lab, 4)[0])
        lb.set_live([True, True, True, True])
        assert lb.forget_connections() >= 2 * FLOWS  # both ways of every flow
        four = placement(traffic(lab, 4)[0])
        lb.set_live([True, False, True, True])
        lb.forget_connections()
        b1_out = placement(traffic(lab, 4)[0])
        lb.set_live([True, True, True, True])
        kept = placement(traffic(lab, 4)[0])  # no forgetting: established flows stay
        info = lab.inspect()["nodes"]["lb"]["function"]
    for got in (three, four, b1_out, kept):
        assert len(got) == FLOWS, f"{FLOWS - len(got)} flows unanswered"
    share = [b["slots"] / info["table"] for b in info["backends"]]
    print(f"flows moved of {FLOWS}: fourth in {len(moved(three, four))} (its share "
          f"{share[3]:.3f}), b1 out {len(moved(four, b1_out))} (its share {share[1]:.3f}), "
          f"b1 back in with connections kept {len(moved(b1_out, kept))}")
    # the fourth in: only flows onto it moved, about its share
    assert BACKENDS[3] not in three.values()
    assert {four[p] for p in moved(three, four)} == {BACKENDS[3]}
    assert len(moved(three, four)) < (share[3] + 0.05) * FLOWS, (len(moved(three, four)), share)
    # b1 out: exactly b1's flows moved, to the others
    assert moved(four, b1_out) == {p for p, b in four.items() if b == BACKENDS[1]}
    assert BACKENDS[1] not in b1_out.values()
    # b1 back in, connections kept: nobody moves (its old flows stay where they went)
    assert moved(b1_out, kept) == set()
    assert info["backends"][1]["up"] and info["backends"][1]["packets"] > 0


@pytest.mark.parametrize("lb, place, says", [
    (balancer("bpf-balancer", [1] * 3) | {"backends": [{"address": f"10.92.9.{i + 20}"}
                                                       for i in range(17)]},
     "nodes.lb.backends", "at most 16 backends"),
    (balancer("bpf-balancer", [1] * 3) | {"ports": "5000-70000"}, "nodes.lb.ports",
     "ports from 0 to 65535"),
    (balancer("bpf-balancer", [1] * 3) | {"timeout": 30}, "nodes.lb", "unknown key 'timeout'"),
], ids=["too-many-backends", "port-range", "unknown-key"])
def test_what_the_program_cannot_hold_is_refused_and_nothing_is_made(lb: dict[str, Any],
                                                                     place: str,
                                                                     says: str) -> None:
    d = lab_dict(lb)
    with pytest.raises(SpecError, match=says) as e:
        Lab.from_dict(d, source="test_bpf_balancer").up()
    assert place in str(e.value)
    assert not lab_dir(d["name"]).exists()
    assert not any(n.startswith(f"sfclab:{d['name']}:") for n in netns_names())


def test_a_bpf_balancer_no_chain_passes_is_refused() -> None:
    d = lab_dict(balancer("bpf-balancer", [1] * 3))
    del d["chains"]
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        Lab.from_dict(d, source="test_bpf_balancer").up()
    assert "nodes.lb" in str(e.value)
    assert not lab_dir(d["name"]).exists()


def netns_names() -> list[str]:
    run = Path("/run/netns")
    return [p.name for p in run.iterdir()] if run.is_dir() else []


#: counts the packets to or from port 5000 of protocol argv[1] seen by a raw socket, and those
#: whose IPv4 or TCP/UDP checksum is wrong (and UDP sent without one), until a 'stop' datagram
#: from its own namespace
CHECKER = N.FOLD + r"""
import json, socket, struct, sys
proto = int(sys.argv[1])
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, proto)
stop = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); stop.bind(("127.0.0.1", 5999))
print("ready", flush=True)
ok = bad = none = 0
import selectors
sel = selectors.DefaultSelector(); sel.register(raw, 1); sel.register(stop, 1)
while True:
    done = False
    for key, _ in sel.select(1):
        if key.fileobj is stop:
            done = True
            break
        pkt = raw.recv(65535)
        ihl = (pkt[0] & 15) * 4
        l4 = pkt[ihl:]
        if 5000 not in struct.unpack("!HH", l4[:4]) or pkt[12] == 127:
            continue  # loopback (the 'stop' datagrams) carries partial checksums
        pseudo = pkt[12:20] + struct.pack("!BBH", 0, proto, len(l4))
        csum_at = 16 if proto == 6 else 6
        udp_none = proto == 17 and l4[6:8] == b"\0\0"
        good = fold(pkt[:ihl]) == 0xffff and (udp_none or fold(pseudo + l4) == 0xffff)
        ok, bad, none = ok + good, bad + (not good), none + udp_none
    if done:
        break
print(json.dumps({"ok": ok, "bad": bad, "none": none}), flush=True)
"""
TCP_SERVER = r"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5000)); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.settimeout(2); c.sendall(c.recv(2000)); c.close()
"""
TCP_CLIENT = r"""
import socket, sys
ok = 0
for i in range(int(sys.argv[2])):
    try:
        c = socket.create_connection((sys.argv[1], 5000), timeout=2)
        c.sendall(b"x" * 1200); ok += len(c.recv(2000)) == 1200; c.close()
    except OSError:
        pass
print(ok, flush=True)
"""


def test_checksums_are_right_after_the_rewrite_both_ways() -> None:
    """TCP connections and UDP flows (some without a UDP checksum) to the VIP: every packet a
    backend receives and every reply the client receives has a right IPv4 and TCP/UDP checksum
    (a veth delivers a wrong one as readily, so each is recomputed from the bytes)."""
    d = lab_dict(balancer("bpf-balancer", [1, 1, 1]) | {"proto": "any"})
    d["chains"]["c"]["classifiers"] = [{"ingress": "cl", "proto": p, "dport": PORT}
                                       for p in ("udp", "tcp")]
    with running(d) as lab:
        checkers = {}
        try:
            for node in ("cl", "b0", "b1", "b2"):
                for proto in (6, 17):
                    c = lab.popen(node, [sys.executable, "-c",
                                         CHECKER.replace("5999", str(5990 + proto)),
                                         str(proto)], stdout=subprocess.PIPE, text=True)
                    checkers[node, proto] = c
                    assert c.stdout is not None and c.stdout.readline().strip() == "ready"
            servers = [lab.popen(f"b{i}", [sys.executable, "-c", TCP_SERVER],
                                 stdout=subprocess.PIPE, text=True) for i in range(3)]
            for s in servers:
                assert s.stdout is not None and s.stdout.readline().strip() == "ready"
            tcp = lab.popen("cl", [sys.executable, "-c", TCP_CLIENT, VIP, "60"],
                            stdout=subprocess.PIPE, text=True).communicate(timeout=120)[0]
            for s in servers:
                s.kill()
                s.wait()
            got, _ = traffic(lab, 3, flows=300)
            nocheck = ("import socket; s = socket.socket(2, 2); s.setsockopt(1, 11, 1); "
                       f"s.sendto(b'no checksum', ('{VIP}', {PORT}))")
            lab.popen("cl", [sys.executable, "-c", nocheck]).wait(timeout=30)
            seen = {}
            for (node, proto), c in checkers.items():
                stop = f"import socket; socket.socket(2, 2).sendto(b'x', ('127.0.0.1', " \
                       f"{5990 + proto}))"
                lab.popen(node, [sys.executable, "-c", stop]).wait(timeout=30)
                seen[node, proto] = json.loads(c.communicate(timeout=30)[0].splitlines()[-1])
        finally:
            for c in checkers.values():
                if c.poll() is None:
                    c.kill()
                    c.wait()
    assert int(tcp) == 60 and len(got) == 300, (tcp, len(got))
    assert all(s["bad"] == 0 for s in seen.values()), seen
    for proto, least in ((6, 60 * 4), (17, 300)):
        assert sum(seen[f"b{i}", proto]["ok"] for i in range(3)) >= least, seen
        assert seen["cl", proto]["ok"] >= least // 2, seen
    # the datagram sent without a checksum reached a backend without one
    assert sum(seen[f"b{i}", 17]["none"] for i in range(3)) == 1, seen


# ------------------------------------------------------------------ firewall then balancer
FW_RULES = [{"action": "drop", "proto": "udp", "dport": PORT + 1}]


def pipeline_lab(one_node: bool) -> dict[str, Any]:
    """The lab above with a firewall (dropping UDP to port 5001) before the balancer (of ports
    5000-5001): both in one bpf-pipeline node ``lb``, or a bpf-firewall node ``fw`` between r0
    and ``lb``."""
    fw = {"kind": "bpf-firewall", "rules": FW_RULES}
    lb = balancer("bpf-balancer", WEIGHTS) | {"ports": f"{PORT}-{PORT + 1}"}
    if one_node:
        d = lab_dict({"kind": "bpf-pipeline", "functions": [fw, lb]})
    else:
        d = lab_dict(lb)
        d["nodes"]["fw"] = fw
        d["links"][1] = link("r0", "10.92.3.1/24", "fw", "10.92.3.2/24")
        d["links"].insert(2, link("fw", "10.92.2.1/24", "lb", "10.92.2.2/24"))
        d["chains"]["c"]["functions"] = ["fw", "lb"]
    d["chains"]["c"]["classifiers"][0]["dport"] = f"{PORT}-{PORT + 1}"
    return d


def test_firewall_then_balancer_in_one_hook_gives_what_two_nodes_give() -> None:
    """The same 1,000 flows to port 5000 and 200 to port 5001: through one node running both
    functions by tail calls and through two nodes, the same flows are dropped (all to 5001),
    every other flow reaches the same backend with its reply from the VIP, and the counters
    agree."""
    results = {}
    for one_node in (True, False):
        with running(pipeline_lab(one_node)) as lab:
            if one_node:
                sp = lab._plan().steering
                assert sp is not None
                assert sp.attach["lb"][:2] == [("sfc_fw_stage", "0", "tail"),
                                               ("sfc_lb_stage", "1", "tail")]
                assert {p for p, _, h in sp.attach["lb"] if h == "xdp"} == {"sfc_pipe"}
            before = node_counters(lab)
            got, seen = traffic(lab, 3, flows=1000)
            # flows the firewall drops: each of the 5 tries waits 0.2 s for an answer (none
            # should come; the rule's counter checks that every try reached it)
            dropped = lab.popen("cl", [sys.executable, "-c", CLIENT_PROG, VIP, str(PORT + 1),
                                       "30000", "200", "0.2"], stdout=subprocess.PIPE,
                                text=True)
            lost = json.loads(dropped.communicate(timeout=120)[0].splitlines()[-1])
            after = node_counters(lab)
            info = lab.inspect()["nodes"]
            shown, text = chain_inspect(lab)
        if one_node:
            fw, lb = info["lb"]["function"]["functions"]
            assert "tail calls to sfc_fw_stage, sfc_lb_stage" in info["lb"]["function"]["program"]
            assert "function lb.0: policy accept" in text and "function lb.1: vip" in text, text
            assert [s["kind"] for s in shown["functions"]["lb"]["functions"]] == \
                ["bpf-firewall", "bpf-balancer"]
        else:
            fw, lb = info["fw"]["function"], info["lb"]["function"]
        delta = {k: after["lb"][k] - before["lb"][k] for k in after["lb"]}
        results[one_node] = (placement(got), {src for src, _ in got.values()}, lost,
                             fw["rules"][0]["packets"], [b["packets"] for b in lb["backends"]],
                             [seen[a]["packets"] for a in BACKENDS[:3]], delta)
    one, two = results[True], results[False]
    assert len(one[0]) == 1000 and one[0] == two[0], "flows placed differently"
    assert one[1] == two[1] == {VIP}
    assert one[2] == two[2] == {}, "a flow to port 5001 was answered"
    assert one[3] == two[3] == 200 * 5, (one[3], two[3])  # every try of every dropped flow
    # each run's balancer counted what its backends took in (a flow's tries, and so the
    # packets, depend on the machine's load; where the flows went is compared above)
    assert one[4] == one[5] and two[4] == two[5], (one[4], one[5], two[4], two[5])
    assert one[6]["errors"] == 0 and one[6]["proxy_out"] >= 2 * 1000, one[6]


def test_firewall_then_nat_in_one_hook_gives_what_two_nodes_give() -> None:
    """A firewall (dropping UDP to port 6001) then a NAT (masquerade toward r1) on one node,
    and the same on two nodes, in dual-stack labs: from three source ports, UDP to 6000 and 6001
    and TCP to 7000, in IPv4 and at the same time in IPv6 (NAT66); in each family the same
    echoes come back, from the same addresses, and the outside sees the same flows from the
    same translated address and ports."""
    fw = {"kind": "bpf-firewall", "rules": [{"action": "drop", "proto": "udp", "dport": 6001}]}
    nat = {"kind": "bpf-nat", "outside": "r1"}
    results = {}
    for one_node in (True, False):
        if one_node:
            d = N.lab_dict({"kind": "bpf-pipeline", "functions": [fw, nat]})
        else:
            d = N.lab_dict(nat)
            d["nodes"]["fw"] = fw
            d["links"][1] = link("r0", "10.92.2.1/24", "fw", "10.92.2.2/24")
            d["links"].insert(2, link("fw", "10.92.5.1/24", "nat", "10.92.5.2/24"))
            d["chains"]["c"]["functions"] = ["fw", "nat"]
        with N.running(dual_stack(d, "2001:2:92")) as lab:
            echoes, clients = {}, {}
            for family in (4, 6):  # both families at once: an IPv6 socket is IPv6 only
                echoes[family] = e = lab.popen(
                    "out", [sys.executable, "-c", N.ECHO, "6000,6001", "7000", "25", "stdin",
                            *(["6"] if family == 6 else [])],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert e.stdout is not None and e.stdout.readline().strip() == "ready"
            for family, dst in ((4, N.DST), (6, N.DST6)):
                clients[family] = lab.popen("in", [sys.executable, "-c", N.CLIENT, dst,
                                                   ",".join(map(str, N.SPORTS)), "6000,6001",
                                                   "7000"], stdout=subprocess.PIPE, text=True)
            got = {f: json.loads(c.communicate(timeout=120)[0].splitlines()[-1])
                   for f, c in clients.items()}
            saw = {f: json.loads(e.communicate(timeout=60)[0].splitlines()[-1])  # ends it
                   for f, e in echoes.items()}
            info = lab.inspect()["nodes"]
        fw_info, nat_info = (info["nat"]["function"]["functions"] if one_node else
                             (info["fw"]["function"], info["nat"]["function"]))
        results[one_node] = (got, fw_info["rules"][0]["packets"], saw,
                             nat_info["masquerade6"]["new"])
    one, two = results[True], results[False]
    for family, dst, out in ((4, N.DST, N.OUT), (6, f"[{N.DST6}]", f"[{N.OUT6}]")):
        assert one[0][family] == two[0][family], (family, one[0][family], two[0][family])
        assert set(one[0][family]) == {f"{sp} udp 6000 from {dst}:6000" for sp in N.SPORTS} | \
            {f"{sp} tcp 7000 from {dst}:7000" for sp in N.SPORTS}, one[0][family]
        # the outside saw the same flows, every one from the NAT's outside address
        assert one[2][family] == two[2][family], (family, one[2][family], two[2][family])
        assert {k.split(" ")[0].rsplit(":", 1)[0] for k in one[2][family]} == {out}, one[2]
        assert len(one[2][family]) == 2 * len(N.SPORTS), one[2][family]
    # the rule dropped every try to 6001, of both families (one list, as the inet table)
    assert one[1] == two[1] == 5 * len(N.SPORTS) * 2, (one[1], two[1])
    # NAT66: one translation per IPv6 flow that passed the firewall, none for those it dropped
    assert one[3] == two[3] == 2 * len(N.SPORTS), (one[3], two[3])
