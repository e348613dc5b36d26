"""The bpf-firewall against its kernel twin on real namespaces: the same flows (TCP and UDP on
several ports, from two sources, in IPv4 and IPv6) through the same chain with ``kind:
firewall`` and with ``kind: bpf-firewall`` and the same rules pass and drop alike, counted at
the receiver -- IPv4 rules match IPv4 packets only, IPv6 rules IPv6 packets only, rules without
prefixes both, as in the kernel firewall's ``inet`` table; the stateful mode passes the replies
of accepted connections only, in either family; under policy drop a node finds its IPv6
neighbours only if the rules accept ICMPv6, as the kernel twin filtering its input hook; labels
still steer after the function (the next hop receives the rest of the stack); per-rule counters
in ``inspect``."""

from __future__ import annotations

import json
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

UDP_PORTS = (6000, 6001, 6002)
TCP_PORTS = (7000, 7001, 7002)
A, B = "10.91.1.2", "10.91.2.2"   # the two sources
DST = "10.91.5.2"
A6, B6, DST6 = "2001:2:91:1::2", "2001:2:91:2::2", "2001:2:91:5::2"  # the same, in a dual lab

#: counts what it receives on the given UDP and TCP ports (of both families with a fourth
#: argument ``dual``) by "source proto port"; ends when its standard input is closed (the
#: senders are done: traffic() closes it) and nothing more has come for 0.5 s, or after
#: SECONDS at most
RECEIVER = r"""
import json, selectors, socket, sys, time
udp, tcp = [int(p) for p in sys.argv[1].split(",")], [int(p) for p in sys.argv[2].split(",")]
fams = [(socket.AF_INET, "0.0.0.0")]
if sys.argv[4:] == ["dual"]:
    fams.append((socket.AF_INET6, "::"))
sel, got = selectors.DefaultSelector(), {}
for fam, any_addr in fams:
    for kind, name, ports in ((socket.SOCK_DGRAM, "udp", udp), (socket.SOCK_STREAM, "tcp", tcp)):
        for p in ports:
            s = socket.socket(fam, kind); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((any_addr, p))
            if kind == socket.SOCK_STREAM:
                s.listen(16)
            sel.register(s, selectors.EVENT_READ, (name, p))
sel.register(sys.stdin, selectors.EVENT_READ, ("stdin", 0))
print("ready", flush=True)
end = last = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    for key, _ in sel.select(0.1):
        proto, port = key.data
        if proto == "stdin":  # closed: quiet for 0.5 s from now on, and it ends
            sys.stdin.read(); sel.unregister(sys.stdin); end = min(last, time.monotonic() + 0.5)
            continue
        if end < last:  # stopping: something came, so 0.5 s more of quiet
            end = min(last, time.monotonic() + 0.5)
        if proto == "udp":
            data, peer = key.fileobj.recvfrom(2048)
        else:
            c, peer = key.fileobj.accept(); c.settimeout(2)
            try:
                data = c.recv(100)
            except OSError:
                data = b""
            c.close()
        if data:
            k = f"{peer[0]} {proto} {port}"; got[k] = got.get(k, 0) + 1
print(json.dumps(got), flush=True)
"""
#: to each destination (comma-separated, either family): 5 datagrams to each UDP port, then
#: one connection to each TCP port, all at once (a dropped one gives up after 1.5 s)
SENDER = r"""
import socket, sys, threading
dsts, udp, tcp = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3].split(",")
def connect(dst, p):
    try:
        c = socket.create_connection((dst, int(p)), timeout=1.5); c.sendall(b"hello"); c.close()
    except OSError:
        pass
for dst in dsts:
    s = socket.socket(socket.AF_INET6 if ":" in dst else socket.AF_INET, socket.SOCK_DGRAM)
    for p in udp:
        for _ in range(5):
            s.sendto(b"sfclab bpf-firewall", (dst, int(p)))
    s.close()
tries = [threading.Thread(target=connect, args=(dst, p)) for dst in dsts for p in tcp]
for t in tries:
    t.start()
for t in tries:
    t.join()
"""


def link(a: str, aa: str, b: str, ba: str) -> dict[str, Any]:
    return {"endpoints": [{"node": a, "address": aa}, {"node": b, "address": ba}]}


def lab_dict(fw: dict[str, Any], dual: bool = False) -> dict[str, Any]:
    """a, b -> r0 -> fw -> r1 -> dst; a chain from both sources through fw.  ``dual``: a lab of
    ``ip: dual`` (10.91.X.Y is also 2001:2:91:X::Y) whose chain takes both families."""
    host = {"kind": "host"}
    d = {"name": "bf" + secrets.token_hex(3),
         "nodes": {"a": host, "b": host, "r0": {"kind": "router"}, "fw": fw,
                   "r1": {"kind": "router"}, "dst": host},
         "links": [link("a", f"{A}/24", "r0", "10.91.1.1/24"),
                   link("b", f"{B}/24", "r0", "10.91.2.1/24"),
                   link("r0", "10.91.3.1/24", "fw", "10.91.3.2/24"),
                   link("fw", "10.91.4.1/24", "r1", "10.91.4.2/24"),
                   link("r1", "10.91.5.1/24", "dst", f"{DST}/24")],
         "chains": {"c": {"classifiers": [{"ingress": "a"}, {"ingress": "b"}],
                          "functions": ["fw"], "egress": "dst"}}}
    return dual_stack(d, "2001:2:91") if dual else d


#: policy accept; what the rules leave: a: udp 6000, 6002; b: udp 6000, 6001, tcp 7000, 7001
RULES = [{"action": "drop", "proto": "udp", "src": f"{A}/32", "dport": 6001},
         {"action": "accept", "proto": "tcp", "src": "10.91.2.0/24", "dport": "7000-7001"},
         {"action": "drop", "proto": "tcp", "dport": "7000-7002"},
         {"action": "drop", "proto": "udp", "src": f"{B}/32", "dport": "6002-6100"}]
PASSING = {f"{A} udp 6000", f"{A} udp 6002", f"{B} udp 6000", f"{B} udp 6001",
           f"{B} tcp 7000", f"{B} tcp 7001"}
#: after RULES in the dual-stack labs, IPv6 rules (4, 5).  RULES' rules with IPv4 prefixes (0,
#: 1, 3) take no IPv6 packet, their rule without (2, TCP) takes both families; rule 5, of every
#: IPv6 source, takes no IPv4 packet.  Of IPv6 this leaves a: udp 6001; b: udp 6000, 6001; no
#: TCP (rule 1 accepts b's IPv4 only)
RULES6 = [{"action": "drop", "proto": "udp", "src": "2001:2:91:1::/64", "dport": 6000},
          {"action": "drop", "proto": "udp", "src": "::/0", "dport": 6002}]
PASSING6 = {f"{A6} udp 6001", f"{B6} udp 6000", f"{B6} udp 6001"}


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_bpf_firewall")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        assert not lab_dir(lab.name).exists()


def traffic(lab: Lab, dsts: tuple[str, ...] = (DST,)) -> dict[str, int]:
    """Every source sends 5 datagrams to each UDP port and opens one connection to each TCP
    port of each of ``dsts`` (in a dual lab: both families); what the receiver got, by "source
    proto port"."""
    ports = ",".join(map(str, UDP_PORTS)), ",".join(map(str, TCP_PORTS))
    dual = ["dual"] if any(":" in d for d in dsts) else []
    rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, *ports, "12", *dual],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    senders = [lab.popen(src, [sys.executable, "-c", SENDER, ",".join(dsts), *ports])
               for src in ("a", "b")]
    for s in senders:
        s.wait(timeout=60)
    out, _ = rx.communicate(timeout=60)  # closes its input: it ends once quiet
    return json.loads(out.strip().splitlines()[-1])


def passed(got: dict[str, int]) -> set[str]:
    return {k for k, n in got.items() if n}


@pytest.fixture(scope="module")
def twins() -> dict[str, dict[str, Any]]:
    """The kernel firewall and the bpf-firewall, each in a dual-stack lab with RULES and RULES6,
    the same IPv4 and IPv6 traffic through each: what the receiver got, the function's inspect
    (and chain inspect of the bpf-firewall), by kind."""
    out = {}
    for kind in ("firewall", "bpf-firewall"):
        with running(lab_dict({"kind": kind, "rules": RULES + RULES6}, dual=True)) as lab:
            got = traffic(lab, (DST, DST6))
            out[kind] = {"got": got, "info": lab.inspect()["nodes"]["fw"]["function"],
                         "shown": chain_inspect(lab) if kind == "bpf-firewall" else None}
    return out


def of_family(got: dict[str, int], family: int) -> dict[str, int]:
    return {k: n for k, n in got.items() if (":" in k.split()[0]) == (family == 6)}


def test_the_same_flows_pass_as_through_the_kernel_firewall(twins: dict[str, Any]) -> None:
    results = {kind: of_family(t["got"], 4) for kind, t in twins.items()}
    counters = {kind: t["info"] for kind, t in twins.items()}
    shown = twins["bpf-firewall"]["shown"]
    assert passed(results["firewall"]) == PASSING, results
    assert passed(results["bpf-firewall"]) == PASSING, results
    # every UDP datagram of a passing flow arrived, through both
    for kind, got in results.items():
        assert all(got[k] == 5 for k in PASSING if " udp " in k), (kind, got)
    # per-rule counters: the UDP drop rules count the same datagrams in both (IPv4 ones only,
    # though the lab also carries IPv6 to the same ports)
    kernel = counters["firewall"]["hooks"]["forward"]["rules"]
    ebpf = counters["bpf-firewall"]["rules"]
    assert [r["rule"] for r in ebpf] == [r["rule"] for r in kernel]
    for i in (0, 3):
        assert ebpf[i]["packets"] == kernel[i]["packets"] == 5, (ebpf, kernel)
    assert ebpf[1]["packets"] > 0 and ebpf[2]["packets"] > 0
    # chain inspect shows the same per-rule counters (read after the traffic, so no fewer)
    assert [r["packets"] for r in shown["functions"]["fw"]["rules"]] == \
        [r["packets"] for r in ebpf]


def test_the_same_ipv6_flows_pass_as_through_the_kernel_firewall(twins: dict[str, Any]) -> None:
    """IPv6 through the same labs: RULES6's IPv6 rules drop IPv6 (rule 5, of every IPv6 source,
    no IPv4: a's IPv4 to 6002 passes, the other test says), RULES' IPv4 rules let IPv6 be (a's
    IPv6 to 6001 passes, its IPv4 does not), their rule without prefixes drops IPv6 TCP too;
    the IPv6 rules' counters are the same in both and count IPv6 only."""
    results = {kind: of_family(t["got"], 6) for kind, t in twins.items()}
    for kind, got in results.items():
        assert passed(got) == PASSING6, (kind, got)
        assert all(got[k] == 5 for k in PASSING6), (kind, got)
    kernel = twins["firewall"]["info"]["hooks"]["forward"]["rules"]
    ebpf = twins["bpf-firewall"]["info"]["rules"]
    assert [r["rule"] for r in ebpf[4:]] == [r["rule"] for r in kernel[4:]] == RULES6
    for i, n in ((4, 5), (5, 10)):
        assert ebpf[i]["packets"] == kernel[i]["packets"] == n, (i, ebpf, kernel)
        # bytes as the kernel counts them: IPv6 header and payload (40 + 8 + 19 per datagram)
        assert ebpf[i]["bytes"] == kernel[i]["bytes"] == n * 67, (i, ebpf, kernel)
    text = twins["bpf-firewall"]["shown"]["text"]
    assert "rule 4: 5 packets  action drop proto udp src 2001:2:91:1::/64 dport 6000" in text, text


def chain_inspect(lab: Lab) -> dict[str, Any]:
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name, "c",
                         "--json"], capture_output=True, text=True, timeout=60, check=True)
    text = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name,
                           "c"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "function fw: policy accept" in text and "rule 0: 5 packets" in text, text
    return {**json.loads(cp.stdout)["chains"]["c"], "text": text}


def test_stateful_mode_passes_replies_of_accepted_connections_only() -> None:
    """Policy drop and one accept rule per family (tcp to 7000 from a): the connection needs its
    replies (routed back through fw, unlabelled) to pass: only the stateful mode lets them, in
    IPv4 and in IPv6 alike.  A dual-stack lab, whose routed IPv6 needs neighbour discovery
    through fw: ICMPv6 is accepted."""
    rules = [{"action": "accept", "proto": "tcp", "src": f"{A}/32", "dport": 7000},
             {"action": "accept", "proto": "tcp", "src": f"{A6}/128", "dport": 7000},
             {"action": "accept", "proto": "udp", "dport": 6000},
             {"action": "accept", "proto": "icmpv6"}]
    got = {}
    for stateful in (False, True):
        fw = {"kind": "bpf-firewall", "policy": "drop", "stateful": stateful, "rules": rules}
        with running(lab_dict(fw, dual=True)) as lab:
            got[stateful] = traffic(lab, (DST, DST6))
            info = lab.inspect()["nodes"]["fw"]["function"]
        if stateful:
            assert info["established"]["packets"] > 0, info
    udp = {f"{A} udp 6000", f"{B} udp 6000", f"{A6} udp 6000", f"{B6} udp 6000"}
    assert passed(got[True]) == udp | {f"{A} tcp 7000", f"{A6} tcp 7000"}, got
    assert passed(got[False]) == udp, got


#: echoes UDP datagrams to port 6000 of both families, until killed
ECHO = r"""
import select, socket
socks = []
for fam, any_addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((any_addr, 6000)); socks.append(s)
print("ready", flush=True)
while True:
    for s in select.select(socks, [], [], 30)[0]:
        data, peer = s.recvfrom(2048); s.sendto(data, peer)
"""
#: 3 datagrams to port 6000 of each address given; prints the echoes that came back, by address
ASK = r"""
import json, socket, sys
got = {}
for dst in sys.argv[1:]:
    s = socket.socket(socket.AF_INET6 if ":" in dst else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5); got[dst] = 0
    for _ in range(3):
        s.sendto(b"neighbour?", (dst, 6000))
        try:
            got[dst] += len(s.recvfrom(100)[0]) > 0
        except OSError:
            pass
print(json.dumps(got), flush=True)
"""


def neighbour_lab(fw: dict[str, Any]) -> dict[str, Any]:
    """a -> fw -> dst, dual-stack; a chain from a through fw (the echoes come back routed)."""
    host = {"kind": "host"}
    return dual_stack({"name": "bn" + secrets.token_hex(3),
                       "nodes": {"a": host, "fw": fw, "dst": host},
                       "links": [link("a", f"{A}/24", "fw", "10.91.1.1/24"),
                                 link("fw", "10.91.5.1/24", "dst", f"{DST}/24")],
                       "chains": {"c": {"classifiers": [{"ingress": "a"}], "functions": ["fw"],
                                        "egress": "dst"}}}, "2001:2:91")


@pytest.mark.parametrize("kind", ["firewall", "bpf-firewall"])
def test_ipv6_neighbours_are_found_under_policy_drop_only_if_icmpv6_is_accepted(kind: str) -> None:
    """Policy drop, UDP accepted, and ICMPv6 accepted or not: the echoes of UDP datagrams come
    back routed through fw, which dst must find as its IPv6 neighbour (and fw dst).  Without
    ICMPv6 no IPv6 echo comes back (neighbour discovery is dropped: the policy counts it), with
    it all do; IPv4 (ARP is no IP) in both.  The bpf-firewall filters what arrives for the node
    itself, as the kernel firewall does with ``hooks: [forward, input]``: they agree."""
    hooks = {"hooks": ["forward", "input"]} if kind == "firewall" else {}
    got, dropped = {}, {}
    for icmpv6 in (False, True):
        rules = [{"action": "accept", "proto": "udp"}] + \
            ([{"action": "accept", "proto": "icmpv6"}] if icmpv6 else [])
        with running(neighbour_lab({"kind": kind, "policy": "drop", "rules": rules,
                                    **hooks})) as lab:
            echo = lab.popen("dst", [sys.executable, "-c", ECHO], stdout=subprocess.PIPE,
                             text=True)
            try:
                assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
                cp = lab.exec("a", [sys.executable, "-c", ASK, DST, DST6])
            finally:
                echo.kill()
                echo.wait()
            got[icmpv6] = json.loads(cp.stdout.strip().splitlines()[-1])
            info = lab.inspect()["nodes"]["fw"]["function"]
            dropped[icmpv6] = info["hooks"]["input"]["policy"]["packets"] \
                if kind == "firewall" else info["policy_counter"]["packets"]
    assert got == {False: {DST: 3, DST6: 0}, True: {DST: 3, DST6: 3}}, (kind, got)
    assert dropped[False] > 0, (kind, dropped)   # the neighbour solicitations, at least


@pytest.mark.parametrize("ttl, at_r1", [(5, "delivered"), (4, "ttl_expired")])
def test_labels_steer_after_the_function(ttl: int, at_r1: str) -> None:
    """fw pops exactly its own two labels and sends the rest of the stack on: r1 (the next
    hop, whose XDP forwarder takes frames before any capture could) finds its own label on
    top, with the TTL two less than fw's.  Stack 16 (r0), 17 (fw's proxy), 18 (fw's forward),
    19 (r1), all at ``ttl``: r0 leaves ttl-1 on 17, fw ttl-3 on 19, so r1 delivers at 5 and
    finds it expired at 4."""
    d = lab_dict({"kind": "bpf-firewall", "rules": RULES})
    d["chains"]["c"]["ttl"] = ttl
    with running(d) as lab:
        sp = steering(lab)
        assert [(h.node, h.action) for h in sp.hops] == [
            ("r0", "forward"), ("fw", "proxy"), ("fw", "forward"), ("r1", "forward")]
        assert sp.attach["fw"] == [("sfc_fw", "eth0", "xdp"), ("sfc_fw", "eth1", "xdp")]
        before = node_counters(lab)
        got = traffic(lab)
        after = node_counters(lab)
        delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in ("fw", "r1")}
        # what fw let through (passing flows only) is what r1 took its own label off
        assert delta["fw"]["forwarded"] == delta["r1"][at_r1] > 0, delta
        assert delta["r1"]["unknown_label"] == 0 and delta["fw"]["errors"] == 0, delta
        # into the function: every labelled packet; out: those it passed on
        assert delta["fw"]["proxy_out"] == delta["fw"]["forwarded"] < delta["fw"]["proxy_in"]
        if at_r1 == "delivered":
            assert passed(got) == PASSING and delta["r1"]["popped"] == delta["fw"]["forwarded"]
        else:
            assert not any(" udp " in k for k in passed(got)), got


@pytest.mark.parametrize("fw, says", [
    ({"kind": "bpf-firewall", "rules": [{"action": "drop", "proto": "udp", "dport": i}
                                        for i in range(65)]}, "at most 64"),
    ({"kind": "bpf-firewall", "hooks": ["input"]}, "'hooks' is a key of kind firewall"),
    ({"kind": "bpf-firewall", "rules": [{"action": "drop", "proto": "udp",
                                         "dport": "10-70000"}]}, "ports from 0 to 65535"),
], ids=["too-many-rules", "kernel-key", "port-range"])
def test_rules_the_program_cannot_hold_are_refused(fw: dict[str, Any], says: str) -> None:
    d = lab_dict(fw)
    with pytest.raises(SpecError, match=says) as e:
        Lab.from_dict(d, source="test_bpf_firewall").up()
    assert "nodes.fw" in str(e.value)
    assert not lab_dir(d["name"]).exists()


def test_a_bpf_firewall_no_chain_passes_is_refused() -> None:
    d = lab_dict({"kind": "bpf-firewall"})
    d["chains"]["c"]["functions"] = []
    d["nodes"]["fw2"] = {"kind": "bpf-firewall"}
    d["links"].append(link("fw2", "10.91.6.1/24", "r1", "10.91.6.2/24"))
    del d["chains"]
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        Lab.from_dict(d, source="test_bpf_firewall").up()
    assert "nodes.fw" in str(e.value)
    assert not lab_dir(d["name"]).exists()
