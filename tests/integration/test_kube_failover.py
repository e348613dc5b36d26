"""Failover by Leases on a lab on Kubernetes (issue 29, item 4's "an agent killed, its Lease
expiring and its chain instances failed over within the stated time"), against the
:mod:`.kube` fixture's API server and its Nodes (emulated machines, each with its agent):

a chain of two firewall instances on two Nodes; the agent of the Node holding the instance
that is not beside the ingress is killed (``kill -9``); its Lease expires; the agent of the
ingress's Node writes that host lost; the ingress's watcher takes the instance out of the slot
table (a ``failover`` event), within the stated time
(:data:`~sfclab.realize.runtime.kubernetes_failover.FAILOVER_SECONDS` from the kill) and not
before the Lease could have expired; traffic then crosses only the other instance.  The agent
started again renews its Lease and the instance is put back; ``down`` leaves nothing."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from sfclab.plan.model import Plan
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import DataPlane, share_dir
from sfclab.realize.runtime import kubernetes_failover as failover
from sfclab.realize.runtime.kubernetes_lease import LEASE_SECONDS, RENEW_SECONDS
from sfclab.traffic.native import NativeGenerator

from .kube import KubeMachines
from .labtools import wait_for
from .test_kube_build import devices, nothing_of, parts, sfclab, write_lab
from .test_kube_ops import cli, ok

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube-b")

#: what a loaded machine may add to the stated time (the agents' and the API server's work,
#: at a load average of 10-20 on 2 cores); the figure itself is printed
LOAD_SLACK_S = 10.0


def lab_file(tmp_path: Path, name: str) -> Path:
    """src and router r1 on h1, m on h2 (beside r1), dst on h3."""
    return write_lab(tmp_path, name, {"src": ("host", "h1"), "r1": ("router", "h1"),
                                      "m": ("host", "h2"), "dst": ("host", "h3")},
                     [("src", "r1"), ("r1", "m"), ("r1", "dst")])


def events(ms: KubeMachines, node: str, lab: str, kind: str) -> list[dict]:
    f = ms.state(node) / "labs" / lab / "events.jsonl"
    if not f.exists():
        return []
    return [e for e in map(json.loads, f.read_text().splitlines()) if e["event"] == kind]


def proxy_in(lab: str, host: str, plan: Plan, node: str) -> int:
    """``node``'s packets in, read from its host's share of the maps (the test's machines
    are this machine's)."""
    assert plan.steering is not None
    with DataPlane(lab, share_dir(lab, host)) as dp:
        return dp.counters(plan.steering.node_ids[node])["proxy_in"]


def test_an_agent_killed_lets_its_lease_expire_and_its_instance_fails_over(
        kube_machines, lab_name, tmp_path, sfcgen):
    ms = kube_machines
    before = devices(ms)
    ok(sfclab(ms, "up", str(lab_file(tmp_path, lab_name)), "--json"), ms)
    g = None
    try:
        node_of = {h: p["spec"]["node"] for h, p in parts(ms, lab_name).items()}
        cf = tmp_path / "grp.json"
        cf.write_text(json.dumps({"name": "grp", "egress": "dst",
                                  "classifiers": [{"ingress": "src", "proto": "udp",
                                                   "dport": 5003}],
                                  "functions": [{"name": "fw", "kind": "firewall", "rules": [],
                                                 "instances": 2, "cpu": 0.6}]}))
        added = ok(cli("chain", "add", lab_name, str(cf), "--json"), ms)
        where = {n: i["host"] for n, i in added["instances"].items()}
        assert len(set(where.values())) == 2, where  # 0.6 CPU each: two hosts
        # the ingress (src) is on h1, whose watcher rewrites the slot table
        assert "h1" in added["watcher"], added
        victim = next(n for n, h in where.items() if h != "h1")
        other = next(n for n in where if n != victim)
        dead_host = where[victim]
        plan = lifecycle.load_plan(lab_name)[1]
        g = NativeGenerator(plan.netns_of("src"), plan.netns_of("dst"),
                            str(plan.address_of("dst")), port=5003, flows=64)
        assert g.trial(1000, 1.0, 64).received > 0
        assert proxy_in(lab_name, dead_host, plan, victim) > 0  # both instances take flows

        # the agent of the victim's Node killed: its Lease expires, the instance fails over
        h1 = node_of["h1"]
        n0 = len(events(ms, h1, lab_name, "failover"))
        agent = ms.agents[node_of[dead_host]]
        t_kill = time.time()
        agent.signal(signal.SIGKILL)
        agent.proc.wait()
        ev = wait_for("a failover on h1",
                      lambda: events(ms, h1, lab_name, "failover")[n0:],
                      failover.FAILOVER_SECONDS + LOAD_SLACK_S + 5)
        took = ev[-1]["time"] - t_kill
        print(f"kill -9 of an agent to its instance failed over: {took:.2f} s (stated: at most "
              f"{failover.FAILOVER_SECONDS:g} s)")
        assert LEASE_SECONDS - RENEW_SECONDS <= took <= failover.FAILOVER_SECONDS + LOAD_SLACK_S
        assert ev[-1]["instances_out"] == [victim] and ev[-1]["paths_left"] == 1, ev
        lost = events(ms, h1, lab_name, "peer-lost")
        assert lost[-1]["peer"] == dead_host and lost[-1]["via"] == "lease", lost
        assert victim in lost[-1]["instances"]
        # traffic now crosses the other instance only (the victim itself still runs)
        v0, o0 = (proxy_in(lab_name, dead_host, plan, victim),
                  proxy_in(lab_name, where[other], plan, other))
        t = g.trial(1000, 1.0, 64)
        assert t.received > 0
        assert proxy_in(lab_name, dead_host, plan, victim) == v0
        assert proxy_in(lab_name, where[other], plan, other) - o0 >= t.received

        # the agent back: its Lease live again, the instance put back
        ms.agents[agent.node] = agent.restart()
        back = wait_for("the instance put back",
                        lambda: [e for e in events(ms, h1, lab_name, "failover")[n0 + 1:]
                                 if e["paths_left"] == 2], 60)
        assert back and events(ms, h1, lab_name, "peer-back")[-1]["peer"] == dead_host
    finally:
        if g is not None:
            g.close()
        for node, a in ms.agents.items():  # a killed one back, to remove its part
            if a.proc.poll() is not None:
                ms.agents[node] = a.restart()
        cp = cli("down", lab_name)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    nothing_of(ms, lab_name, before)
