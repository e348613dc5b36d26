"""Agents that build their parts (the :mod:`.kube` fixture's API server and emulated machines):
``up --kube`` of a 3-host lab waits until each Node's agent has built its host's part (real
namespaces, VXLAN between the machines' underlay addresses), traffic crosses the machines,
``down --kube`` waits until each agent has removed its part, and nothing is left; an agent
killed with ``kill -9`` mid-build and started again reconciles to the same lab."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import netns
from sfclab.plan.model import Plan
from sfclab.realize import dataplane
from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime.kubernetes_api import NotFound

from .kube import KubeMachines
from .labtools import leftovers, ping, wait_for

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube")


def sfclab(ms: KubeMachines, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """``sfclab CMD --kube --kubeconfig ADMIN ...``."""
    cmd, *rest = args
    return subprocess.run([sys.executable, "-m", "sfclab.cli", cmd, "--kube", "--kubeconfig",
                           str(ms.cluster.admin_kubeconfig), *rest], capture_output=True,
                          text=True, timeout=timeout)


def write_lab(tmp_path: Path, name: str, nodes: dict[str, tuple[str, str]],
              links: list[tuple[str, str]], cpus: int = 1) -> Path:
    """A lab file of hosts h1-h3 (``cpus`` each), ``nodes`` (name -> kind, host) and
    ``links``."""
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({
        "name": name, "hosts": {h: {"cpus": cpus} for h in ("h1", "h2", "h3")},
        "nodes": {n: {"kind": k, "host": h} for n, (k, h) in nodes.items()},
        "links": [{"endpoints": list(e)} for e in links]}))
    return f


def lab_file(tmp_path: Path, name: str) -> Path:
    """a (h1) - b, a router (h2) - c (h3): two links across machines."""
    return write_lab(tmp_path, name, {"a": ("host", "h1"), "b": ("router", "h2"),
                                      "c": ("host", "h3")}, [("a", "b"), ("b", "c")])


def up_started(ms: KubeMachines, f: Path) -> subprocess.Popen:
    """``sfclab up --kube F`` started, not waited for (its output piped)."""
    return subprocess.Popen([sys.executable, "-m", "sfclab.cli", "up", "--kube",
                             "--kubeconfig", str(ms.cluster.admin_kubeconfig), str(f)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def parts(ms: KubeMachines, lab: str) -> dict[str, dict]:
    return {p["spec"]["host"]: p for p in
            ms.cluster.admin().items(kube.parts_path(), f"{kube.LAB_LABEL}={lab}")}


def address_of(ps: dict[str, dict], node: str) -> str:
    for p in ps.values():
        for i in Plan.from_dict(p["spec"]["plan"]).interfaces:
            if i.node == node and i.address:
                return i.address.split("/")[0]
    raise AssertionError(f"no address of {node}")


def devices(ms: KubeMachines) -> dict[str, list[str]]:
    """Each machine's devices (in its context)."""
    out = {}
    for n in ms.nodes:
        got = netns.run(ms.context(n), ["ip", "-j", "link", "show"]).stdout
        out[n] = sorted(d["ifname"] for d in json.loads(got))
    return out


def nothing_of(ms: KubeMachines, lab: str, before: dict[str, list[str]]) -> None:
    """No namespace, netns mount, cgroup or process of ``lab``, no device in a machine that
    was not there before, no BPF pin, no Lab or LabPart object, no state on any machine."""
    left = leftovers(lab)
    assert not any(left.values()), left
    assert not list(Path(netns.NETNS_RUN_DIR).glob(f"sfclab:{lab}:*"))
    assert devices(ms) == before
    assert not dataplane.lab_dir(lab).exists()
    assert parts(ms, lab) == {}
    with pytest.raises(NotFound):
        ms.cluster.admin().get(kube.labs_path(lab))
    for n in ms.nodes:
        assert not (ms.state(n) / "labs" / lab).exists()
        assert not list(ms.state(n).glob(f"**/.{lab}.kube-part.json"))


def down_leaves_nothing(ms: KubeMachines, lab: str, before: dict[str, list[str]]) -> None:
    """``sfclab down LAB`` (no ``--kube``: the lab's journal names its cluster) succeeds and
    leaves nothing (:func:`nothing_of`)."""
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "down", lab], capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    nothing_of(ms, lab, before)


def test_up_kube_builds_every_part_traffic_crosses_machines_and_down_leaves_nothing(
        kube_machines, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    cp = sfclab(ms, "up", str(lab_file(tmp_path, lab_name)), "--json")
    assert cp.returncode == 0, cp.stderr + ms.logs()
    assert "Up" in cp.stderr  # each part's progress was shown
    ps = parts(ms, lab_name)
    assert {h: p["status"]["phase"] for h, p in ps.items()} == {"h1": "Up", "h2": "Up", "h3": "Up"}
    # each part built by the agent of its own Node, in that Node's machine
    assert all(p["status"]["agent"] == p["spec"]["node"] for p in ps.values())
    lab = ms.cluster.admin().get(kube.labs_path(lab_name))
    assert len(lab["status"]["tunnels"]) == 2 and all(t["vni"] for t in lab["status"]["tunnels"])
    node_of = {h: p["spec"]["node"] for h, p in ps.items()}
    vx = {n: [d for d in devs if d not in before[n]] for n, devs in devices(ms).items()}
    # the VXLAN ends are in the machines' contexts: one on h1's and h3's, two on h2's
    vxlans = {n: [d for d in vx[n] if d.startswith("vx")] for n in ms.nodes}
    assert sorted(len(vxlans[node_of[h]]) for h in ("h1", "h2", "h3")) == [1, 1, 2], vx
    # the namespaces are real, and a's packets reach c through b across two tunnels
    assert netns.exists(f"sfclab:{lab_name}:a") and netns.exists(f"sfclab:{lab_name}:c")
    r = ping(f"sfclab:{lab_name}:a", address_of(ps, "c"), count=3)
    assert r.returncode == 0, r.stdout + r.stderr
    # inspect, with no --kube: the lab's journal names the cluster (the runtime table's row)
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "inspect", lab_name, "--json"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    seen = json.loads(cp.stdout)["kube"]
    assert {p["host"]: (p["node"], p["phase"]) for p in seen["parts"]} == \
        {h: (node_of[h], "Up") for h in ("h1", "h2", "h3")}

    # host ls --kube: each host's Node, phase and whether its agent's Lease is live
    cp = subprocess.run(
        [sys.executable, "-m", "sfclab.cli", "host", "ls", lab_name, "--kube", "--kubeconfig",
         str(ms.cluster.admin_kubeconfig), "--json"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert {r["host"]: (r["node"], r["phase"], r["live"], r["nodes"])
            for r in json.loads(cp.stdout)} == {"h1": (node_of["h1"], "Up", True, ["a"]),
                                                "h2": (node_of["h2"], "Up", True, ["b"]),
                                                "h3": (node_of["h3"], "Up", True, ["c"])}

    cp = sfclab(ms, "down", lab_name, "--json")
    assert cp.returncode == 0, cp.stderr + ms.logs()
    assert sorted(json.loads(cp.stdout)["parts"]) == [f"{lab_name}.h{i}" for i in (1, 2, 3)]
    assert "Removed" in cp.stderr
    nothing_of(ms, lab_name, before)


def test_an_agent_killed_mid_build_and_restarted_reconciles_to_the_same_lab(
        kube_machines, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    api = ms.cluster.admin()
    up = up_started(ms, lab_file(tmp_path, lab_name))
    try:
        # h2's part (the router, two tunnels) reported Building: its agent is killed
        def building():
            ps = parts(ms, lab_name)
            p = ps.get("h2")
            return p if p and (p.get("status") or {}).get("phase") == "Building" else None

        p = wait_for("h2's part building", building, 60)
        victim = ms.agents[p["spec"]["node"]]
        victim.signal(signal.SIGKILL)
        victim.proc.wait()
        time.sleep(1)
        assert parts(ms, lab_name)["h2"]["status"]["phase"] != "Up"
        ms.agents[victim.node] = victim.restart()
        out, err = up.communicate(timeout=180)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 0, err + ms.logs()
    ps = parts(ms, lab_name)
    assert all(p["status"]["phase"] == "Up" for p in ps.values())
    r = ping(f"sfclab:{lab_name}:a", address_of(ps, "c"), count=3)
    assert r.returncode == 0, r.stdout + r.stderr
    # the same state as a build never interrupted: one lab state per machine, its devices
    spaces = sorted(leftovers(lab_name)["namespaces"])
    assert spaces == sorted(f"sfclab:{lab_name}:{n}" for n in "abc")
    assert api.get(kube.labs_path(lab_name))["status"]["phase"] in ("Pending", "Up")

    # down with no --kube: through the lab's journal, the kubernetes runtime
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "down", lab_name],
                        capture_output=True, text=True, timeout=180)
    assert cp.returncode == 0, cp.stderr + ms.logs()
    assert subprocess.run([sys.executable, "-m", "sfclab.cli", "ls", "--json"],
                          capture_output=True, text=True).stdout.count(lab_name) == 0
    nothing_of(ms, lab_name, before)
