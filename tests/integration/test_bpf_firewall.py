"""The bpf-firewall against its kernel twin on real namespaces: the same flows (TCP and UDP on
several ports, from two sources) through the same chain with ``kind: firewall`` and with
``kind: bpf-firewall`` and the same rules pass and drop alike, counted at the receiver; the
stateful mode passes the replies of accepted connections only; labels still steer after the
function (the next hop receives the rest of the stack); per-rule counters in ``inspect``."""

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

from .test_sfc import node_counters, steering

UDP_PORTS = (6000, 6001, 6002)
TCP_PORTS = (7000, 7001, 7002)
A, B = "10.91.1.2", "10.91.2.2"   # the two sources
DST = "10.91.5.2"

RECEIVER = r"""
import json, selectors, socket, sys, time
udp, tcp = [int(p) for p in sys.argv[1].split(",")], [int(p) for p in sys.argv[2].split(",")]
sel, got = selectors.DefaultSelector(), {}
for p in udp:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", p))
    sel.register(s, selectors.EVENT_READ, ("udp", p))
for p in tcp:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", p)); s.listen(16); sel.register(s, selectors.EVENT_READ, ("tcp", p))
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    for key, _ in sel.select(0.1):
        proto, port = key.data
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
SENDER = r"""
import socket, sys
dst, udp, tcp = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
for p in udp:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(5):
        s.sendto(b"sfclab bpf-firewall", (dst, int(p)))
    s.close()
for p in tcp:
    try:
        c = socket.create_connection((dst, int(p)), timeout=1.5); c.sendall(b"hello"); c.close()
    except OSError:
        pass
"""


def link(a: str, aa: str, b: str, ba: str) -> dict[str, Any]:
    return {"endpoints": [{"node": a, "address": aa}, {"node": b, "address": ba}]}


def lab_dict(fw: dict[str, Any]) -> dict[str, Any]:
    """a, b -> r0 -> fw -> r1 -> dst; a chain from both sources through fw."""
    host = {"kind": "host"}
    return {"name": "bf" + secrets.token_hex(3),
            "nodes": {"a": host, "b": host, "r0": {"kind": "router"}, "fw": fw,
                      "r1": {"kind": "router"}, "dst": host},
            "links": [link("a", f"{A}/24", "r0", "10.91.1.1/24"),
                      link("b", f"{B}/24", "r0", "10.91.2.1/24"),
                      link("r0", "10.91.3.1/24", "fw", "10.91.3.2/24"),
                      link("fw", "10.91.4.1/24", "r1", "10.91.4.2/24"),
                      link("r1", "10.91.5.1/24", "dst", f"{DST}/24")],
            "chains": {"c": {"classifiers": [{"ingress": "a"}, {"ingress": "b"}],
                             "functions": ["fw"], "egress": "dst"}}}


#: policy accept; what the rules leave: a: udp 6000, 6002; b: udp 6000, 6001, tcp 7000, 7001
RULES = [{"action": "drop", "proto": "udp", "src": f"{A}/32", "dport": 6001},
         {"action": "accept", "proto": "tcp", "src": "10.91.2.0/24", "dport": "7000-7001"},
         {"action": "drop", "proto": "tcp", "dport": "7000-7002"},
         {"action": "drop", "proto": "udp", "src": f"{B}/32", "dport": "6002-6100"}]
PASSING = {f"{A} udp 6000", f"{A} udp 6002", f"{B} udp 6000", f"{B} udp 6001",
           f"{B} tcp 7000", f"{B} tcp 7001"}


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_bpf_firewall")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        assert not lab_dir(lab.name).exists()


def traffic(lab: Lab) -> dict[str, int]:
    """Every source sends 5 datagrams to each UDP port and opens one connection to each TCP
    port; what the receiver got, by "source proto port"."""
    ports = ",".join(map(str, UDP_PORTS)), ",".join(map(str, TCP_PORTS))
    rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, *ports, "12"],
                   stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    senders = [lab.popen(src, [sys.executable, "-c", SENDER, DST, *ports])
               for src in ("a", "b")]
    for s in senders:
        s.wait(timeout=60)
    out, _ = rx.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1])


def passed(got: dict[str, int]) -> set[str]:
    return {k for k, n in got.items() if n}


def test_the_same_flows_pass_as_through_the_kernel_firewall() -> None:
    results = {}
    counters = {}
    for kind in ("firewall", "bpf-firewall"):
        with running(lab_dict({"kind": kind, "rules": RULES})) as lab:
            results[kind] = traffic(lab)
            counters[kind] = lab.inspect()["nodes"]["fw"]["function"]
            if kind == "bpf-firewall":
                shown = chain_inspect(lab)
    assert passed(results["firewall"]) == PASSING, results
    assert passed(results["bpf-firewall"]) == PASSING, results
    # every UDP datagram of a passing flow arrived, through both
    for kind, got in results.items():
        assert all(got[k] == 5 for k in PASSING if " udp " in k), (kind, got)
    # per-rule counters: the UDP drop rules count the same datagrams in both
    kernel = counters["firewall"]["hooks"]["forward"]["rules"]
    ebpf = counters["bpf-firewall"]["rules"]
    assert [r["rule"] for r in ebpf] == [r["rule"] for r in kernel]
    for i in (0, 3):
        assert ebpf[i]["packets"] == kernel[i]["packets"] == 5, (ebpf, kernel)
    assert ebpf[1]["packets"] > 0 and ebpf[2]["packets"] > 0
    # chain inspect shows the same per-rule counters (read after the traffic, so no fewer)
    assert [r["packets"] for r in shown["functions"]["fw"]["rules"]] == \
        [r["packets"] for r in ebpf]


def chain_inspect(lab: Lab) -> dict[str, Any]:
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name, "c",
                         "--json"], capture_output=True, text=True, timeout=60, check=True)
    text = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab.name,
                           "c"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "function fw: policy accept" in text and "rule 0: 5 packets" in text, text
    return json.loads(cp.stdout)["chains"]["c"]


def test_stateful_mode_passes_replies_of_accepted_connections_only() -> None:
    """Policy drop and one accept rule (tcp to 7000 from a): the connection needs its replies
    (routed back through fw, unlabelled) to pass: only the stateful mode lets them."""
    rules = [{"action": "accept", "proto": "tcp", "src": f"{A}/32", "dport": 7000},
             {"action": "accept", "proto": "udp", "dport": 6000}]
    got = {}
    for stateful in (False, True):
        fw = {"kind": "bpf-firewall", "policy": "drop", "stateful": stateful, "rules": rules}
        with running(lab_dict(fw)) as lab:
            got[stateful] = traffic(lab)
            info = lab.inspect()["nodes"]["fw"]["function"]
        if stateful:
            assert info["established"]["packets"] > 0, info
    assert passed(got[True]) == {f"{A} tcp 7000", f"{A} udp 6000", f"{B} udp 6000"}, got
    assert passed(got[False]) == {f"{A} udp 6000", f"{B} udp 6000"}, got


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
