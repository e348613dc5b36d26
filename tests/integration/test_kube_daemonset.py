"""sfclab's agent as a real DaemonSet pod, on the one-Node cluster of :mod:`.kube_node`
(Kubernetes' own kubelet, controller manager and scheduler; Debian's containerd and runc): the
DaemonSet of ``deploy/kubernetes`` runs the agent's image on the Node, the agent holds its
Node's Lease with the token the kubelet bound to its pod, the controller runs as its
Deployment's pod on the same Node (on the host's network: no CNI here), ``up --kube`` of a
small lab is allocated by that pod and built by the agent's pod in this machine's kernel (its
namespaces are the machine's; a's packets reach b through the router r), ``down --kube``
removes it, and nothing is left: no namespace, state,
Lab or part; once the DaemonSet and the Deployment are deleted, no container, process or
cgroup of the Node.

Skipped, with the reason, where ``make setup`` has not built ``build/kube/kube-node`` or
Debian's containerd is missing."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import netns
from sfclab.plan.model import Plan
from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime.kubernetes_api import NotFound, resource_path

from .kube_node import CONTAINERD, CTR, KUBE_NODE, MISSING, KubeNode, agent_images
from .labtools import leftovers, ping, wait_for

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = [pytest.mark.xdist_group("kube"), pytest.mark.long]


@pytest.fixture
def kube_node(kube_cluster):
    """The one-Node cluster, sfclab's manifests and the agent's DaemonSet on it; afterwards,
    no cgroup of it is left."""
    if not (KUBE_NODE.exists() and CONTAINERD.exists() and CTR.exists()):
        pytest.skip(MISSING)
    with KubeNode(kube_cluster, agent_images()) as node:
        yield node
    assert not node.cgroups_left()


def sfclab(node: KubeNode, *args: str) -> subprocess.CompletedProcess:
    cmd, *rest = args
    return subprocess.run([sys.executable, "-m", "sfclab.cli", cmd, "--kube", "--kubeconfig",
                           str(node.cluster.admin_kubeconfig), *rest, "--timeout", "120"],
                          capture_output=True, text=True, timeout=180)


def processes_in(cgroup_root: str) -> list[int]:
    """The processes whose cgroup (any hierarchy) lies under ``cgroup_root``."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if f"/{cgroup_root}/" in (p / "cgroup").read_text():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_the_agent_runs_as_a_daemonset_pod_builds_a_lab_and_down_leaves_nothing(
        kube_node, lab_name, tmp_path):
    n = kube_node
    lease_path = resource_path("coordination.k8s.io/v1", "leases", "sfclab-system",
                               f"sfclab-agent-{n.node}")

    def lease():
        try:
            return n.api.get(lease_path)
        except NotFound:
            return None

    t0 = time.monotonic()
    held = wait_for("the agent's pod holds its Node's Lease", lease, 180, n.logs)
    held_after = time.monotonic() - t0
    assert held["spec"]["holderIdentity"] == n.node
    [pod] = n.pods()
    spec = pod["spec"]
    assert spec["nodeName"] == n.node and spec["hostNetwork"] and spec["hostPID"]
    [agent] = spec["containers"]
    assert agent["image"] == "localhost/sfclab/agent:latest"
    assert agent["securityContext"]["privileged"]
    # the kubelet reports the pod Running at its next status sync, which may come a moment
    # after the agent, started, has written its Lease
    wait_for("the agent's pod Running",
             lambda: n.pods()[0]["status"].get("phase") == "Running", 60, n.logs)
    assert "holding its Lease" in n.pod_log()
    # the controller, as its Deployment's pod on the same Node: it allocates the lab
    wait_for("the controller's pod reconciling", lambda: "reconciling" in n.pod_log(), 120,
             n.logs)
    [ctl] = n.pods("sfclab-controller")
    assert ctl["spec"]["serviceAccountName"] == "sfclab-controller"
    assert ctl["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]

    f = tmp_path / f"{lab_name}.yaml"
    f.write_text(yaml.safe_dump({
        "name": lab_name,
        "nodes": {"a": {"kind": "host"}, "r": {"kind": "router"}, "b": {"kind": "host"}},
        "links": [{"endpoints": ["a", "r"]}, {"endpoints": ["r", "b"]}]}))
    t0 = time.monotonic()
    up = sfclab(n, "up", str(f), "--json")
    up_took = time.monotonic() - t0
    assert up.returncode == 0, up.stderr + n.logs()
    [part] = n.api.items(kube.parts_path(), f"{kube.LAB_LABEL}={lab_name}")
    assert part["spec"]["node"] == n.node
    assert f"lab {lab_name}: allocated: local on {n.node}" in n.pod_log()  # by the pod
    assert part["status"]["phase"] == "Up" and part["status"]["agent"] == n.node
    # built by the pod, in this machine's kernel: its namespaces are the machine's
    for node in ("a", "r", "b"):
        assert netns.exists(f"sfclab:{lab_name}:{node}")
    b = next(i.address.split("/")[0] for i in Plan.from_dict(part["spec"]["plan"]).interfaces
             if i.node == "b" and i.address)
    r = ping(f"sfclab:{lab_name}:a", b, count=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (n.state / "labs" / lab_name / "journal").exists()  # the pod's state, on the host
    # the commands on the running lab: requests the pod's agent answers (docs/kubernetes.md:
    # Commands), run in the lab's namespaces from the pod, with the image's own sfcgen
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "exec", lab_name, "a", "--", "ip",
                         "-j", "-4", "addr", "show"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr + n.logs()
    assert any(x["ifname"] != "lo" for x in json.loads(cp.stdout))
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "traffic", "rate", lab_name,
                         "--from", "a", "--to", "b", "--rates", "1000", "--duration", "1",
                         "--json"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr + n.logs()
    (point,) = json.loads(cp.stdout)["points"]
    assert point["received"] > 0.9 * point["sent"] > 0, point

    rss = n.rss()
    for pid in processes_in(n.cgroup_root):  # the pod's own processes: the agent's
        with contextlib.suppress(OSError):
            if b"kubernetes_agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
                status = Path(f"/proc/{pid}/status").read_text()
                rss["agent (pod)"] = 1024 * int(status.split("VmRSS:")[1].split()[0])
    t0 = time.monotonic()
    down = sfclab(n, "down", lab_name)
    down_took = time.monotonic() - t0
    assert down.returncode == 0, down.stderr + n.logs()
    left = leftovers(lab_name)
    assert not any(left.values()), left
    assert not list(Path(netns.NETNS_RUN_DIR).glob(f"sfclab:{lab_name}:*"))
    assert not (n.state / "labs" / lab_name).exists()
    assert not list(n.state.glob(f"**/.{lab_name}.kube-part.json"))
    assert n.api.items(kube.parts_path(), f"{kube.LAB_LABEL}={lab_name}") == []
    with pytest.raises(NotFound):
        n.api.get(kube.labs_path(lab_name))
    assert [p["status"]["phase"] for p in n.pods()] == ["Running"]  # the agent goes on

    # the DaemonSet deleted: its pod stopped, no container, no process in the Node's cgroups
    n.remove_daemonset()
    assert n.pods() == [] and n.pods("sfclab-controller") == [] and n.tasks() == [], n.logs()
    assert processes_in(n.cgroup_root) == []
    # the figures (docs/kubernetes.md), shown with pytest -s
    print("\none-Node cluster: " + ", ".join(f"{k} {v:.1f} s" for k, v in n.timings.items())
          + f"; Lease held {held_after:.1f} s after; up --kube {up_took:.1f} s ("
          + str(part["status"].get("message")) + f"), down --kube {down_took:.1f} s; "
          + "resident: " + ", ".join(f"{k} {v >> 20} MiB" for k, v in rss.items()))
