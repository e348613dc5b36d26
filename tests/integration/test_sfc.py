"""The SFC data plane on real namespaces, checked by capture, counters and label traces: the
P4-SFC paper's three functional tests, functions that never see a label, unlabelled delivery,
hops in chain order, bypass of unclassified traffic, NAT with TCP both ways, a function shared
by two chains, a symmetric weighted group, a 16-label stack, TTL expiry, classifier priority
and wildcards, entries added to a running lab, and removal of everything loaded."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from sfclab.api import Lab
from sfclab.plan.flowhash import flow_hash
from sfclab.plan.sfc import SteeringPlan
from sfclab.realize.dataplane import lab_dir
from sfclab.live.ops import chains, classify

ROOT = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "tests.integration.sfcprobe"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def line(*names: str) -> list[dict[str, Any]]:
    return [{"endpoints": [a, b]} for a, b in zip(names, names[1:])]


def lab_dict(nodes: dict[str, Any], links: list[dict[str, Any]], chains_: dict[str, Any],
             groups: dict[str, Any] | None = None) -> dict[str, Any]:
    d = {"name": "s" + secrets.token_hex(3), "nodes": nodes, "links": links, "chains": chains_}
    if groups:
        d["groups"] = groups
    return d


FW = {"kind": "firewall", "rules": []}
HOST = {"kind": "host"}
ROUTER = {"kind": "router"}


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_sfc")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        here = lab_dir(lab.name)
        # nothing of the lab is left, nor an empty parent (another lab's directory may keep it)
        assert not here.exists() and (not here.parent.exists() or any(here.parent.iterdir()))


def steering(lab: Lab) -> SteeringPlan:
    return lab._plan().steering


def node_counters(lab: Lab) -> dict[str, dict[str, int]]:
    from sfclab.realize.dataplane import DataPlane

    sp = steering(lab)
    with DataPlane(lab.name) as dp:
        return {n: dp.counters(i) for n, i in sp.node_ids.items()}


class Capture:
    """Frames seen on ``iface`` of ``node`` from now until one second after :meth:`frames` is
    called (``seconds`` at most): the probe ends when its standard input closes, so the test
    waits for what is still on its way, not for the rest of a fixed window."""

    def __init__(self, lab: Lab, node: str, iface: str, seconds: float = 4.0):
        self.p = lab.popen(node, [*PROBE, "capture", iface, str(seconds), "until-eof"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                           cwd=ROOT)
        assert self.p.stdout is not None and self.p.stdout.readline().strip() == "ready"

    def frames(self) -> list[dict[str, Any]]:
        out, _ = self.p.communicate(timeout=30)  # closes its standard input
        return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


class Echo:
    """A UDP echo server on ``port`` of ``node`` (the probe's ``udp-echo``): it answers until
    one second after :meth:`wait` is called (``seconds`` at most)."""

    def __init__(self, lab: Lab, node: str, port: int, seconds: float = 6.0):
        self.p = lab.popen(node, [*PROBE, "udp-echo", str(port), str(seconds), "until-eof"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                           cwd=ROOT)
        assert self.p.stdout is not None and self.p.stdout.readline().strip() == "ready"

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, once it has answered what was still on its way."""
        self.p.communicate(timeout=timeout)  # closes its standard input
        return self.p.returncode

    def kill(self) -> None:
        self.p.kill()


def echo(lab: Lab, node: str, port: int, seconds: float = 6.0) -> Echo:
    return Echo(lab, node, port, seconds)


def send(lab: Lab, node: str, dst: str, sport: int, dport: int, n: int) -> int:
    cp = subprocess.run(["ip", "netns", "exec", lab.netns(node), *PROBE, "udp-send", dst,
                         str(sport), str(dport), str(n)], capture_output=True, text=True,
                        env=ENV, cwd=ROOT, timeout=60, check=True)
    return int(cp.stdout.strip())


# ------------------------------------------------------------ the paper's functional tests
TOPOLOGIES = {
    "one function": (dict(src=HOST, f1=FW, dst=HOST), line("src", "f1", "dst"), ["f1"]),
    "two functions side by side": (dict(src=HOST, f1=FW, f2=FW, dst=HOST),
                                   line("src", "f1", "f2", "dst"), ["f1", "f2"]),
    "two functions apart": (dict(src=HOST, f1=FW, r1=ROUTER, r2=ROUTER, f2=FW, dst=HOST),
                            line("src", "f1", "r1", "r2", "f2", "dst"), ["f1", "f2"]),
}


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_p4sfc_functional(topology: str) -> None:
    nodes, links, fns = TOPOLOGIES[topology]
    d = lab_dict(nodes, links, {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                       "dport": "7000-7010"}],
                                      "functions": fns, "egress": "dst"}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        sp = steering(lab)
        path = sp.directions[0].paths[0]
        # the hops the data plane takes, in order (label TTL expiry, hop by hop)
        t = chains.trace(lab.name, "c")
        assert t["delivered"] and t["in_order"], t
        assert [h["seen_at"] for h in t["paths"][0]["hops"]] == \
            [sp.hops[lbl - 16].node for lbl in path.stack]
        server = echo(lab, "dst", 7005)
        ins = {f: Capture(lab, f, "eth0") for f in fns}
        at_dst = Capture(lab, "dst", "eth0")
        before = node_counters(lab)
        assert send(lab, "src", dst, 40000, 7005, 20) == 20
        # unclassified: another port follows routes, past the functions' proxies
        bypass = echo(lab, "dst", 9999, 3)
        assert send(lab, "src", dst, 40001, 9999, 5) == 5
        after = node_counters(lab)
        for f in fns:
            frames = [x for x in ins[f].frames() if not x["out"]]
            assert frames and all(x["ethertype"] == 0x0800 for x in frames), frames[:3]
            assert after[f]["proxy_in"] - before[f]["proxy_in"] == 20
        got = [x for x in at_dst.frames() if not x["out"] and x.get("dport") == 7005]
        assert len(got) == 20 and all(x["ethertype"] == 0x0800 for x in got)
        assert after["src"]["classified"] - before["src"]["classified"] == 20
        server.wait(timeout=30)
        bypass.wait(timeout=30)


def test_labels_on_the_wire_between_two_functions() -> None:
    """Between f1 and f2 the frames carry exactly the rest of the planned stack, TTLs down."""
    nodes, links, fns = TOPOLOGIES["two functions side by side"]
    d = lab_dict(nodes, links, {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                                      "functions": fns, "egress": "dst", "ttl": 50}})
    with running(d) as lab:
        path = steering(lab).directions[0].paths[0]
        out = Capture(lab, "f1", "eth1")
        server = echo(lab, "dst", 7000, 3)
        send(lab, "src", str(lab.address("dst")), 40000, 7000, 3)
        sent = [x for x in out.frames() if x["out"] and x["ethertype"] == 0x8847]
        assert len(sent) == 3
        # src pushed 4 (f1 proxy, f1 forward, f2 proxy, f2 forward); f1 popped two
        assert [lbl for lbl, _, _ in sent[0]["labels"]] == path.stack[2:]
        assert [b for _, b, _ in sent[0]["labels"]] == [0, 1]
        assert sent[0]["labels"][0][2] == 48  # TTL 50, less one per label popped
        server.wait(timeout=30)


# ---------------------------------------------------------------------------- NAT, TCP
TCP_SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(1); print("ready", flush=True)
c, peer = s.accept(); data = b""
while len(data) < 200000:
    d = c.recv(65536)
    if not d: break
    data += d
c.sendall(data[::-1]); c.close(); print(peer[0], len(data), flush=True)
"""
TCP_CLIENT = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 8080), timeout=10)
msg = bytes(range(256)) * 782; s.sendall(msg[:200000]); got = b""
while len(got) < 200000:
    d = s.recv(65536)
    if not d: break
    got += d
print("ok" if got == msg[:200000][::-1] else "bad")
"""


def nat_chain_lab(encap: str = "mpls") -> dict:
    """src - r1 - nat - r2 - dst, chain web: TCP to 8080 through the NAT, symmetric."""
    return lab_dict(dict(src=HOST, r1=ROUTER, nat={"kind": "nat", "outside": "r2"}, r2=ROUTER,
                         dst=HOST),
                    line("src", "r1", "nat", "r2", "dst"),
                    {"web": {"classifiers": [{"ingress": "src", "proto": "tcp", "dport": 8080}],
                             "functions": ["nat"], "egress": "dst", "symmetric": True,
                             "encap": encap}})


def tcp_through_the_nat_both_ways(lab: Lab) -> tuple[dict, dict]:
    """200,000 bytes from src to dst:8080 and back reversed, through :func:`nat_chain_lab`'s
    chain: the server saw the NAT's address (the function rewrote the tuple) and the
    encapsulation still went back on (both directions were steered through the proxy, none
    missed it).  The node counters before and after."""
    before = node_counters(lab)
    srv = lab.popen("dst", [sys.executable, "-c", TCP_SERVER], stdout=subprocess.PIPE,
                    text=True)
    assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
    cp = lab.exec("src", [sys.executable, "-c", TCP_CLIENT, str(lab.address("dst"))])
    assert cp.stdout.strip() == "ok"
    peer, n = srv.communicate(timeout=30)[0].split()
    after = node_counters(lab)
    nat_addrs = {str(a.ip) for a in lab._plan().addresses_of("nat")}
    assert peer in nat_addrs and int(n) == 200000
    assert after["src"]["classified"] > before["src"]["classified"]
    assert after["dst"]["classified"] > before["dst"]["classified"]
    assert after["nat"]["proxy_out"] - before["nat"]["proxy_out"] >= \
        after["src"]["classified"] - before["src"]["classified"]
    assert after["nat"]["proxy_miss"] == before["nat"]["proxy_miss"]
    return before, after


def test_nat_in_a_symmetric_chain_tcp_both_ways() -> None:
    with running(nat_chain_lab()) as lab:
        tcp_through_the_nat_both_ways(lab)


# ------------------------------------------------------------------ one function, two chains
def test_function_shared_by_two_chains() -> None:
    """f serves chains a and b; after f, a's packets go on through g1 and b's through g2,
    whatever f's routes say."""
    d = lab_dict(dict(src=HOST, f=FW, g1=FW, g2=FW, dst=HOST),
                 [*line("src", "f"), *line("f", "g1", "dst"), *line("f", "g2", "dst")],
                 {"a": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                        "functions": ["f", "g1"], "egress": "dst"},
                  "b": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 8000}],
                        "functions": ["f", "g2"], "egress": "dst"}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        before = node_counters(lab)
        sa, sb = echo(lab, "dst", 7000, 4), echo(lab, "dst", 8000, 4)
        send(lab, "src", dst, 40000, 7000, 7)
        send(lab, "src", dst, 40001, 8000, 11)
        after = node_counters(lab)
        delta = {n: after[n]["proxy_in"] - before[n]["proxy_in"] for n in ("f", "g1", "g2")}
        assert delta == {"f": 18, "g1": 7, "g2": 11}
        sa.wait(timeout=30)
        sb.wait(timeout=30)


# ------------------------------------------------------------- a symmetric weighted group
def test_symmetric_weighted_group() -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, fw1=FW, fw2=FW, r2=ROUTER, dst=HOST),
                 [*line("src", "r1"), *line("r1", "fw1", "r2"), *line("r1", "fw2", "r2"),
                  *line("r2", "dst")],
                 {"c": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                        "functions": ["pool"], "egress": "dst", "symmetric": True}},
                 {"pool": {"instances": ["fw1", "fw2"], "weights": [1, 3]}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        server = echo(lab, "dst", 7000, 60)
        # stickiness and the way back: each flow's packets, both ways, on one instance
        for i in range(20):
            before = node_counters(lab)
            assert send(lab, "src", dst, 30000 + i, 7000, 3) == 3
            after = node_counters(lab)
            delta = sorted(after[f]["proxy_in"] - before[f]["proxy_in"] for f in ("fw1", "fw2"))
            assert delta == [0, 6], (i, delta)
        # shares over 1,000 flows, within 10 % of the weights
        before = node_counters(lab)
        cp = subprocess.run(["ip", "netns", "exec", lab.netns("src"), *PROBE, "udp-flows", dst,
                             "7000", "20000", "1000"], capture_output=True, text=True, env=ENV,
                            cwd=ROOT, timeout=300, check=True)
        assert int(cp.stdout) == 1000
        after = node_counters(lab)
        n1 = (after["fw1"]["proxy_in"] - before["fw1"]["proxy_in"]) / 2
        n2 = (after["fw2"]["proxy_in"] - before["fw2"]["proxy_in"]) / 2
        assert n1 + n2 == 1000
        # each flow on the instance its slot names (the classifier's hash over the plan's
        # Maglev table), and the table shared by the weights
        fwd = next(x for x in steering(lab).directions if x.chain == "c" and not x.reverse)
        assert abs(fwd.slots.count(0) / len(fwd.slots) - 0.25) <= 0.01
        src = IPv4Address(str(lab.address("src")))
        on = [fwd.paths[fwd.slots[flow_hash(src, IPv4Address(dst), 20000 + k, 7000, 17, 1)
                                 % len(fwd.slots)]].instances for k in range(1000)]
        assert (n1, n2) == (on.count(["fw1"]), on.count(["fw2"]))
        # 1,000 flows: the shares within three standard deviations (1.4 %) of the weights
        assert abs(n1 / 1000 - 0.25) <= 0.042 and abs(n2 / 1000 - 0.75) <= 0.042, (n1, n2)
        server.kill()
        server.wait()


# --------------------------------------------------------------- deep stacks, TTL, priority
def test_sixteen_label_stack() -> None:
    routers = [f"r{i}" for i in range(1, 14)]
    nodes = {"src": HOST, **{r: ROUTER for r in routers}, "dst": HOST}
    d = lab_dict(nodes, line("src", *routers, "dst"),
                 {"deep": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                           "functions": ["r4", "r8", "r12"], "egress": "dst"}})
    with running(d) as lab:
        assert [len(s) for s in steering(lab).stack_of("deep")] == [16]
        server = echo(lab, "dst", 7000, 4)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 5) == 5
        c = node_counters(lab)
        assert c["r13"]["delivered"] >= 5 and all(c[r]["proxy_in"] >= 5
                                                  for r in ("r4", "r8", "r12"))
        t = chains.trace(lab.name, "deep")
        assert t["in_order"] and t["delivered"] and len(t["paths"][0]["hops"]) == 16
        server.wait(timeout=30)


def test_ttl_expiry_drops_and_counts() -> None:
    d = lab_dict(dict(src=HOST, r1=ROUTER, f=FW, r2=ROUTER, dst=HOST),
                 line("src", "r1", "f", "r2", "dst"),
                 {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}], "functions": ["f"],
                        "egress": "dst", "ttl": 3}})
    with running(d) as lab:
        server = echo(lab, "dst", 7000, 4)
        # labels: r1 (TTL 3), f proxy (2), f forward (1: expires)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 4) == 0
        c = node_counters(lab)
        assert c["f"]["ttl_expired"] == 4 and c["f"]["proxy_in"] == 4
        assert c["r2"]["popped"] == 0
        server.wait(timeout=30)


def test_classifier_priority_and_wildcards() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, f2=FW, dst=HOST),
                 [*line("src", "f1", "dst"), *line("src", "f2", "dst")],
                 {"hi": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000,
                                          "priority": 20}],
                         "functions": ["f1"], "egress": "dst"},
                  "lo": {"classifiers": [{"ingress": "src", "proto": "udp",
                                          "dst": "198.18.0.0/15", "priority": 10}],
                         "functions": ["f2"], "egress": "dst"}})
    with running(d) as lab:
        dst = str(lab.address("dst"))
        before = node_counters(lab)
        servers = [echo(lab, "dst", p, 4) for p in (7000, 7001)]
        send(lab, "src", dst, 40000, 7000, 3)  # both match: the higher priority wins
        send(lab, "src", dst, 40001, 7001, 5)  # only the wildcard matches
        after = node_counters(lab)
        assert after["f1"]["proxy_in"] - before["f1"]["proxy_in"] == 3
        assert after["f2"]["proxy_in"] - before["f2"]["proxy_in"] == 5
        for s in servers:
            s.wait(timeout=30)


def test_classify_from_file_on_a_running_lab(tmp_path: Path) -> None:
    nodes, links, fns = TOPOLOGIES["one function"]
    d = lab_dict(nodes, links, {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                       "dport": 7000}],
                                      "functions": fns, "egress": "dst"}})
    with running(d) as lab:
        f = tmp_path / "more.yaml"
        f.write_text("- {ingress: src, proto: udp, dport: 9000-9099}\n")
        res = classify.classify(lab.name, "c", str(f))
        assert res["classifiers"] == 1 and res["entries"] > 0
        server = echo(lab, "dst", 9050, 3)
        before = node_counters(lab)["f1"]["proxy_in"]
        send(lab, "src", str(lab.address("dst")), 40000, 9050, 4)
        assert node_counters(lab)["f1"]["proxy_in"] - before == 4
        server.wait(timeout=30)
        # a bad entry among good ones: exit 2 with file, line and place, nothing written
        from sfclab.realize.dataplane import DataPlane

        with DataPlane(lab.name) as dp:
            keys = sum(1 for _ in dp.maps["sfc_classes"].keys())
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps([{"ingress": "src", "proto": "udp", "dport": 9100 + i}
                                   for i in range(1000)] + [{"ingress": "src", "proto": "icmp",
                                                             "dport": 80}]))
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "classify", lab.name,
                             "c", "--from-file", str(bad)], capture_output=True, text=True)
        assert cp.returncode == 2 and f"{bad}:1: [1000]: expected ports only with" in cp.stderr
        other = tmp_path / "other.yaml"
        other.write_text("- {ingress: src, proto: udp}\n- {ingress: dst, proto: udp}\n")
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "classify", lab.name,
                             "c", "--from-file", str(other)], capture_output=True, text=True)
        assert cp.returncode == 2 and "[1].ingress: expected one of the chain's ingress" \
            in cp.stderr
        with DataPlane(lab.name) as dp:
            assert sum(1 for _ in dp.maps["sfc_classes"].keys()) == keys


def test_the_cli_reports_chains(tmp_path: Path) -> None:
    nodes, links, fns = TOPOLOGIES["one function"]
    d = lab_dict(nodes, links, {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                                      "functions": fns, "egress": "dst"}})
    with running(d) as lab:
        run = [sys.executable, "-m", "sfclab.cli", "chain"]
        ls = json.loads(subprocess.run([*run, "ls", lab.name, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
        assert ls[0]["chain"] == "c" and ls[0]["functions"] == ["f1"]
        ins = json.loads(subprocess.run([*run, "inspect", lab.name, "--json"],
                                        capture_output=True, text=True, check=True).stdout)
        assert "f1" in ins["chains"]["c"]["nodes"]
        tr = subprocess.run([*run, "trace", lab.name, "c"], capture_output=True, text=True)
        assert tr.returncode == 0 and "delivered to dst: yes" in tr.stdout
        bad = subprocess.run([*run, "inspect", lab.name, "nosuch"], capture_output=True,
                             text=True)
        assert bad.returncode == 2 and "no chain 'nosuch'" in bad.stderr
