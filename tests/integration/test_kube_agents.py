"""The per-Node agents against a real API server (the :mod:`.kube` fixture): one process per
Node the test made, each with a token bound to its Node; each holds and renews its own Lease
and marks the parts placed on its Node; an agent killed lets its Lease expire while the others
stay live."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime import kubernetes_agent as agents
from sfclab.realize.runtime import kubernetes_parts as parts
from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig

from .kube import settled
from .labtools import wait_for

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube-b")


@pytest.fixture
def cluster_nodes(kube_machines):
    return kube_machines.nodes


@pytest.fixture
def running_agents(kube_machines):
    return kube_machines.agents


def ls_kube(cluster, lab: str) -> dict:
    """``sfclab ls --kube --json``'s row of ``lab``."""
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "ls", "--kube", "--kubeconfig",
                         str(cluster.admin_kubeconfig), "--json"], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    return next(r for r in json.loads(cp.stdout) if r["name"] == lab)


def test_each_agent_renews_its_own_lease_and_marks_its_parts(kube_cluster, running_agents,
                                                             lab_name, tmp_path):
    api = kube_cluster.admin()
    nodes = list(running_agents)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump({
        "name": lab_name, "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1}, "h3": {"cpus": 1}},
        "nodes": {"a": {"kind": "host", "host": "h1"}, "b": {"kind": "host", "host": "h2"},
                  "c": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}]}))
    from sfclab.realize.kinds import load_lab

    kube.up(load_lab(str(f)), api)  # the lab file: the fixture's controller allocates it
    try:
        def all_leases():
            got = {x["metadata"]["name"]: x for x in api.items(agents.lease_path())}
            want = [agents.lease_name(n) for n in nodes]
            return [got[w] for w in want] if all(w in got for w in want) else None

        leases = wait_for("every agent's Lease", all_leases, 20)
        assert {x["spec"]["holderIdentity"] for x in leases} == set(nodes)
        first = {x["metadata"]["name"]: x["spec"]["renewTime"] for x in leases}

        # each part is marked by the agent of the Node it was placed on, and only by it
        def marked():
            parts = api.items(kube.parts_path(), f"{kube.LAB_LABEL}={lab_name}")
            done = {p["spec"]["host"]: (p.get("status") or {}).get("agent") for p in parts}
            return done if all(done.values()) and len(done) == 3 else None

        got = wait_for("parts marked", marked, 30)
        assert got == {x["host"]: x["node"] for x in
                       api.get(kube.labs_path(lab_name))["status"]["placement"]}
        # renewed: a later renewTime within two renewal periods
        time.sleep(agents.RENEW_SECONDS * 2)
        later = {x["metadata"]["name"]: x["spec"]["renewTime"]
                 for x in api.items(agents.lease_path())}
        assert all(later[k] > v for k, v in first.items())
        assert not any(agents.expired(api.get(agents.lease_path(n))) for n in nodes)
        assert ls_kube(kube_cluster, lab_name)["held"] == 3

        # one agent killed: its Lease expires within its duration (plus a renewal period of
        # slack); the others stay live
        dead = nodes[0]
        running_agents[dead].signal(signal.SIGKILL)
        t0 = time.monotonic()
        wait_for(f"{dead}'s Lease expired",
                 lambda: agents.expired(api.get(agents.lease_path(dead))),
                 agents.LEASE_SECONDS + agents.RENEW_SECONDS + 5)
        took = time.monotonic() - t0
        assert took <= agents.LEASE_SECONDS + agents.RENEW_SECONDS + 5
        assert not any(agents.expired(api.get(agents.lease_path(n))) for n in nodes[1:])
        row = ls_kube(kube_cluster, lab_name)
        assert (row["hosts"], row["nodes"], row["held"]) == (3, 3, 2)
    finally:
        for node, agent in running_agents.items():  # the killed one back, to remove its part
            if agent.proc.poll() is not None:
                running_agents[node] = agent.restart()
        parts.remove(api, lab_name, 120, lambda _m: None)


def test_an_agent_refused_by_the_cluster_exits_1_with_one_line(kube_cluster, cluster_nodes,
                                                               tmp_path):
    # a token bound to another Node: its first Lease write is refused by the agent's policy
    cfg = kube_cluster.kubeconfig_for(kube.NAMESPACE, "sfclab-agent", cluster_nodes[1])
    other = agents.Agent(KubeApi(KubeConfig.load(str(cfg))), cluster_nodes[0])
    settled(other.renew, refused=True)  # the policy just applied is in force
    cp = subprocess.run([sys.executable, "-m", "sfclab.realize.runtime.kubernetes_agent",
                         "--node", cluster_nodes[0], "--kubeconfig", str(cfg)],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 1
    assert "own Node's Lease" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


def test_a_build_longer_than_the_lease_keeps_it_renewed(kube_cluster, tmp_path):
    """The Lease is renewed by a thread of its own: an agent whose part takes longer to build
    than the Lease lasts (its build verb held :data:`LEASE_SECONDS` + two renewals; nothing
    else of the agent is changed) never lets it expire meanwhile, and reports the part Up."""
    import threading
    from threading import Event

    from sfclab.realize.runtime.kubernetes_api import resource_path
    from sfclab.plan.model import Plan
    from sfclab.realize.state import LabState

    from sfclab.realize.runtime import kubernetes_manifests as manifests

    api = kube_cluster.admin()
    manifests.install(api)
    node = f"slow-{tmp_path.name[-6:].lower().replace('_', '-')}"
    api.create(resource_path("v1", "nodes"), {"apiVersion": "v1", "kind": "Node",
                                              "metadata": {"name": node}})
    building = Event()

    class Slow(agents.Agent):
        """The host agent's verbs replaced by a build that takes its time and makes only the
        lab's state (what the agent checks its record against)."""

        def verb(self, verb, req):  # noqa: ANN001, ANN201
            state = LabState(lab)
            if verb != "up":
                state.remove()
                return {"absent": True, "errors": []}
            building.set()
            time.sleep(agents.LEASE_SECONDS + 2 * agents.RENEW_SECONDS)
            state.begin(Plan(lab, "").to_dict(), "", "test")
            state.set_meta(status="up")
            return {"namespaces": [], "underlay_if": "none"}

    lab = f"s{tmp_path.name[-5:].lower().replace('_', '-')}"
    part = {"apiVersion": kube.GROUP_VERSION, "kind": "LabPart",
            "metadata": {"name": f"{lab}.h1", "namespace": kube.NAMESPACE,
                         "labels": {**kube.MANAGED, kube.LAB_LABEL: lab, kube.NODE_LABEL: node}},
            "spec": {"lab": lab, "host": "h1", "node": node, "plan": {"lab": lab}}}
    stop = Event()
    agent = Slow(api, node)
    agent.renew()
    runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    runner.start()
    try:
        api.create(kube.parts_path(), part)
        assert building.wait(60)
        t0 = time.monotonic()
        while time.monotonic() - t0 < agents.LEASE_SECONDS + agents.RENEW_SECONDS:
            assert not agents.expired(api.get(agents.lease_path(node))), "Lease expired"
            time.sleep(1)
        wait_for("the part Up", lambda: (api.get(kube.parts_path(f"{lab}.h1")).get(
            "status") or {}).get("phase") == "Up", 60)
    finally:
        stop.set()
        api.delete(kube.parts_path(f"{lab}.h1"))
        api.delete(agents.lease_path(node))
        api.delete(resource_path("v1", "nodes", name=node))
        agents.record_path(lab).unlink(missing_ok=True)
        LabState(lab).remove()
