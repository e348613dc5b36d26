"""sfclab's Kubernetes manifests against a real API server (the :mod:`.kube` fixture): the
fixture itself, a server-side dry run of every object, and the agent's rights (RBAC and its
admission policy): its own Node's Lease and parts yes, anything else no."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import yaml

from sfclab.errors import ClusterRefused
from sfclab.realize.runtime import kubernetes_manifests as manifests
from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig, resource_path

from .kube import APISERVER, ETCD, MISSING, KubeCluster, settled

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube")

NS = "sfclab-system"
LEASES = resource_path("coordination.k8s.io/v1", "leases", NS)


def lease(name: str, holder: str) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}}


def ensure_node(api: KubeApi, name: str) -> None:
    api.apply(resource_path("v1", "nodes", name=name), node(name))


@pytest.fixture
def installed(kube_cluster):
    """The manifests applied for real (idempotent: server-side apply; per test, so that no
    module fixture splits the kube tests over workers: tests/conftest.py)."""
    manifests.install(kube_cluster.admin())
    return kube_cluster


def test_fixture_serves_ready_with_rbac(kube_cluster):
    api = kube_cluster.admin()
    assert api.get("/version")["gitVersion"] == "v1.34.2"
    # RBAC is on: an unknown token is refused, not let through
    cfg = KubeConfig.load(str(kube_cluster.admin_kubeconfig))
    stranger = KubeApi(KubeConfig(**{**cfg.__dict__, "token": "not-a-token"}))
    with pytest.raises(ClusterRefused) as e:
        stranger.items(resource_path("v1", "namespaces"))
    assert e.value.status == 401
    # its etcd is not on the default port
    assert all(":2379 " not in " ".join(open(f"/proc/{p}/cmdline").read().split("\0")) + " "
               for p in kube_cluster.pids())


@pytest.mark.skipif(not (APISERVER.exists() and ETCD.exists()), reason=MISSING)
def test_cluster_ends_both_servers_and_frees_its_ports(tmp_path):
    with KubeCluster(tmp_path / "c") as c:
        pids = c.pids()
        port = int(c.server.rsplit(":", 1)[1])
        assert all(os.path.exists(f"/proc/{p}") for p in pids)
        print(f"ready after {c.ready_after:.1f} s; resident: "
              + ", ".join(f"{k} {v >> 20} MiB" for k, v in c.rss().items()))
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)
    with socket.socket() as s:  # nothing listens there any more
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_manifests_pass_a_server_side_dry_run(kube_cluster):
    api = kube_cluster.admin()
    # a namespaced object's dry run needs its namespace to exist: the namespace for real first
    ns = next(o for _, o in manifests.objects() if o["kind"] == "Namespace")
    api.apply(manifests.object_path(ns), ns)
    done = manifests.install(api, dry_run=True)
    kinds = {d.split("/")[0] for d in done}
    assert kinds == {"Namespace", "CustomResourceDefinition", "ServiceAccount", "Role",
                     "RoleBinding", "ClusterRole", "ClusterRoleBinding",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                     "DaemonSet", "Deployment"}
    # nothing was stored by the dry run
    crds = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
    names = {c["metadata"]["name"] for c in api.items(crds)}
    assert "labparts.sfclab.dev" not in names or installed_before(api)


def installed_before(api: KubeApi) -> bool:
    """The module's ``installed`` fixture may have run first (tests in any order)."""
    return any(r["metadata"]["name"] == "sfclab-agent" for r in api.items(
        resource_path("rbac.authorization.k8s.io/v1", "roles", NS)))


def test_the_dry_run_refuses_a_crd_schema_that_is_not_structural(kube_cluster, tmp_path):
    api = kube_cluster.admin()
    crd = yaml.safe_load((manifests.MANIFESTS / "11-crd-labpart.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["host"]["type"]  # a property without a type: not structural
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    with pytest.raises(ClusterRefused) as e:
        manifests.install(api, dry_run=True, directory=tmp_path)
    assert e.value.status == 422
    assert "properties[spec].properties[host].type: Required value" in str(e.value)


def test_the_daemonset_runs_privileged_in_the_hosts_namespaces_with_bpffs_and_netns():
    ds = next(o for _, o in manifests.objects() if o["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] and pod["hostPID"]
    agent = pod["containers"][0]
    assert agent["securityContext"]["privileged"]
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["mountPath"]: m.get("mountPropagation") for m in agent["volumeMounts"]}
    assert paths["bpffs"] == "/sys/fs/bpf" and mounts["/sys/fs/bpf"] == "Bidirectional"
    assert paths["netns"] == "/run/netns" and mounts["/run/netns"] == "Bidirectional"


def agent_api(cluster: KubeCluster, node_name: str | None) -> KubeApi:
    path: Path = cluster.kubeconfig_for(NS, "sfclab-agent", node_name)
    return KubeApi(KubeConfig.load(str(path)))


@pytest.fixture
def two_nodes(installed):
    """Nodes kn1 and kn2, removed after the test (placement in other tests sees every Node)."""
    admin = installed.admin()
    for n in ("kn1", "kn2"):
        ensure_node(admin, n)
    yield installed
    for n in ("kn1", "kn2"):
        admin.delete(resource_path("v1", "nodes", name=n))
    for n in ("kn1", "kn2"):
        admin.delete(f"{LEASES}/sfclab-agent-{n}")


def test_the_agent_writes_its_own_nodes_lease_and_nothing_foreign(two_nodes):
    installed = two_nodes
    admin = installed.admin()
    agent = agent_api(installed, "kn1")
    # its own Node's Lease: made (once the agent's role is bound) and renewed
    settled(lambda: agent.apply(f"{LEASES}/sfclab-agent-kn1", lease("sfclab-agent-kn1", "kn1"),
                                manager="agent"), refused=False)
    agent.apply(f"{LEASES}/sfclab-agent-kn1", lease("sfclab-agent-kn1", "kn1"), manager="agent")
    assert admin.get(f"{LEASES}/sfclab-agent-kn1")["spec"]["holderIdentity"] == "kn1"
    # another Node's Lease: refused by the agent's policy (once it is in force)
    e = settled(lambda: agent.apply(f"{LEASES}/sfclab-agent-kn2",
                                    lease("sfclab-agent-kn2", "kn2"), manager="agent"),
                refused=True)
    assert e.status == 403 and "own Node's Lease" in str(e)
    # foreign writes: refused by RBAC
    foreign = [
        (resource_path("v1", "configmaps", "default", "x"),
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x",
                                                                "namespace": "default"}}),
        (resource_path("v1", "nodes", name="kn2"), node("kn2")),
        (resource_path("sfclab.dev/v1alpha1", "labs", NS, "x"),
         {"apiVersion": "sfclab.dev/v1alpha1", "kind": "Lab",
          "metadata": {"name": "x", "namespace": NS}, "spec": {"lab": "x", "hostCount": 1}}),
        (resource_path("coordination.k8s.io/v1", "leases", "kube-node-lease", "kn1"),
         {**lease("kn1", "kn1"), "metadata": {"name": "kn1", "namespace": "kube-node-lease"}}),
    ]
    for path, obj in foreign:
        with pytest.raises(ClusterRefused) as e:
            agent.apply(path, obj, manager="agent")
        assert e.value.status == 403, path
    # the agent's account with a token bound to no Node writes no Lease at all
    unbound = agent_api(installed, None)
    with pytest.raises(ClusterRefused) as e:
        unbound.apply(f"{LEASES}/sfclab-agent-kn1", lease("sfclab-agent-kn1", "kn1"),
                      manager="agent")
    assert e.value.status == 403 and "bound to no Node" in str(e.value)
