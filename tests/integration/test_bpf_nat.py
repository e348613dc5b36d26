"""The bpf-nat against its kernel twin on real namespaces: the same flows (UDP and TCP from
several source ports, ICMP echo) through the same symmetric chain with ``kind: nat`` and with
``kind: bpf-nat`` reach the outside with the same translated source, and their replies -- which
come back labelled through the reverse direction, so through the same node -- reach the
inside; port forwards from the outside reach their target inside and its replies come back
from the outside address and port; the same in IPv6 (NAT66 by masquerade, forwards to IPv6
targets), every translated packet's checksum right over the IPv6 pseudo-header; per-rule
counters and live translations in ``inspect`` and ``chain inspect``; bad input refused with
the place and the limit, nothing made."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sfclab.api import Lab
from sfclab.errors import SpecError
from sfclab.realize.dataplane import lab_dir

from .labtools import dual_stack
from .test_sfc import node_counters, steering

IN, OUT, DST = "10.92.1.2", "10.92.3.1", "10.92.4.2"   # inside host, NAT outside, outside host
SPORTS = (41000, 41001, 41002)
UDP_PORTS = (6000, 6001)
TCP_PORTS = (7000, 7001)
FORWARDS = [{"proto": "tcp", "port": 8080, "to": f"{IN}:80"},
            {"proto": "udp", "port": 9090, "to": IN}]
#: the same in IPv6, in the dual-stack lab of the twins (10.92.X.Y is 2001:2:92:X::Y)
IN6, OUT6, DST6 = "2001:2:92:1::2", "2001:2:92:3::1", "2001:2:92:4::2"
FORWARDS6 = [{"proto": "tcp", "port": 8081, "to": f"[{IN6}]:81"},
             {"proto": "udp", "port": 9091, "to": IN6}]

#: echoes every UDP datagram and the first bytes of every TCP connection, on every port given,
#: for SECONDS at most; prints what it got by "peer-address:peer-port proto port" (an IPv6 peer
#: in brackets).  With a fourth argument ``stdin``, it also ends once its standard input is
#: closed (the client is done: the test closes it) and nothing more has come for 0.5 s (a
#: datagram still on its way is answered and counted), rather than waiting out SECONDS; with a
#: fifth, ``6``, it listens on IPv6 only (so one of each family can listen on the same ports)
ECHO = r"""
import json, selectors, socket, sys, time
udp, tcp = [int(p) for p in sys.argv[1].split(",") if p], [int(p) for p in sys.argv[2].split(",") if p]
fam, any_addr = (socket.AF_INET6, "::") if sys.argv[5:] == ["6"] else (socket.AF_INET, "0.0.0.0")
def sock(kind):
    s = socket.socket(fam, kind)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    return s
sel, got = selectors.DefaultSelector(), {}
for p in udp:
    s = sock(socket.SOCK_DGRAM); s.bind((any_addr, p))
    sel.register(s, selectors.EVENT_READ, ("udp", p))
for p in tcp:
    s = sock(socket.SOCK_STREAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((any_addr, p)); s.listen(16); sel.register(s, selectors.EVENT_READ, ("tcp", p))
print("ready", flush=True)
end = last = time.monotonic() + float(sys.argv[3])
if sys.argv[4:5] == ["stdin"]:
    sel.register(sys.stdin, selectors.EVENT_READ, ("stdin", 0))
while time.monotonic() < end:
    for key, _ in sel.select(0.1):
        proto, port = key.data
        if proto == "stdin":  # closed: quiet for 0.5 s from now on, and it ends
            sys.stdin.read(); sel.unregister(sys.stdin); end = min(last, time.monotonic() + 0.5)
            continue
        if end < last:  # stopping: something came, so 0.5 s more of quiet
            end = min(last, time.monotonic() + 0.5)
        if proto == "udp":
            data, peer = key.fileobj.recvfrom(2048); key.fileobj.sendto(data, peer)
        else:
            c, peer = key.fileobj.accept(); c.settimeout(2)
            try:
                data = c.recv(100); c.sendall(data)
            except OSError:
                data = b""
            c.close()
        if data:
            host = f"[{peer[0]}]" if ":" in peer[0] else peer[0]
            k = f"{host}:{peer[1]} {proto} {port}"; got[k] = got.get(k, 0) + 1
print(json.dumps(got), flush=True)
"""
#: from each source port: 5 datagrams to each UDP port, one connection to each TCP port, to an
#: address of either family (an IPv6 socket is IPv6 only, so a client of each family can run at
#: once from the same ports); prints the echoes it got back by "source-port proto port" (and
#: from where, an IPv6 address in brackets)
CLIENT = r"""
import json, socket, sys, time
dst, sports = sys.argv[1], [int(p) for p in sys.argv[2].split(",") if p]
udp, tcp = [int(p) for p in sys.argv[3].split(",") if p], [int(p) for p in sys.argv[4].split(",") if p]
fam, any_addr = (socket.AF_INET6, "::") if ":" in dst else (socket.AF_INET, "0.0.0.0")
def at(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
def sock(kind):
    s = socket.socket(fam, kind)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    return s
got = {}
for sp in sports:
    for p in udp:
        s = sock(socket.SOCK_DGRAM); s.bind((any_addr, sp))
        for i in range(5):  # five at once; the answers until 1 s after the last is sent
            s.sendto(b"sfclab bpf-nat %d" % i, (dst, p))
        end, n = time.monotonic() + 1.0, 0
        while n < 5 and time.monotonic() < end:
            s.settimeout(max(0.001, end - time.monotonic()))
            try:
                data, peer = s.recvfrom(2048)
                k = f"{sp} udp {p} from {at(peer[0], peer[1])}"; got[k] = got.get(k, 0) + 1
                n += 1
            except OSError:
                pass
        s.close()
    for p in tcp:
        c = sock(socket.SOCK_STREAM); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        c.bind((any_addr, sp)); c.settimeout(2)
        try:
            c.connect((dst, p)); c.sendall(b"hello"); data = c.recv(100)
            if data == b"hello":
                k = f"{sp} tcp {p} from {at(dst, p)}"; got[k] = got.get(k, 0) + 1
        except OSError:
            pass
        c.close()
print(json.dumps(got), flush=True)
"""


def link(a: str, aa: str, b: str, ba: str) -> dict[str, Any]:
    return {"endpoints": [{"node": a, "address": aa}, {"node": b, "address": ba}]}


def lab_dict(nat: dict[str, Any], dual: bool = False) -> dict[str, Any]:
    """in -> r0 -> nat -> r1 -> out; a symmetric chain from in through nat (outside: r1).
    ``dual``: a lab of ``ip: dual`` (10.92.X.Y is also 2001:2:92:X::Y) whose chain takes both
    families."""
    host = {"kind": "host"}
    d = {"name": "bn" + secrets.token_hex(3),
         "nodes": {"in": host, "r0": {"kind": "router"}, "nat": nat,
                   "r1": {"kind": "router"}, "out": host},
         "links": [link("in", f"{IN}/24", "r0", "10.92.1.1/24"),
                   link("r0", "10.92.2.1/24", "nat", "10.92.2.2/24"),
                   link("nat", f"{OUT}/24", "r1", "10.92.3.2/24"),
                   link("r1", "10.92.4.1/24", "out", f"{DST}/24")],
         "chains": {"c": {"classifiers": [{"ingress": "in"}], "functions": ["nat"],
                          "egress": "out", "symmetric": True}}}
    return dual_stack(d, "2001:2:92") if dual else d


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_bpf_nat")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        assert not lab_dir(lab.name).exists()


def run(lab: Lab, server: str, client: str, to: str, udp: tuple[int, ...], tcp: tuple[int, ...],
        sports: tuple[int, ...], tcp_to: tuple[int, ...] | None = None
        ) -> tuple[dict[str, int], dict[str, int]]:
    """``client`` talks to ``to`` from ``sports`` (UDP to ``udp``, TCP to ``tcp_to``, default
    ``tcp``), ``server`` echoes on ``udp`` and ``tcp``: what the server got by peer, and what
    came back to the client."""
    ports = ",".join(map(str, udp)), ",".join(map(str, tcp))
    six = ["6"] if ":" in to else []
    rx = lab.popen(server, [sys.executable, "-c", ECHO, *ports, "8", "stdin", *six],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    cp = lab.exec(client, [sys.executable, "-c", CLIENT, to, ",".join(map(str, sports)),
                           ports[0], ",".join(map(str, tcp_to or tcp))])
    back = json.loads(cp.stdout.strip().splitlines()[-1])
    out, _ = rx.communicate(timeout=60)  # closes its input: it ends once quiet
    return json.loads(out.strip().splitlines()[-1]), back


def ping(lab: Lab, dst: str = DST) -> bool:
    return lab.exec("in", ["ping", "-c", "3", "-i", "0.2", "-W", "1", dst],
                    check=False).returncode == 0


#: checks the checksum of every IPv6 TCP, UDP and ICMPv6 packet its namespace receives, over
#: the pseudo-header, from the bytes (a veth delivers a wrong one as readily), until its
#: standard input is closed; prints how many were right, wrong, and UDP without one (0, which
#: IPv6 does not allow)
#: the Internet checksum's one's-complement sum of ``data``, folded to 16 bits (RFC 1071), for
#: the checkers run in a namespace (their scripts start with it)
FOLD = r"""
import struct
def fold(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s
"""
CSUM6 = FOLD + r"""
import json, selectors, socket, struct, sys
raw = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x86DD))
sel = selectors.DefaultSelector()
sel.register(raw, selectors.EVENT_READ); sel.register(sys.stdin, selectors.EVENT_READ)
print("ready", flush=True)
got, done = {"ok": 0, "bad": 0, "zero": 0}, False
def check(pkt, addr):
    if addr[2] == socket.PACKET_OUTGOING or len(pkt) < 40 or pkt[6] not in (6, 17, 58):
        return
    l4 = pkt[40:40 + struct.unpack("!H", pkt[4:6])[0]]
    if pkt[6] == 17 and l4[6:8] == b"\0\0":
        got["zero"] += 1
        return
    pseudo = pkt[8:40] + struct.pack("!IxxxB", len(l4), pkt[6])
    got["ok" if fold(pseudo + l4) == 0xffff else "bad"] += 1
while not done:
    for key, _ in sel.select(1):
        if key.fileobj is sys.stdin:
            sys.stdin.read(); done = True
        else:
            check(*raw.recvfrom(65535))
raw.setblocking(False)
try:
    while True:
        check(*raw.recvfrom(65535))
except BlockingIOError:
    pass
print(json.dumps(got), flush=True)
"""


@contextmanager
def checksums(lab: Lab, nodes: tuple[str, ...]) -> Iterator[dict[str, dict[str, int]]]:
    """CSUM6 on each of ``nodes`` while the block runs; the dict yielded is filled at its end,
    node -> what it counted."""
    checkers = {}
    out: dict[str, dict[str, int]] = {}
    try:
        for n in nodes:
            c = lab.popen(n, [sys.executable, "-c", CSUM6], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
            checkers[n] = c
            assert c.stdout is not None and c.stdout.readline().strip() == "ready"
        yield out
        for n, c in checkers.items():
            out[n] = json.loads(c.communicate(timeout=30)[0].strip().splitlines()[-1])
    finally:
        for c in checkers.values():
            if c.poll() is None:
                c.kill()
                c.wait()


def through(kind: str) -> dict[int, dict[str, Any]]:
    """One dual-stack lab with ``kind``: the same IPv4 traffic and then the same IPv6 traffic
    (its checksums checked where it is received), and after each what the NAT's inspect
    showed, by family; chain inspect's at the end."""
    nat = {"kind": kind, "outside": "r1", "forward": FORWARDS + FORWARDS6}
    got: dict[int, dict[str, Any]] = {}
    with running(lab_dict(nat, dual=True)) as lab:
        for family, (dst, out, udp, tcp) in {4: (DST, OUT, 9090, 80),
                                             6: (DST6, OUT6, 9091, 81)}.items():
            with checksums(lab, ("in", "out") if family == 6 else ()) as sums:
                seen, back = run(lab, "out", "in", dst, UDP_PORTS, TCP_PORTS, SPORTS)
                fseen, fback = run(lab, "in", "out", out, (udp,), (tcp,), (42000,),
                                   (tcp + 8000,))
                pinged = ping(lab, dst)
            got[family] = {"seen": seen, "back": back, "fseen": fseen, "fback": fback,
                           "ping": pinged, "info": lab.inspect()["nodes"]["nat"]["function"],
                           "counters": node_counters(lab)["nat"], "checksums": sums}
        # once, at the end: IPv4's counters are IPv4's alone, IPv6 translations count apart
        shown = chain_inspect(lab) if kind == "bpf-nat" else None
    return {family: {**r, "shown": shown} for family, r in got.items()}


def chain_inspect(lab: Lab) -> dict[str, Any]:
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name, "c",
                         "--json"], capture_output=True, text=True, timeout=60, check=True)
    text = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name,
                           "c"], capture_output=True, text=True, timeout=60, check=True).stdout
    return {"json": json.loads(cp.stdout)["chains"]["c"], "text": text}


@pytest.fixture(scope="module")
def twins() -> dict[str, dict[int, dict[str, Any]]]:
    """nat and bpf-nat, each in one dual-stack lab through which the same IPv4 and then IPv6
    traffic went: :func:`through`'s results, by kind."""
    return {kind: through(kind) for kind in ("nat", "bpf-nat")}


def test_the_same_flows_are_translated_as_by_the_kernel_nat(twins: dict[str, Any]) -> None:
    k, b = twins["nat"][4], twins["bpf-nat"][4]
    flows = {f"{OUT}:{sp} {proto} {p}" for sp in SPORTS
             for proto, ports in (("udp", UDP_PORTS), ("tcp", TCP_PORTS)) for p in ports}
    # the outside saw every flow from the outside address, with the same ports, as often
    assert set(k["seen"]) == flows, k["seen"]
    assert b["seen"] == k["seen"], (b["seen"], k["seen"])
    assert all(n == 5 for key, n in b["seen"].items() if " udp " in key), b["seen"]
    # every reply reached the inside, from the outside host (the source un-translated)
    replies = {f"{sp} udp {p} from {DST}:{p}" for sp in SPORTS for p in UDP_PORTS} | \
        {f"{sp} tcp {p} from {DST}:{p}" for sp in SPORTS for p in TCP_PORTS}
    assert set(k["back"]) == replies, k["back"]
    assert b["back"] == k["back"], (b["back"], k["back"])
    # port forwards: the inside target sees the outside host; its replies come from OUT:port
    assert set(k["fseen"]) == {f"{DST}:42000 udp 9090", f"{DST}:42000 tcp 80"}, k["fseen"]
    assert b["fseen"] == k["fseen"] and b["fback"] == k["fback"], (b, k)
    assert set(b["fback"]) == {f"42000 udp 9090 from {OUT}:9090",
                               f"42000 tcp 8080 from {OUT}:8080"}, b["fback"]
    assert k["ping"] and b["ping"]
    # the packets went through the eBPF program, labelled both ways
    assert b["counters"]["proxy_in"] > 0 and b["counters"]["errors"] == 0, b["counters"]
    # per-rule counters: new translations count as the kernel's rules count connections
    info, kinfo = b["info"], k["info"]["connections"]
    assert info["masquerade"]["new"] == kinfo["masquerade"]["packets"] == \
        len(SPORTS) * (len(UDP_PORTS) + len(TCP_PORTS)) + 1, (info, kinfo)   # + the ping
    for i in (0, 1):
        assert info["forwards"][i]["new"] == kinfo[f"forward {i}"]["packets"] == 1
        assert info["forwards"][i]["packets"] > info["forwards"][i]["new"]
    assert info["masquerade"]["packets"] > 2 * info["masquerade"]["new"]
    assert info["no_port"]["packets"] == 0
    assert info["live_translations"] == len(info["translations"]) == \
        len(SPORTS) * (len(UDP_PORTS) + len(TCP_PORTS)) + 1 + 2, info
    assert {t["outside"] for t in info["translations"] if t["rule"] == "masquerade"} >= \
        {f"{OUT}:{sp}" for sp in SPORTS}
    # chain inspect shows the same counters (read after the traffic, so no fewer)
    shown = b["shown"]["json"]["functions"]["nat"]
    assert shown["masquerade"]["new"] == info["masquerade"]["new"], shown
    assert "function nat: masquerade" in b["shown"]["text"], b["shown"]["text"]


def test_the_same_ipv6_flows_are_translated_as_by_the_kernel_nat66(twins: dict[str, Any]) -> None:
    """IPv6 through the same labs: NAT66 by masquerade to the outside IPv6 address, the same
    source ports as the kernel's, the replies back inside, the IPv6 forwards to their IPv6
    targets, ping -6; every translated packet's checksum right at each end, in both; the IPv6
    translations counted apart (``masquerade6``), as the kernel twin's ip6 table counts them."""
    k, b = twins["nat"][6], twins["bpf-nat"][6]
    flows = {f"[{OUT6}]:{sp} {proto} {p}" for sp in SPORTS
             for proto, ports in (("udp", UDP_PORTS), ("tcp", TCP_PORTS)) for p in ports}
    assert set(k["seen"]) == flows, k["seen"]
    assert b["seen"] == k["seen"], (b["seen"], k["seen"])
    assert all(n == 5 for key, n in b["seen"].items() if " udp " in key), b["seen"]
    replies = {f"{sp} udp {p} from [{DST6}]:{p}" for sp in SPORTS for p in UDP_PORTS} | \
        {f"{sp} tcp {p} from [{DST6}]:{p}" for sp in SPORTS for p in TCP_PORTS}
    assert set(k["back"]) == replies and b["back"] == k["back"], (b["back"], k["back"])
    assert set(k["fseen"]) == {f"[{DST6}]:42000 udp 9091", f"[{DST6}]:42000 tcp 81"}, k["fseen"]
    assert b["fseen"] == k["fseen"] and b["fback"] == k["fback"], (b, k)
    assert set(b["fback"]) == {f"42000 udp 9091 from [{OUT6}]:9091",
                               f"42000 tcp 8081 from [{OUT6}]:8081"}, b["fback"]
    assert k["ping"] and b["ping"]
    # checksums: what reached the outside (translated) and the inside (translated back)
    for kind, r in (("nat", k), ("bpf-nat", b)):
        sums = r["checksums"]
        assert sums["out"]["bad"] == sums["in"]["bad"] == 0, (kind, sums)
        assert sums["out"]["zero"] == sums["in"]["zero"] == 0, (kind, sums)
        assert sums["out"]["ok"] >= 40 and sums["in"]["ok"] >= 40, (kind, sums)
    # counters: NAT66's own, as the kernel's ip6 table counts; IPv4's untouched by IPv6
    info, kinfo = b["info"], k["info"]["connections"]
    new6 = len(SPORTS) * (len(UDP_PORTS) + len(TCP_PORTS)) + 1   # + the ping
    assert info["masquerade6"]["new"] == kinfo["masquerade6"]["packets"] == new6, (info, kinfo)
    assert info["masquerade"] == twins["bpf-nat"][4]["info"]["masquerade"]
    for i in (2, 3):
        assert info["forwards"][i]["new"] == kinfo[f"forward {i}"]["packets"] == 1
        assert info["forwards"][i]["forward"] == FORWARDS6[i - 2]
    live6 = [t for t in info["translations"] if t["inside"].startswith("[")]
    assert len(live6) == new6 + 2, info["translations"]
    assert {t["outside"] for t in live6 if t["rule"] == "masquerade"} >= \
        {f"[{OUT6}]:{sp}" for sp in SPORTS}
    assert b["counters"]["errors"] == 0, b["counters"]
    text = b["shown"]["text"]
    assert f"masquerade6: {info['masquerade6']['packets']:,} packets, translations made: " \
        f"{new6}" in text, text
    assert "forward 2: " in text and f"to [{IN6}]:81" in text, text


@pytest.mark.parametrize("nat, place, says", [
    ({"kind": "bpf-nat", "outside": "r1",
      "forward": [{"proto": "udp", "port": 1000 + i, "to": IN} for i in range(33)]},
     "nodes.nat.forward", "33 port forwards; a bpf-nat holds at most 32"),
    ({"kind": "bpf-nat", "outside": "r1",
      "forward": [{"proto": "tcp", "port": 70000, "to": IN}]},
     "nodes.nat.forward[0].port", "65535"),
    ({"kind": "bpf-nat", "outside": "r1", "masquerade": True}, "nodes.nat", "masquerade"),
    ({"kind": "bpf-nat", "outside": "in"}, "nodes.nat", "not a neighbour"),
], ids=["too-many-forwards", "port-beyond-limit", "unknown-key", "outside-not-a-neighbour"])
def test_what_the_program_cannot_hold_is_refused(nat: dict[str, Any], place: str,
                                                 says: str) -> None:
    d = lab_dict(nat)
    refused(d, place, says)


def refused(d: dict[str, Any], place: str, says: str) -> None:
    with pytest.raises(SpecError, match=says) as e:
        Lab.from_dict(d, source="test_bpf_nat").up()
    assert place in str(e.value), str(e.value)
    assert not lab_dir(d["name"]).exists()
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{d['name']}:")]


def test_a_bpf_nat_no_chain_passes_is_refused() -> None:
    d = lab_dict({"kind": "bpf-nat", "outside": "r1"})
    del d["chains"]
    refused(d, "nodes.nat", "only as a function of a chain")


IN2 = "10.92.5.2"


def plain_lab(kind: str) -> dict[str, Any]:
    """lab_dict, dual-stack, with a second inside host (in2, on r0) and a chain for IPv4 UDP to
    6000-6001 only: traffic to other ports, and all IPv6, is routed to the NAT unlabelled, as is
    what comes back."""
    d = lab_dict({"kind": kind, "outside": "r1"})
    d["nodes"]["in2"] = {"kind": "host"}
    d["links"].append(link("in2", f"{IN2}/24", "r0", "10.92.5.1/24"))
    d["chains"]["c"]["classifiers"] = [{"ingress": "in", "proto": "udp", "dport": "6000-6001"}]
    d = dual_stack(d, "2001:2:92")
    d["chains"]["c"]["classifiers"][0]["family"] = "ipv4"
    return d


def test_routed_flows_are_translated_and_a_taken_port_is_replaced() -> None:
    """Two inside hosts send from the same source port to the same outside port, unlabelled
    (routed through the NAT node), through nat and through bpf-nat: the outside sees both from
    the outside address, the second on another port (bpf-nat: one of 32768-65535), and each
    host gets its own replies, alike through both; the same in IPv6 (bpf-nat finding the
    outside interface by the kernel's IPv6 routes)."""
    got = {}
    for kind in ("nat", "bpf-nat"):
        with running(plain_lab(kind)) as lab:
            for family, (dst, out) in {4: (DST, OUT), 6: (DST6, f"[{OUT6}]")}.items():
                seen1, back1 = run(lab, "out", "in", dst, (6100,), (7100,), (41000,))
                seen2, back2 = run(lab, "out", "in2", dst, (6100,), (7100,), (41000,))
                got[kind, family] = (seen1, back1, back2, {k.split()[0] for k in seen2}, out)
            info = lab.inspect()["nodes"]["nat"]["function"]
            counters = node_counters(lab)["nat"]
    for (kind, family), (seen1, back1, back2, ports, out) in got.items():
        dst = DST if family == 4 else f"[{DST6}]"
        assert seen1 == {f"{out}:41000 udp 6100": 5, f"{out}:41000 tcp 7100": 1}, (kind, seen1)
        assert back1 == {f"41000 udp 6100 from {dst}:6100": 5,
                         f"41000 tcp 7100 from {dst}:7100": 1}, (kind, back1)
        assert back2 == back1, (kind, back2)
        assert len(ports) == 2 and all(p.startswith(f"{out}:") for p in ports), (kind, ports)
        assert f"{out}:41000" not in ports, (kind, ports)
    for family in (4, 6):
        ports = got["bpf-nat", family][3]
        assert all(32768 <= int(p.rsplit(":", 1)[1]) <= 65535 for p in ports), ports
    assert info["masquerade"]["new"] == info["masquerade6"]["new"] == 4, info
    assert info["live_translations"] == 8, info
    assert counters["proxy_in"] == 0, counters   # nothing of it was labelled


FLOWS = tuple(range(43000, 43040))


def group_lab() -> dict[str, Any]:
    """lab_dict with the NAT a group of two bpf-nat instances side by side (nat1, nat2, each
    between r0 and r1, each masquerading toward r1 with its own outside address)."""
    d = lab_dict({"kind": "bpf-nat", "outside": "r1"})
    d["nodes"] = {**{k: v for k, v in d["nodes"].items() if k != "nat"},
                  "nat1": {"kind": "bpf-nat", "outside": "r1"},
                  "nat2": {"kind": "bpf-nat", "outside": "r1"}}
    d["links"] = [link("in", f"{IN}/24", "r0", "10.92.1.1/24"),
                  link("r0", "10.92.2.1/24", "nat1", "10.92.2.2/24"),
                  link("r0", "10.92.6.1/24", "nat2", "10.92.6.2/24"),
                  link("nat1", f"{OUT}/24", "r1", "10.92.3.2/24"),
                  link("nat2", "10.92.7.1/24", "r1", "10.92.7.2/24"),
                  link("r1", "10.92.4.1/24", "out", f"{DST}/24")]
    d["groups"] = {"nats": {"instances": ["nat1", "nat2"]}}
    d["chains"]["c"]["functions"] = ["nats"]
    d["chains"]["c"]["classifiers"] = [{"ingress": "in", "proto": "udp"}]
    return d


def translations(lab: Lab, node: str) -> dict[str, str]:
    """The live translations of ``node``, read from the lab's map: inside -> outside."""
    from sfclab.functions import bpf_nat_maps as M
    from sfclab.kernel import bpf

    with bpf.PinnedMap(str(lab_dir(lab.name) / "maps" / "sfc_nat_conns")) as m:
        return {t["inside"]: t["outside"]
                for t in M.translations(steering(lab).node_ids[node], m.items().items())}


@pytest.mark.serial  # the watcher's timing is the machine's load's
def test_a_translation_survives_the_failover_of_another_instance() -> None:
    """40 UDP flows through a group of two bpf-nats; nat2 dies (its namespace goes) and the
    watcher moves its slots: nat1's translations stay as they were, entry for entry, its flows
    keep their outside address and port and make no new translation; nat2's flows move to
    nat1 (new translations there) and their replies still reach the inside."""
    from sfclab.kernel import netns

    from .test_chain_ops import _events, _wait

    with running(group_lab()) as lab:
        subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "watch", lab.name],
                       check=True, capture_output=True, timeout=60)
        seen, back = run(lab, "out", "in", DST, (6000,), (), FLOWS)
        assert len(back) == len(FLOWS), back
        by = {k.split()[0].split(":")[0] for k in seen}
        assert by == {OUT, "10.92.7.1"}, seen     # both instances carry flows
        mine, theirs = translations(lab, "nat1"), translations(lab, "nat2")
        assert len(mine) + len(theirs) == len(FLOWS) and mine and theirs
        new_before = lab.inspect()["nodes"]["nat1"]["function"]["masquerade"]["new"]
        assert netns.delete(lab.netns("nat2"))
        _wait(lambda: bool(_events(lab, "failover")), timeout=10)
        seen2, back2 = run(lab, "out", "in", DST, (6000,), (), FLOWS)
        after = translations(lab, "nat1")
        new_after = lab.inspect()["nodes"]["nat1"]["function"]["masquerade"]["new"]
    # nat1's state untouched: every translation as it was, and its flows still through it
    assert {k: after.get(k) for k in mine} == mine
    assert {k for k in seen2 if k.startswith(f"{OUT}:")} >= \
        {f"{mine[k]} udp 6000" for k in mine}, (seen2, mine)
    # nat2's flows moved to nat1, one new translation each, and their replies reached in
    assert set(after) == set(mine) | set(theirs)
    assert new_after - new_before == len(theirs), (new_before, new_after, len(theirs))
    assert len(back2) == len(FLOWS) and all(n == 5 for n in back2.values()), back2
