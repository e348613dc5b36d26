"""Added instances on another host than their attach node (issue 14): joined through a VXLAN
tunnel in the two hosts' contexts (planned VNI, never in the node), carrying the chain's
traffic, removed by ``chain rm``; the same host keeps a plain veth."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.state import LabState
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import hostops
from sfclab.live import record, request

from .test_chain_hosts import GROUP, named
from .test_chain_ops import chain_file, counters, running, send

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def link(ns: str, dev: str) -> dict[str, Any] | None:
    cp = subprocess.run(["ip", "-n", ns, "-d", "-s", "-j", "link", "show", "dev", dev],
                        capture_output=True, text=True, check=False)
    return json.loads(cp.stdout)[0] if cp.returncode == 0 else None


def tunnel(lab: str, host: str, vni: int) -> dict[str, Any] | None:
    return link(f"sfclab:{lab}:@{host}", f"vxn{vni}")


def test_an_instance_on_another_host_carries_traffic_through_a_tunnel(
        lab_name: str, tmp_path: Path, capsys) -> None:
    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        d = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, GROUP)))
        got = record.load_addition(LabState(lab.name), "grp")
        assert got is not None
        nodes = {n.node: n for n in got[0].nodes}
        on_edge = next(n for n, i in d["instances"].items() if i["host"] == "edge2")
        on_local = next(n for n, i in d["instances"].items() if i["host"] == "local")
        assert nodes[on_local].vni is None  # same host as r1: a plain veth
        e = link(nodes[on_local].netns, "eth0")
        assert e is not None and e["linkinfo"]["info_kind"] == "veth"
        vni = nodes[on_edge].vni
        assert vni is not None
        for host in ("local", "edge2"):
            t = tunnel(lab.name, host, vni)
            assert t is not None, host
            assert t["linkinfo"]["info_kind"] == "vxlan"
            assert t["linkinfo"]["info_data"]["id"] == vni
            assert t["master"] == f"brn{vni}"
        # the node holds a veth, never the tunnel; its peer is the port in edge2's context
        e = link(nodes[on_edge].netns, "eth0")
        assert e is not None and e["linkinfo"]["info_kind"] == "veth"
        assert link(f"sfclab:{lab.name}:@edge2", f"pn{vni}") is not None
        before = {h: tunnel(lab.name, h, vni)["stats64"]["rx"]["packets"]  # type: ignore
                  for h in ("local", "edge2")}
        got_n = [send(lab, "src", str(lab.address("dst")), 42000 + k, 5002, 20)
                 for k in range(12)]
        # a flow's first datagram may meet an unresolved neighbour; the rest must cross
        assert sum(got_n) >= 234 and min(got_n) >= 18, got_n
        assert counters(lab.name)[on_edge]["proxy_in"] > 0
        after = {h: tunnel(lab.name, h, vni)["stats64"]["rx"]["packets"]  # type: ignore
                 for h in ("local", "edge2")}
        assert after["edge2"] > before["edge2"] and after["local"] > before["local"]
        # shown like the lab file's hosted links: inspect and host ls (VNI, ends, attach)
        ins = lab.inspect()
        hl = next(x for x in ins["host_links"] if x["vni"] == vni)
        assert hl["added"] and hl["attach"] == "bridge"
        assert [(e["node"], e["host"], e["present"]) for e in hl["ends"]] == \
            [("r1", "local", True), (on_edge, "edge2", True)]
        rows = {r["host"]: r for r in hostops.list_hosts(lab.name)}
        for host in ("local", "edge2"):
            t = next(t for t in rows[host]["tunnels"] if t["vni"] == vni)
            assert t["ends"] == ["r1@local", f"{on_edge}@edge2"] and t["present"]
        assert main(["host", "ls", lab.name]) == 0
        assert f"tunnel added: r1@local - {on_edge}@edge2, vni {vni}, attach bridge" in \
            capsys.readouterr().out
        # the graph draws the lab as it runs: the added host, both instances, their links
        assert main(["graph", lab.name]) == 0
        mm = capsys.readouterr().out
        edge_box = mm.split('subgraph n_host_edge2["host edge2"]')[1].split("end")[0]
        local_box = mm.split('subgraph n_host_local["host local"]')[1].split("end")[0]
        assert f"n_{on_edge.replace('-', '_')}" in edge_box and "n_src" in local_box
        assert f"n_{on_local.replace('-', '_')}" in local_box
        assert f'|"bridge vni {vni}' in mm  # the tunnel's edge, labelled like a hosted link
        assert f'-.->|"grp: {on_edge}"|' in mm and f'-.->|"grp: {on_local}"|' in mm
        assert main(["graph", lab.name, "--format", "dot"]) == 0
        dot = capsys.readouterr().out
        assert f'"r1" -- "{on_edge}" [label="bridge vni {vni}' in dot or \
            f'"{on_edge}" -- "r1" [label="bridge vni {vni}' in dot
        assert main(["graph", lab.name, "--format", "html"]) == 0
        page = capsys.readouterr().out
        assert f'"vni": {vni}' in page and f'"id": "{on_edge}"' in page
        from sfclab.web.topology import topology
        topo = topology(lifecycle.load_plan(lab.name)[1].to_dict())
        added = [x for x in topo["links"] if x["added"]]
        assert sorted({x["source"], x["target"]} == {"r1", on_edge} or
                      {x["source"], x["target"]} == {"r1", on_local} for x in added) == \
            [True, True]
        assert len({x["id"] for x in topo["links"]}) == len(topo["links"])
        assert {g["name"] for g in topo["groups"] if g["kind"] == "host"} >= {"edge2"}
        r = chain_add.remove_chain(request.RemoveChain(lab.name, "grp"))
        assert not r["errors"]
        assert not [x for x in lab.inspect().get("host_links", []) if x["vni"] == vni]
        for host in ("local", "edge2"):
            for dev in (f"vxn{vni}", f"brn{vni}", f"pn{vni}"):
                assert link(f"sfclab:{lab.name}:@{host}", dev) is None, (host, dev)


@pytest.mark.parametrize("after_s", [0.8, 0.0])
def test_kill_9_of_a_chain_add_across_hosts_then_down_leaves_nothing(
        lab_name: str, tmp_path: Path, after_s: float) -> None:
    """The underlay, the context of ``local`` and the tunnels are journaled (their namespaces)
    before they are made: ``down`` after a ``kill -9`` at any moment leaves no namespace
    (``running`` checks) and nothing of the lab in this machine's root namespace; 0.0: killed
    as soon as the underlay's namespace appears."""
    import signal
    import sys
    import time

    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "add", lab.name,
                              chain_file(tmp_path, GROUP)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if after_s:
            time.sleep(after_s)
        else:  # as soon as the tunnel's making has begun: the underlay's namespace is there
            t0 = time.monotonic()
            while not netns.exists(f"sfclab:{lab.name}:-underlay") and p.poll() is None:
                assert time.monotonic() - t0 < 30
                time.sleep(0.002)
            assert p.poll() is None, p.returncode  # killed in the middle, not after
        p.send_signal(signal.SIGKILL)
        p.wait()
    root = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                     text=True, check=True).stdout)
    assert not [x["ifname"] for x in root if x["ifname"].startswith(("vxn", "brn", "pn"))
                and lab_name in (x.get("ifalias") or "")]


def test_on_a_lab_file_with_hosts_the_tunnel_uses_its_underlay(lab_name: str,
                                                               tmp_path: Path) -> None:
    """Hosts of the lab file are already joined to its underlay: the tunnel ends at their
    addresses there, no underlay of its own is made."""
    d = named(lab_name)
    d["hosts"] = {"h1": {"cpus": 1, "memory": "512M"}, "h2": {"cpus": 1, "memory": "512M"}}
    d["nodes"] = {n: {**v, "host": "h1"} for n, v in d["nodes"].items()}
    with running(d) as lab:
        r = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, GROUP)))
        assert sorted(i["host"] for i in r["instances"].values()) == ["h1", "h2"]
        got = record.load_addition(LabState(lab.name), "grp")
        assert got is not None
        by_host = {n.host: n for n in got[0].nodes}
        assert by_host["h1"].vni is None
        vni = by_host["h2"].vni
        assert vni is not None
        _, plan = lifecycle.load_plan(lab.name)
        addr = {h.name: h.address.split("/")[0] for h in plan.hosts}
        for host, other in (("h1", "h2"), ("h2", "h1")):
            t = tunnel(lab.name, host, vni)
            assert t is not None and t["linkinfo"]["info_data"]["id"] == vni
            assert t["linkinfo"]["info_data"]["remote"] == addr[other]
        assert not netns.exists(f"sfclab:{lab.name}:@local")
        got_n = [send(lab, "src", str(lab.address("dst")), 43000 + k, 5002, 20)
                 for k in range(8)]
        assert sum(got_n) >= 156 and min(got_n) >= 18, got_n
        assert counters(lab.name)[by_host["h2"].node]["proxy_in"] > 0


def test_a_host_joins_the_underlay_through_the_hosts_part(lab_name: str) -> None:
    """An added host's join to the underlay is a change made by the hosts' part of ``up``'s
    engine: its ``ul0`` carries the mark ``up`` gives a host's (``@<host>:underlay``), with
    its address, on the underlay's bridge; the journal gains the underlay's and ``local``'s
    namespaces once each, never the added host's context again."""
    from sfclab.live.hosts import underlay
    from sfclab.plan.tunnels import LABELLED_MTU

    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        state = LabState(lab.name)
        _, plan = lifecycle.load_plan(lab.name)
        before = state.journal()
        j = {h: underlay.join(state, plan, h, LABELLED_MTU) for h in ("edge2", "local")}
        new = state.journal()[len(before):]
        assert sorted(e["name"] for e in new if e["op"] == "netns") == \
            sorted([f"sfclab:{lab.name}:-underlay", f"sfclab:{lab.name}:@local"])
        assert not [e for e in new if e["op"] != "netns"], new
        for host in ("edge2", "local"):
            ul = link(f"sfclab:{lab.name}:@{host}", "ul0")
            assert ul is not None, host
            assert ul.get("ifalias") == f"sfclab:{lab.name}:@{host}:underlay"
            peer = f"ua{j[host].address.split('/')[0].split('.')[-1]}"
            port = link(f"sfclab:{lab.name}:-underlay", peer)
            assert port is not None and port["master"] == "br0", (host, port)
        cp = subprocess.run(["ip", "netns", "exec", f"sfclab:{lab.name}:@edge2", "ping", "-c1",
                             "-W2", j["local"].address.split("/")[0]], capture_output=True,
                            text=True, check=False)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert underlay.join(state, plan, "edge2", LABELLED_MTU) == j["edge2"]  # once


def test_a_context_not_the_labs_is_never_joined_to_the_underlay(lab_name: str) -> None:
    """A namespace with ``local``'s context's name that sfclab did not make (no mark) is
    refused, naming it; nothing is added to it, it is not journaled (``down`` leaves it),
    and the underlay's namespace the change journaled is not left behind."""
    from sfclab.errors import RealizeError
    from sfclab.live.hosts import underlay
    from sfclab.plan.tunnels import LABELLED_MTU

    with running(named(lab_name)) as lab:
        ctx = f"sfclab:{lab.name}:@local"
        subprocess.run(["ip", "netns", "add", ctx], check=True)
        try:
            state = LabState(lab.name)
            _, plan = lifecycle.load_plan(lab.name)
            with pytest.raises(RealizeError, match=ctx):
                underlay.join(state, plan, "local", LABELLED_MTU)
            assert link(ctx, "ul0") is None
            assert not netns.exists(f"sfclab:{lab.name}:-underlay")
            assert ctx not in [e.get("name") for e in state.journal()]
        finally:
            subprocess.run(["ip", "netns", "del", ctx], check=True)


def test_an_added_instances_tunnel_is_removed_only_while_it_carries_its_mark(
        lab_name: str, tmp_path: Path) -> None:
    """Every device an added instance's tunnel puts in an emulated host's context (port,
    VXLAN, bridge) carries the lab's mark (``sfclab:<lab>:@<host>:<dev>``); ``chain rm``
    deletes each only while it does: one whose alias was changed is left, and said so."""
    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        d = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, GROUP)))
        on_edge = next(n for n, i in d["instances"].items() if i["host"] == "edge2")
        got = record.load_addition(LabState(lab.name), "grp")
        assert got is not None
        vni = next(n.vni for n in got[0].nodes if n.node == on_edge)
        assert vni is not None
        for host in ("local", "edge2"):
            for dev in (f"pn{vni}", f"vxn{vni}", f"brn{vni}"):
                x = link(f"sfclab:{lab.name}:@{host}", dev)
                assert x is not None and x.get("ifalias") == \
                    f"sfclab:{lab.name}:@{host}:{dev}", (host, dev, x)
        ctx = f"sfclab:{lab.name}:@edge2"
        subprocess.run(["ip", "-n", ctx, "link", "set", "dev", f"brn{vni}", "alias", "other"],
                       check=True)
        r = chain_add.remove_chain(request.RemoveChain(lab.name, "grp"))
        assert [e for e in r["errors"] if f"brn{vni}" in e and "left alone" in e], r["errors"]
        assert link(ctx, f"brn{vni}") is not None  # not the lab's: left
        assert link(ctx, f"vxn{vni}") is None
        for dev in (f"vxn{vni}", f"brn{vni}", f"pn{vni}"):
            assert link(f"sfclab:{lab.name}:@local", dev) is None, dev


def test_a_failed_join_leaves_an_interface_it_did_not_make(lab_name: str) -> None:
    """A join that fails on a ``ul0`` already in the host's context (not made by sfclab) is
    rolled back without touching it: the error names the object, the device stays, and a
    later join of another host still works."""
    from sfclab.errors import RealizeError
    from sfclab.live.hosts import underlay
    from sfclab.plan.tunnels import LABELLED_MTU

    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        state = LabState(lab.name)
        _, plan = lifecycle.load_plan(lab.name)
        underlay.join(state, plan, "local", LABELLED_MTU)  # the underlay is the lab's now
        ctx = f"sfclab:{lab.name}:@edge2"
        subprocess.run(["ip", "-n", ctx, "link", "add", "ul0", "type", "bridge"], check=True)
        with pytest.raises(RealizeError, match="ul0"):
            underlay.join(state, plan, "edge2", LABELLED_MTU)
        x = link(ctx, "ul0")
        assert x is not None and x["linkinfo"]["info_kind"] == "bridge"
        hostops.add_host(lab.name, "edge3", 1, 256 << 20)
        _, plan = lifecycle.load_plan(lab.name)
        j = underlay.join(state, plan, "edge3", LABELLED_MTU)
        assert link(f"sfclab:{lab.name}:@edge3", "ul0") is not None and j.address


def test_a_tunnel_name_taken_in_a_context_refuses_the_add_and_leaves_the_lab_as_it_was(
        lab_name: str, tmp_path: Path) -> None:
    """A device sfclab did not make holding the name of an added instance's tunnel port in a
    host's context: ``chain add`` is refused naming it before any of the tunnel is made in
    either context (no port left unmarked at the attach node's host), the device is left, the
    instances' namespaces are gone; once the name is free the same add works."""
    from sfclab.errors import RealizeError
    from sfclab.plan.tunnels import ADDED_VNI_BASE

    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        ctx = f"sfclab:{lab.name}:@edge2"
        port = f"pn{ADDED_VNI_BASE}"
        subprocess.run(["ip", "-n", ctx, "link", "add", port, "type", "veth", "peer", "name",
                        "other0"], check=True)
        req = request.read_chain_file(lab.name, chain_file(tmp_path, GROUP))
        with pytest.raises(RealizeError, match=f"interface {port} of host edge2"):
            chain_add.add_chain(req)
        left = link(ctx, port)
        assert left is not None and left.get("ifalias") is None  # not the lab's: untouched
        for host in ("local", "edge2"):
            for dev in (f"vxn{ADDED_VNI_BASE}", f"brn{ADDED_VNI_BASE}"):
                assert link(f"sfclab:{lab.name}:@{host}", dev) is None, (host, dev)
        assert link(f"sfclab:{lab.name}:@local", port) is None
        assert not any(netns.exists(f"sfclab:{lab.name}:fw-{k}") for k in (1, 2))
        assert record.load_addition(LabState(lab.name), "grp") is None
        subprocess.run(["ip", "-n", ctx, "link", "del", port], check=True)
        d = chain_add.add_chain(req)
        assert sorted(i["host"] for i in d["instances"].values()) == ["edge2", "local"]


def test_a_chain_added_over_a_lab_files_tunnel_carries_traffic(lab_name: str,
                                                              tmp_path: Path) -> None:
    """A lab file with no chain: its tunnel (r1 on h1 to dst on h2) was made without NAPI on
    its hosts' ports, as nothing redirected into it by XDP then.  A chain added whose path
    crosses it (r1 forwards to dst by its XDP program) turns GRO on at those ports
    (:func:`sfclab.live.chains.wire.napi_ports`): a veth drops XDP-redirected frames without
    NAPI, and every classified datagram was lost."""
    d = {"name": lab_name,
         "hosts": {"h1": {"cpus": 1, "memory": "512M"}, "h2": {"cpus": 1, "memory": "512M"}},
         "nodes": {"src": {"kind": "host", "host": "h1"}, "r1": {"kind": "router", "host": "h1"},
                   "dst": {"kind": "host", "host": "h2"}},
         "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]}
    with running(d) as lab:
        body = {"name": "over", "attach": "r1", "egress": "dst",
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5002}],
                "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.25}]}
        r = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        (node, inst), = r["instances"].items()
        assert inst["host"] == "h1"  # beside r1: only the lab file's tunnel is crossed
        got = send(lab, "src", str(lab.address("dst")), 43100, 5002, 20)
        assert got == 20
        assert counters(lab.name)[node]["proxy_in"] >= 20
