"""The commands on a running lab on Kubernetes (issue 29, items 2 and 4), against the
:mod:`.kube` fixture's API server and its Nodes (emulated machines, each with its agent): a
3-host lab of two tenants sharing a NAT and a chain through it, built by ``up --kube``;
``exec`` of a node (its output and status through the Node's agent), ``traffic rate`` and
``traffic iperf`` between nodes on different Nodes (sender and receiver, client and server,
run by their Nodes' agents), the chain's
counters read through the agents, ``chain add`` (an instance on one Node, its tunnel to its
attach node's Node), ``chain migrate`` of that instance to another Node, ``chain rm``; and
``down`` leaving nothing: no namespace, device, state or object, no request left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.runtime import kubernetes_requests as requests

from .kube import KubeMachines
from .test_kube_build import devices, nothing_of, parts, sfclab

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = [pytest.mark.xdist_group("kube-b"), pytest.mark.long]


def tenant_chain_lab(tmp_path: Path, name: str) -> Path:
    """Two tenants sharing a NAT, and a chain through it, over three hosts:

        a1 (red, h1) ──┐
                       nat (red, blue; h2) ── fw (h2) ── srv (h3)
        b1 (blue, h1) ─┘

    chain web: UDP to 7000 from a1 through the NAT, then the firewall, to srv, symmetric."""
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({
        "name": name,
        "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1}, "h3": {"cpus": 1}},
        "tenants": {"red": {"nodes": ["a1", "nat"]}, "blue": {"nodes": ["b1", "nat"]}},
        "nodes": {"a1": {"kind": "host", "host": "h1"}, "b1": {"kind": "host", "host": "h1"},
                  "nat": {"kind": "nat", "outside": "fw", "host": "h2"},
                  "fw": {"kind": "firewall", "rules": [], "host": "h2"},
                  "srv": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["a1", "nat"]}, {"endpoints": ["b1", "nat"]},
                  {"endpoints": ["nat", "fw"]}, {"endpoints": ["fw", "srv"]}],
        "chains": {"web": {"classifiers": [{"ingress": "a1", "proto": "udp", "dport": 7000}],
                           "functions": ["nat", "fw"], "egress": "srv", "symmetric": True}}}))
    return f


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``sfclab ARGS`` with no ``--kube``: the lab's journal names its cluster."""
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def ok(cp: subprocess.CompletedProcess, ms: KubeMachines) -> dict:
    assert cp.returncode == 0, cp.stderr + ms.logs()
    return json.loads(cp.stdout) if cp.stdout.strip().startswith(("{", "[")) else {}


def no_requests(ms: KubeMachines, lab: str) -> list[str]:
    return [r["metadata"]["name"] for r in ms.cluster.admin().items(
        requests.requests_path(), f"sfclab.dev/lab={lab}")]


def test_exec_traffic_and_chains_on_a_lab_on_kubernetes(kube_machines, lab_name, tmp_path,
                                                        sfcgen):
    ms = kube_machines
    before = devices(ms)
    ok(sfclab(ms, "up", str(tenant_chain_lab(tmp_path, lab_name)), "--json"), ms)
    try:
        node_of = {h: p["spec"]["node"] for h, p in parts(ms, lab_name).items()}
        assert len(set(node_of.values())) == 3  # one host per Node
        # graph: the running lab's plan as this machine keeps it (every node drawn)
        cp = cli("graph", lab_name, "--format", "mermaid")
        assert cp.returncode == 0, cp.stderr
        assert all(n in cp.stdout for n in ("a1", "b1", "srv")), cp.stdout

        # exec: run by the agent of a1's Node, its output and status passed through
        cp = cli("exec", lab_name, "a1", "--", "ip", "-j", "-4", "addr", "show")
        assert cp.returncode == 0, cp.stderr + ms.logs()
        assert any(a["ifname"] != "lo" for a in json.loads(cp.stdout))
        assert cli("exec", lab_name, "srv", "--", "sh", "-c", "exit 3").returncode == 3
        # the tenants have identical address plans, and each reaches srv through the NAT
        # they share (three Nodes apart)
        plan = lifecycle.load_plan(lab_name)[1]
        assert plan.address_of("a1") == plan.address_of("b1")
        for n in ("a1", "b1"):
            cp = cli("exec", lab_name, n, "--", "ping", "-c", "2", "-W", "2",
                     str(plan.address_of("srv")))
            assert cp.returncode == 0, cp.stdout + cp.stderr

        # traffic rate from a1 (h1) to srv (h3): classified into the chain (UDP 7000) through
        # the NAT and the firewall on h2; sender and receiver run by their Nodes' agents
        cp = cli("traffic", "rate", lab_name, "--from", "a1", "--to", "srv", "--rates", "2000",
                 "--duration", "1", "--json")
        m = ok(cp, ms)
        (point,) = m["points"]
        assert point["received"] > 0 and point["sent"] > 0, m
        assert any("reached through their agents" in w for w in m["warnings"]), m
        # the chain's counters, read through the agents: the traffic went through both
        got = ok(cli("chain", "inspect", lab_name, "web", "--json"), ms)
        inst = got["chains"]["web"]["instances"]
        assert inst["nat"]["proxy_in"] > 0 and inst["fw"]["proxy_in"] > 0, inst

        # traffic iperf from a1 (h1) to srv (h3): the server held in srv's namespace by its
        # Node's agent until it listened, the client run in a1's by a1's Node's agent; the
        # fields of a run here, and nothing of them left after
        m = ok(cli("traffic", "iperf", lab_name, "--from", "a1", "--to", "srv", "--duration",
                   "1", "--json"), ms)
        assert m["metrics"]["throughput_bps"] > 0 and m["metrics"]["flows"] == 1, m["metrics"]
        (flow,) = m["per_flow"]
        assert (flow["client_core"], flow["server_core"]) == (None, None), flow
        assert flow["client_cpu_s"] >= 0 and flow["server_cpu_s"] >= 0, flow
        (conn,) = m["raw"]["clients"][0]["start"]["connected"]
        assert conn["remote_host"] == str(plan.address_of("srv")), conn  # through the NAT
        (w,) = m["warnings"]
        assert "h1, h3" in w and "not pinned to cores" in w, w
        assert netns.pids_in([plan.netns_of("a1"), plan.netns_of("srv")]) == {}
        assert [p for n in ms.nodes for p in ms.state(n).rglob("procs/*")] == []

        # chain add: blue's traffic (UDP 7000 from b1) through a firewall instance attached
        # at the NAT, placed on a Node by its room
        cf = tmp_path / "more.json"
        cf.write_text(json.dumps({"name": "more", "egress": "srv",
                                  "classifiers": [{"ingress": "b1", "proto": "udp",
                                                   "dport": 7000}],
                                  "functions": [{"name": "fw2", "kind": "firewall",
                                                 "rules": [], "cpu": 0.5}]}))
        added = ok(cli("chain", "add", lab_name, str(cf), "--json"), ms)
        (node, inst), = added["instances"].items()
        host = inst["host"]
        # its part's agent reports the instance among the part's nodes
        assert node in (parts(ms, lab_name)[host].get("status") or {}).get("nodes", [])
        (point,) = ok(cli("traffic", "rate", lab_name, "--from", "b1", "--to", "srv",
                          "--rates", "500", "--duration", "1", "--json"), ms)["points"]
        assert point["received"] > 0, point
        got = ok(cli("chain", "inspect", lab_name, "more", "--json"), ms)
        assert got["chains"]["more"]["instances"][node]["proxy_in"] >= point["received"]
        # chain migrate: to another host, make-before-break through the agents
        to = next(h for h in ("h3", "h1", "h2") if h != host)
        moved = ok(cli("chain", "migrate", lab_name, node, "--to", to, "--json"), ms)
        assert moved["host"] == to
        clone = moved["clone"]
        assert clone in parts(ms, lab_name)[to]["status"]["nodes"]
        t = ok(cli("chain", "trace", lab_name, "more", "--json"), ms)
        assert t["delivered"] and clone in [h["seen_at"] for h in t["paths"][0]["hops"]]
        (point,) = ok(cli("traffic", "rate", lab_name, "--from", "b1", "--to", "srv",
                          "--rates", "500", "--duration", "1", "--json"), ms)["points"]
        assert point["received"] > 0, point
        got = ok(cli("chain", "inspect", lab_name, "more", "--json"), ms)
        assert got["chains"]["more"]["instances"][clone]["proxy_in"] >= point["received"]
        # chain rm
        rm = ok(cli("chain", "rm", lab_name, "more", "--json"), ms)
        assert rm["errors"] == [] and rm["removed"] == [clone]
        assert no_requests(ms, lab_name) == []  # every request answered and deleted
    finally:
        cp = cli("down", lab_name)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    nothing_of(ms, lab_name, before)
    assert no_requests(ms, lab_name) == []


def test_a_cluster_gone_or_refusing_stops_the_commands_with_one_line(kube_machines, lab_name,
                                                                     tmp_path):
    """The commands on a running lab on Kubernetes reach its cluster by the kubeconfig ``up``
    journaled: that cluster not answering is exit 1, credentials without the right to ask the
    agents exit 2, each with one line naming the server; the lab is left as it was, and
    ``down`` removes it once the cluster answers again."""
    from .kube import free_port, kubeconfig
    from .test_kube_build import lab_file

    ms = kube_machines
    before = devices(ms)
    cfg = tmp_path / "lab.kubeconfig"
    cfg.write_bytes(ms.cluster.admin_kubeconfig.read_bytes())
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "up", "--kube", "--kubeconfig",
                         str(cfg), str(lab_file(tmp_path, lab_name))], capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    good = cfg.read_bytes()
    try:
        dead = f"https://127.0.0.1:{free_port()}"
        kubeconfig(cfg, dead, ms.cluster.ca, "t", "gone")
        for args in (["exec", lab_name, "a", "--", "true"],
                     ["traffic", "rate", lab_name, "--from", "a", "--to", "c", "--rates", "100",
                      "--duration", "1"],
                     ["down", lab_name]):
            cp = cli(*args)
            assert cp.returncode == 1, (args, cp.stderr)
            assert cp.stderr.startswith(f"sfclab: error: {dead}: "), cp.stderr
            assert "not reachable" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1
        # the agent's own account may not ask the agents: refused by RBAC, exit 2
        cfg.write_bytes(ms.cluster.kubeconfig_for("sfclab-system", "sfclab-agent",
                                                  ms.nodes[0]).read_bytes())
        cp = cli("exec", lab_name, "a", "--", "true")
        assert cp.returncode == 2 and "403 Forbidden" in cp.stderr, cp.stderr
        assert len(cp.stderr.strip().splitlines()) == 1
        assert no_requests(ms, lab_name) == []  # nothing was asked
        assert all(p["status"]["phase"] == "Up" for p in parts(ms, lab_name).values())
    finally:
        cfg.write_bytes(good)
        cp = cli("down", lab_name)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    nothing_of(ms, lab_name, before)
