"""``sfclab up --kube`` and ``down --kube`` against a real API server (the :mod:`.kube` fixture):
a lab's resources written with a user's rights, allocated by the controller (placed on the
Nodes the test made by their allocatable capacity, addresses and VNIs in the Lab's status and
the parts' plans, which the user may not write), and removed; bad input refused with one line
and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime import kubernetes_manifests as manifests
from sfclab.realize.runtime.kubernetes_api import NotFound
from sfclab.realize.state import LabState

from .kube import KubeCluster, free_port, kubeconfig

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube-b")


def sfclab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                          text=True, timeout=180)


@pytest.fixture
def installed(kube_cluster):
    manifests.install(kube_cluster.admin())
    return kube_cluster


@pytest.fixture
def nodes(installed, kube_machines):
    """Three Nodes of this test (2 CPUs and 1 GiB allocatable each, an emulated machine and
    its agent each: :class:`.kube.KubeMachines`), removed after it."""
    return kube_machines.nodes


def lab_file(tmp_path: Path, name: str, cpus: int = 1,
             selector: dict[str, str] | None = None) -> Path:
    """Hosts h1 (the largest: placed first), h2, h3; ``selector``: h1's ``node_selector``."""
    f = tmp_path / f"{name}.yaml"
    h1 = {"cpus": cpus, "memory": "256M", **({"node_selector": selector} if selector else {})}
    f.write_text(yaml.safe_dump({
        "name": name,
        "hosts": {"h1": h1, "h2": {"cpus": cpus}, "h3": {"cpus": cpus}},
        "nodes": {"a": {"kind": "host", "host": "h1"}, "b": {"kind": "router", "host": "h2"},
                  "c": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}]}))
    return f


def parts_of(cluster: KubeCluster, lab: str) -> list[dict]:
    return cluster.admin().items(kube.parts_path(), f"{kube.LAB_LABEL}={lab}")


def lab_exists(cluster: KubeCluster, lab: str) -> bool:
    try:
        cluster.admin().get(kube.labs_path(lab))
    except NotFound:
        return False
    return True


def test_up_kube_writes_the_lab_placed_on_nodes_and_down_removes_it(installed, nodes, lab_name,
                                                                    tmp_path):
    # with a user's rights (deploy/kubernetes/22-rbac-user.yaml), not the admin's
    cfg = str(installed.user_kubeconfig())
    # h1 (placed first: the largest) may go only to a Node labelled as its node_selector says:
    # the last of the three, where first fit would have taken the first
    zone = {"sfclab.dev/test-zone": lab_name}
    installed.admin().merge(f"/api/v1/nodes/{nodes[2]}", {"metadata": {"labels": zone}})
    cp = sfclab("up", "--kube", "--kubeconfig", cfg,
                str(lab_file(tmp_path, lab_name, selector=zone)), "--json")
    assert cp.returncode == 0, cp.stderr
    out = json.loads(cp.stdout)
    # three hosts of 1 CPU on three Nodes of 2: spread, one per Node, h1 on the labelled one
    assert sorted(out["placement"].values()) == sorted(nodes)
    assert out["placement"]["h1"] == nodes[2], out["placement"]
    lab = installed.admin().get(kube.labs_path(lab_name))
    assert lab["spec"]["hostCount"] == 3 and "nodes" not in lab["spec"]["file"]
    assert {p["host"]: p["node"] for p in lab["status"]["placement"]} == out["placement"]
    parts = {p["spec"]["host"]: p for p in parts_of(installed, lab_name)}
    assert set(parts) == {"h1", "h2", "h3"}
    assert list(parts["h2"]["spec"]["nodes"]) == ["b"] and len(parts["h2"]["spec"]["links"]) == 2
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == lab["metadata"]["uid"]
               for p in parts.values())
    assert all(p["metadata"]["labels"][kube.NODE_LABEL] == out["placement"][h]
               for h, p in parts.items())
    # allocated by the controller: each part's Node and plan, the Lab's status (each host at
    # its Node's address, a VNI per link across hosts, the same the parts' plans hold)
    assert all(p["spec"]["node"] == out["placement"][h] and p["spec"]["plan"]["lab"] == lab_name
               for h, p in parts.items())
    addresses = {n["metadata"]["name"]: n["status"]["addresses"][0]["address"]
                 for n in installed.admin().items("/api/v1/nodes") if n["metadata"]["name"]
                 in nodes}
    assert {h: a.split("/")[0] for h, a in lab["status"]["underlay"]["hosts"].items()} == \
        {h: addresses[n] for h, n in out["placement"].items()}
    vnis = sorted(t["vni"] for t in lab["status"]["tunnels"])
    assert len(vnis) == 2 and len(set(vnis)) == 2
    assert sorted(hl["vni"] for p in parts.values() for hl in p["spec"]["plan"]["host_links"]
                  ) == sorted(vnis * 2)  # each tunnel's two ends

    # the allocation is the controller's: a user may not write it
    from sfclab.errors import ClusterRefused
    from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig

    user = KubeApi(KubeConfig.load(cfg))
    for path, patch in ((kube.labs_path(lab_name, "status"), {"status": {"tunnels": []}}),
                        (kube.parts_path(f"{lab_name}.h1"), {"spec": {"node": nodes[1]}})):
        with pytest.raises(ClusterRefused) as e:
            user.merge(path, patch)
        assert e.value.status == 403, e.value

    # twice: refused, the first one untouched
    again = sfclab("up", "--kube", "--kubeconfig", cfg, str(lab_file(tmp_path, lab_name)))
    assert again.returncode == 2 and "already exists on this machine" in again.stderr
    assert len(parts_of(installed, lab_name)) == 3

    cp = sfclab("down", "--kube", "--kubeconfig", cfg, lab_name, "--json")
    assert cp.returncode == 0, cp.stderr
    assert sorted(json.loads(cp.stdout)["parts"]) == [f"{lab_name}.h{i}" for i in (1, 2, 3)]
    assert parts_of(installed, lab_name) == [] and not lab_exists(installed, lab_name)
    gone = sfclab("down", "--kube", "--kubeconfig", cfg, lab_name)
    assert gone.returncode == 2 and f"no lab '{lab_name}' on the cluster" in gone.stderr

    # labels no Node carries: one line naming the place, nothing written
    cp = sfclab("up", "--kube", "--kubeconfig", cfg,
                str(lab_file(tmp_path, lab_name, selector={"sfclab.dev/test-zone": "nowhere"})))
    assert cp.returncode == 2, cp.stderr
    assert "hosts.h1.node_selector" in cp.stderr and "no schedulable Kubernetes Node carries " \
        "the labels sfclab.dev/test-zone=nowhere" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    assert parts_of(installed, lab_name) == [] and not lab_exists(installed, lab_name)


def test_capacity_already_reserved_by_another_lab_counts(installed, nodes, lab_name, tmp_path):
    cfg = str(installed.admin_kubeconfig)
    first, second = f"{lab_name}a", f"{lab_name}b"
    assert sfclab("up", "--kube", "--kubeconfig", cfg,
                  str(lab_file(tmp_path, first, cpus=2))).returncode == 0
    try:
        # every Node's 2 CPUs are reserved by the first lab now: the second does not fit
        cp = sfclab("up", "--kube", "--kubeconfig", cfg, str(lab_file(tmp_path, second)))
        assert cp.returncode == 2, cp.stderr
        assert "does not fit the cluster's Nodes" in cp.stderr
        assert len(cp.stderr.strip().splitlines()) == 1
        assert not lab_exists(installed, second) and parts_of(installed, second) == []
        assert not LabState(second).exists  # nor half of it on this machine
    finally:
        assert sfclab("down", "--kube", "--kubeconfig", cfg, first).returncode == 0


def test_an_unreachable_cluster_exits_1_with_one_line(installed, tmp_path, lab_name):
    cfg = kubeconfig(tmp_path / "gone.kubeconfig", f"https://127.0.0.1:{free_port()}",
                     installed.ca, "t", "gone")
    cp = sfclab("up", "--kube", "--kubeconfig", str(cfg), str(lab_file(tmp_path, lab_name)))
    assert cp.returncode == 1
    assert cp.stderr.startswith("sfclab: error: https://127.0.0.1:")
    assert "not reachable" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1
    # nothing half-made on this machine either: no state of the lab (its journal of the cluster)
    assert not (Path(os.environ["SFCLAB_STATE_DIR"]) / "labs" / lab_name).exists()


def test_a_kubeconfig_without_rights_exits_2_and_writes_nothing(installed, nodes, lab_name,
                                                               tmp_path):
    # the agent's account may read labs and Nodes but not write a Lab
    cfg = installed.kubeconfig_for(kube.NAMESPACE, "sfclab-agent", nodes[0])
    cp = sfclab("up", "--kube", "--kubeconfig", str(cfg), str(lab_file(tmp_path, lab_name)))
    assert cp.returncode == 2, cp.stderr
    assert "403 Forbidden" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1
    assert not lab_exists(installed, lab_name) and parts_of(installed, lab_name) == []
    assert not LabState(lab_name).exists  # nor half of it on this machine


def test_a_kubeconfig_that_is_missing_exits_2(tmp_path, lab_name):
    cp = sfclab("up", "--kube", "--kubeconfig", str(tmp_path / "none"),
                str(lab_file(tmp_path, lab_name)))
    assert cp.returncode == 2
    assert cp.stderr.strip() == (f"sfclab: error: kubeconfig {tmp_path / 'none'}: cannot be "
                                 f"read: No such file or directory")
