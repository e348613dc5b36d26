"""SRv6 and NSH chains share the live operations of MPLS ones (issue 28, item 3), on real
namespaces: ``chain trace`` of every path of a symmetric two-instance group, both ways (SRv6:
one step per SID; NSH: one per node, whose forwarder lowers the header's TTL); ``chain add`` of
a symmetric NAT chain on a lab whose interfaces were sized for MPLS, carrying full-size TCP
segments both ways under the encapsulation; ``chain migrate`` of that NAT under UDP and TCP,
nothing lost; failover when an instance of a group dies: every flow on the survivor, still
under the encapsulation; and one function instance serving two chains, each going on its own
way after it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sfclab.kernel import netns
from sfclab.live import request
from sfclab.live.ops import add as chain_add
from sfclab.cli import main
from sfclab.live.ops import chains, migrate
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import DataPlane, nsh_rows

from .test_chain_ops import (ENV, PROBE, ROOT, _events, _wait, base_lab, chain_file, counters,
                             echo, migrate_under_udp_and_tcp, natted, running)
from .test_chain_trace import pool_lab
from .test_sfc import (FW, HOST, TCP_CLIENT, TCP_SERVER, Capture, lab_dict, line, node_counters,
                       send)
from .test_sfc import echo as echo_at
from .test_sfc import running as running_lab

ENCAPS = ["srv6", "nsh"]
#: the ethertype of each encapsulation's frames between hops
ETHERTYPE = {"srv6": 0x86DD, "nsh": 0x894F, "mpls": 0x8847}


def under_encap(frame: dict[str, Any], encap: str) -> bool:
    """Whether a captured frame (``sfcprobe capture``) carries ``encap``'s header."""
    return "srh" in frame if encap == "srv6" else frame["ethertype"] == ETHERTYPE[encap]


def runs(nodes: list[str]) -> list[str]:
    """``nodes`` with each run of one node kept once."""
    return [n for k, n in enumerate(nodes) if k == 0 or nodes[k - 1] != n]


@pytest.mark.parametrize("encap", ENCAPS)
def test_trace_follows_each_path_of_a_group_both_ways(lab_name: str, encap: str) -> None:
    d = pool_lab(lab_name, True)
    d["chains"]["web"]["encap"] = encap
    with running(d) as lab:
        t = chains.trace(lab.name, "web")
        assert t["delivered"] and t["in_order"], t
        assert len(t["paths"]) == 4
        sp = lifecycle.load_plan(lab.name)[1].steering
        owner = {h.label: h.node for h in sp.hops}
        dirs = [x for x in sp.directions if x.chain == "web"]
        for p in t["paths"]:
            assert p["took_path"] and p["delivered"], p
            assert p["instances_seen"] == p["instances"], p
            labels = [owner[lbl] for lbl in dirs[p["direction"]].paths[p["path"]].stack]
            # a step per SID, or (NSH) per node: the function's node once, for two labels
            want = runs(labels) if encap == "nsh" else labels
            assert [h["seen_at"] for h in p["hops"]] == want, p["hops"]
        assert {p["instances_seen"][0] for p in t["paths"] if not p["reverse"]} == \
            {"fw1", "fw2"}


@pytest.mark.parametrize("encap", ENCAPS)
def test_chain_add_of_a_nat_chain_carries_full_size_tcp_both_ways(tmp_path: Path,
                                                                   encap: str) -> None:
    """The lab file's MPLS chain gave r1 and f1 room for labels only; the added chain's
    frames, TCP segments of a full MTU under the encapsulation, must still pass them."""
    with running(base_lab()) as lab:
        body = {"name": "natted", "attach": "r1", "symmetric": True, "encap": encap,
                "classifiers": [{"ingress": "src", "proto": "tcp", "dport": 8080}],
                "egress": "dst", "functions": [{"name": "nat", "kind": "nat"}]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        # the captures end 1 s after frames() is called; 60 s is only their cap (a segment a
        # neighbour's flood dropped comes back after TCP's 1, 2, 4 s timeouts, past 8 s)
        out_src = Capture(lab, "src", "eth0", 60.0)
        out_dst = Capture(lab, "dst", "eth0", 60.0)
        before = counters(lab.name)
        srv = lab.popen("dst", [sys.executable, "-c", TCP_SERVER], stdout=subprocess.PIPE,
                        text=True)
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        cp = lab.exec("src", [sys.executable, "-c", TCP_CLIENT, str(lab.address("dst"))],
                      check=False, timeout=60)
        assert cp.stdout.strip() == "ok", (cp.stdout, cp.stderr)
        peer, n = srv.communicate(timeout=30)[0].split()
        assert int(n) == 200000 and peer != str(lab.address("src"))  # NATed
        after = counters(lab.name)
        for end in ("src", "dst"):
            assert after[end]["classified"] > before[end]["classified"], end
        assert after["nat-1"]["proxy_miss"] == 0 and after["nat-1"]["proxy_out"] > 0
        fwd = [x for x in out_src.frames() if x["out"] and x.get("dport") == 8080]
        rev = [x for x in out_dst.frames() if x["out"] and x.get("sport") == 8080]
        assert fwd and rev and all(under_encap(x, encap) for x in fwd + rev), (fwd[:2], rev[:2])
        # full-size segments went by, in both directions
        assert max(x["len"] for x in fwd) > 1500 and max(x["len"] for x in rev) > 1500


@pytest.mark.serial  # counts loss under 10 kpps, which the machine's load changes
@pytest.mark.parametrize("encap", ENCAPS)
def test_migrate_a_nat_of_an_encap_chain_loses_nothing(tmp_path: Path, sfcgen: str,
                                                       encap: str) -> None:
    with running(base_lab()) as lab:
        body = natted(encap=encap)
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        d, seen_from = migrate_under_udp_and_tcp(lab, "nat-1")
        assert d["clone"] == "nat-1.m1" and seen_from != str(lab.address("src"))
        c0 = counters(lab.name)
        wire = Capture(lab, "src", "eth0")
        server = echo(lab, 5005, 4.0)
        cp = subprocess.run(["ip", "netns", "exec", lab.netns("src"), *PROBE, "udp-send",
                             str(lab.address("dst")), "42000", "5005", "10"],
                            capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60,
                            check=True)
        server.wait(timeout=30)
        assert int(cp.stdout) == 10
        c1 = counters(lab.name)
        assert c1["nat-1.m1"]["proxy_in"] - c0["nat-1.m1"]["proxy_in"] >= 10
        sent = [x for x in wire.frames() if x["out"] and x.get("dport") == 5005]
        assert len(sent) == 10 and all(under_encap(x, encap) for x in sent), sent[:2]
        sp = lifecycle.load_plan(lab.name)[1].steering
        assert {x.encap for x in sp.directions if x.chain == "natted"} == {encap}


@pytest.mark.serial  # failover within its watcher's period, which the machine's load changes
@pytest.mark.parametrize("encap", ENCAPS)
def test_failover_moves_the_dead_instances_flows_to_the_survivor(tmp_path: Path,
                                                                 encap: str) -> None:
    with running(base_lab()) as lab:
        body = {"name": "pool", "attach": "r1", "encap": encap,
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5005}],
                "egress": "dst",
                "functions": [{"name": "fw", "kind": "firewall", "rules": [],
                               "instances": 2}]}
        got = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert got["watcher"]
        dst = str(lab.address("dst"))

        def flows(sport0: int) -> int:
            server = echo(lab, 5005, 30.0)
            cp = subprocess.run(["ip", "netns", "exec", lab.netns("src"), *PROBE, "udp-flows",
                                 dst, "5005", str(sport0), "40"], capture_output=True,
                                text=True, env=ENV, cwd=ROOT, timeout=120, check=True)
            server.kill()
            server.wait()
            return int(cp.stdout)

        c0 = counters(lab.name)
        assert flows(30000) == 40
        c1 = counters(lab.name)
        assert all(c1[f]["proxy_in"] > c0[f]["proxy_in"] for f in ("fw-1", "fw-2")), c1
        assert netns.delete(lab.netns("fw-1"))
        _wait(lambda: bool(_events(lab, "failover")), 10.0)
        ev = _events(lab, "failover")[-1]
        assert ev["instances_out"] == ["fw-1"] and ev["paths_left"] == 1
        wire = Capture(lab, "src", "eth0", 12.0)
        assert flows(31000) == 40  # the same ports as before would do too: all on fw-2
        c2 = counters(lab.name)
        assert c2["fw-2"]["proxy_in"] - c1["fw-2"]["proxy_in"] == 40
        sent = [x for x in wire.frames() if x["out"] and x.get("dport") == 5005]
        assert len(sent) == 40 and all(under_encap(x, encap) for x in sent), sent[:2]


@pytest.mark.parametrize("encap", ENCAPS)
def test_one_instance_serves_two_chains_each_its_own_way_after_it(encap: str) -> None:
    """f serves chains a and b; after f, a's packets go on through g1 and b's through g2,
    whatever f's routes say: the proxy put back each chain's own SIDs or (SPI, SI)."""
    d = lab_dict(dict(src=HOST, f=FW, g1=FW, g2=FW, dst=HOST),
                 [*line("src", "f"), *line("f", "g1", "dst"), *line("f", "g2", "dst")],
                 {"a": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                        "functions": ["f", "g1"], "egress": "dst", "encap": encap},
                  "b": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 8000}],
                        "functions": ["f", "g2"], "egress": "dst", "encap": encap}})
    with running_lab(d) as lab:
        dst = str(lab.address("dst"))
        before = node_counters(lab)
        sa, sb = echo_at(lab, "dst", 7000, 4), echo_at(lab, "dst", 8000, 4)
        assert send(lab, "src", dst, 40000, 7000, 7) == 7
        assert send(lab, "src", dst, 40001, 8000, 11) == 11
        after = node_counters(lab)
        delta = {n: after[n]["proxy_in"] - before[n]["proxy_in"] for n in ("f", "g1", "g2")}
        assert delta == {"f": 18, "g1": 7, "g2": 11}, delta
        sa.wait(timeout=30)
        sb.wait(timeout=30)


def nsh_keys(lab: str) -> set[bytes]:
    """Every key of the lab's ``sfc_nsh`` map."""
    with DataPlane(lab) as dp:
        return set(dp.nsh_map().keys())


def test_nsh_entries_go_with_their_chain_and_a_migrations_old_paths(tmp_path: Path) -> None:
    """An NSH chain's (SPI, SI) entries are the data plane's own: ``chain migrate`` leaves
    exactly those of the paths the chain has after it (none of the old paths'), ``chain rm``
    leaves none of the chain's."""
    with running(base_lab()) as lab:
        before = nsh_keys(lab.name)  # the lab file's chain is MPLS: no entry
        chain_add.add_chain(request.read_chain_file(
            lab.name, chain_file(tmp_path, natted(encap="nsh"))))
        sp = lifecycle.load_plan(lab.name)[1].steering
        planned = {k for k, _ in nsh_rows(sp, [d for d in sp.directions if d.chain == "natted"])}
        assert planned and nsh_keys(lab.name) == before | planned
        d = migrate.migrate(request.MigrateInstance(lab.name, "nat-1", None))
        assert d["clone"] == "nat-1.m1"
        sp = lifecycle.load_plan(lab.name)[1].steering
        now = {k for k, _ in nsh_rows(sp, [d for d in sp.directions if d.chain == "natted"])}
        assert now and now != planned  # the clone's paths: new SPIs
        assert nsh_keys(lab.name) == before | now
        assert main(["chain", "rm", lab.name, "natted"]) == 0
        assert nsh_keys(lab.name) == before
