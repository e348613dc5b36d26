"""A one-Node Kubernetes cluster on this machine, for the test that runs sfclab's agent as a
real DaemonSet pod: the :mod:`.kube` fixture's API server, and beside it Kubernetes' own
kubelet, kube-controller-manager and kube-scheduler (``build/kube/kube-node``, built from the
pinned ``k8s.io/kubernetes`` module: ``make kube-node``) with Debian's containerd and runc.

What it makes, and why, in a short directory of its own (``/tmp/sfk-XXXX``: containerd's
socket paths must stay short):

- **a mount namespace** held by a ``sleep`` (``unshare --mount --propagation unchanged``),
  where containerd and the kubelet run.  The kubelet insists on six kernel tunables
  (``vm.overcommit_memory=1``, ``kernel.panic=10``, ``kernel.panic_on_oops=1``, ...) and writes
  them where they differ; this machine's differ, and the tests never change the machine's
  sysctls.  So in that namespace each differing ``/proc/sys`` file has a file with the wanted
  value bound over it, and the kubelet runs with ``protectKernelDefaults`` (it then only
  reads them, and would refuse to start rather than write).  ``/var/log`` and
  ``/run/containerd`` (paths the kubelet and containerd's shims hard-code) are tmpfs mounts of
  that namespace; ``/sys/fs/bpf`` is made a shared mount there (containerd refuses a
  bidirectional mount of a private one); ``/run/netns`` stays the machine's shared mount, so
  the namespaces the agent's pod binds there are the machine's.  The only trace outside it is
  the empty directory ``/run/containerd`` (a mount point), made if absent and left;
- **containerd** with its own root, state, socket and runc root, the cgroupfs driver, no CNI
  configuration (a host-network pod needs none; the Node reports its network not ready, which
  the DaemonSet's tolerations accept), and the ``pause`` and ``agent`` images imported from
  podman's store (``podman save | ctr import``; no registry is reachable);
- **the kubelet**: the cgroupfs driver under a cgroup root of its own
  (``/sfclab-kube-XXXX`` in every hierarchy, made here and removed after), no iptables chains
  (``makeIPTablesUtilChains: false``), its ports free ones of 127.0.0.1, its Node named
  ``sfclab-e2e-XXXX``, the admin's credentials;
- sfclab's manifests (``deploy/kubernetes``), and its agent's DaemonSet as the manifest has
  it but for what this cluster lacks or must keep to itself (:func:`daemonset`): the pod is
  placed on this Node only, is told the API server's address (there is no kube-proxy to
  reach it by the ``kubernetes`` Service), and keeps its state in this cluster's directory
  instead of the machine's ``/run/sfclab``;
- sfclab's controller as its Deployment has it but for the same (:func:`deployment`): placed
  on this Node, told the API server's address, and on the host's network (no CNI here gives a
  pod a network of its own); the manifest's unprivileged, read-only container otherwise;
- **kube-controller-manager** (only the DaemonSet, Deployment and ReplicaSet controllers, the
  garbage collector that removes their pods with them, and the publisher of the cluster's CA
  to namespaces, which a Pod's token volume needs) and **kube-scheduler**, in the machine's
  namespaces, serving nothing (``--secure-port 0``), started once the DaemonSet and the
  Deployment are as the test wants them.

containerd runs with ``restrict_oom_score_adj``: root here lacks ``CAP_SYS_RESOURCE`` (its
bounding set is ``000001fffeffffff``), so it may not lower an OOM score, and runc fails every
sandbox with ``failed to update /proc/self/oom_score_adj: Permission denied`` when containerd
asks for the -998 it gives sandboxes; restricted, a pod's score is never below containerd's.

Every process is held by a pidfd from its start and ended through it; containerd's shims (its
children, which outlive it) are ended through containerd first (``ctr tasks kill``), and the
cgroups removed only once empty.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from sfclab.errors import ClusterRefused
from sfclab.kernel import image_build, image_recipes, podman
from sfclab.realize.runtime import kubernetes_manifests as manifests
from sfclab.realize.runtime.kubernetes_api import resource_path

from .kube import ROOT, KubeCluster, Server, free_port

KUBE_NODE = Path(os.environ.get("SFCLAB_KUBE_NODE", ROOT / "build" / "kube" / "kube-node"))
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
#: what the test skips with when a part is missing
MISSING = ("kubelet (make kube-node: build/kube/kube-node) or containerd (Debian containerd) "
           "missing")
#: the kernel tunables the kubelet insists on (pkg/kubelet/cm: setupKernelTunables)
TUNABLES = {"vm/overcommit_memory": 1, "vm/panic_on_oom": 0, "kernel/panic": 10,
            "kernel/panic_on_oops": 1, "kernel/keys/root_maxkeys": 1000000,
            "kernel/keys/root_maxbytes": 25000000}
#: containerd's namespace for the CRI (the kubelet's containers)
CRI_NS = "k8s.io"
CGROUPS = Path("/sys/fs/cgroup")


def _mount_script(d: Path) -> str:
    """The mount namespace's set-up (see the module), then the holder's sleep."""
    lines = ["set -e"]
    for name, want in TUNABLES.items():
        if int(Path("/proc/sys", name).read_text().split()[0]) != want:
            f = d / "tunables" / name.replace("/", ".")
            f.parent.mkdir(exist_ok=True)
            f.write_text(f"{want}\n")
            lines.append(f"mount --bind {f} /proc/sys/{name}")
    lines += ["mountpoint -q /sys/fs/bpf && mount --make-shared /sys/fs/bpf",
              "mount -t tmpfs -o mode=0755 sfclab-kube /var/log",
              "mkdir -p /run/containerd",
              "mount -t tmpfs -o mode=0711 sfclab-kube /run/containerd",
              f"touch {d / 'ns-ready'}", "exec sleep infinity"]
    return "\n".join(lines)


def _containerd_config(d: Path) -> Path:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    f = d / "containerd.toml"
    f.write_text(f"""version = 2
root = "{d / 'containerd'}"
state = "{d / 'containerd-state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{d / 'containerd.sock'}"
[ttrpc]
  address = "{d / 'containerd.sock.ttrpc'}"
[{cri}]
  sandbox_image = "localhost/sfclab/pause:latest"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d / 'runc'}"
  [{cri}.cni]
    bin_dir = "{d / 'cni-bin'}"
    conf_dir = "{d / 'cni'}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'opt'}"
""")
    return f


def _kubelet_config(d: Path, cgroup_root: str, port: int, healthz: int) -> Path:
    f = d / "kubelet.yaml"
    f.write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": "127.0.0.1", "port": port, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root, "failCgroupV1": False,
        "failSwapOn": False, "makeIPTablesUtilChains": False, "protectKernelDefaults": True,
        "containerRuntimeEndpoint": f"unix://{d / 'containerd.sock'}",
        "podLogsDir": str(d / "pod-logs"), "resolvConf": "/etc/resolv.conf",
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "registerNode": True,
        "syncFrequency": "5s", "fileCheckFrequency": "5s"}))
    return f


def agent_images() -> dict[str, str]:
    """The images the Node runs, built from their recipes if their tags are not in podman's
    store (the agent's tag follows this checkout's sfclab): the name pods use -> the tag."""
    table = image_recipes.table()
    image_build.build(image_recipes.pick(table, ["pause", "agent"]))
    return {table[n].latest: table[n].tag for n in ("pause", "agent")}


def daemonset(node: str, server: str, state: Path) -> dict[str, Any]:
    """The agent's DaemonSet from ``deploy/kubernetes``, for this cluster: placed on Node
    ``node`` only, its pod told the API server's address (``server``: no kube-proxy here),
    its state in ``state`` (not the machine's /run/sfclab)."""
    ds = next(o for _, o in manifests.objects() if o["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"kubernetes.io/hostname": node}
    host, port = server.removeprefix("https://").rsplit(":", 1)
    agent = pod["containers"][0]
    agent["env"] = [*agent.get("env", []), {"name": "KUBERNETES_SERVICE_HOST", "value": host},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": port}]
    for v in pod["volumes"]:
        if v["name"] == "state":
            v["hostPath"]["path"] = str(state)
    return ds


def deployment(node: str, server: str) -> dict[str, Any]:
    """The controller's Deployment from ``deploy/kubernetes``, for this cluster: placed on Node
    ``node`` (tolerating its taints: its network is not ready), told the API server's address
    (``server``), on the host's network (there is no CNI to give its pod one)."""
    dep = next(o for _, o in manifests.objects() if o["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"kubernetes.io/hostname": node}
    pod["hostNetwork"] = True
    pod["tolerations"] = [{"operator": "Exists"}]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    c = pod["containers"][0]
    c["env"] = [*c.get("env", []), {"name": "KUBERNETES_SERVICE_HOST", "value": host},
                {"name": "KUBERNETES_SERVICE_PORT", "value": port}]
    return dep


class KubeNode:
    """The one-Node cluster around ``cluster`` (see the module), as a context manager:
    ``node`` is the Node's name, ``api`` the admin's client, ``state`` where the agent's pod
    keeps its state."""

    def __init__(self, cluster: KubeCluster, images: dict[str, str]):
        self.cluster = cluster
        self.images = images  # the name pods use -> the exact tag in podman's store
        self.dir = Path(tempfile.mkdtemp(prefix="sfk-", dir="/tmp"))
        self.id = secrets.token_hex(3)
        self.node = f"sfclab-e2e-{self.id}"
        self.cgroup_root = f"sfclab-kube-{self.id}"
        self.state = self.dir / "agent-state"
        self.servers: list[Server] = []
        self.holder: Server | None = None
        self.api = cluster.admin()
        self.timings: dict[str, float] = {}
        self.ds = daemonset(self.node, cluster.server, self.state)
        self.dep = deployment(self.node, cluster.server)

    # --- parts ----------------------------------------------------------------------------
    def _cgroups(self) -> None:
        for h in sorted(CGROUPS.iterdir()):
            d = h / self.cgroup_root
            d.mkdir()
            if (h / "cpuset.cpus").exists():
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((h / f).read_text())

    def _in_ns(self, argv: list[str]) -> list[str]:
        assert self.holder is not None
        return ["nsenter", f"--mount=/proc/{self.holder.proc.pid}/ns/mnt", "--", *argv]

    def _namespace(self) -> None:
        self.holder = Server("mount-namespace", ["unshare", "--mount", "--propagation",
                                                 "unchanged", "--", "sh", "-c",
                                                 _mount_script(self.dir)],
                             self.dir / "mount-namespace.log")
        _until(lambda: (self.dir / "ns-ready").exists(), 10, self.holder)

    def _containerd(self) -> None:
        for sub in ("cni", "cni-bin", "opt", "pod-logs", "agent-state"):
            (self.dir / sub).mkdir()
        self.servers.append(Server("containerd", self._in_ns(
            [str(CONTAINERD), "--config", str(_containerd_config(self.dir))]),
            self.dir / "containerd.log"))
        _until(lambda: self.ctr("version").returncode == 0, 30, self.servers[-1])

    def ctr(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return subprocess.run([str(CTR), "--address", str(self.dir / "containerd.sock"),
                               "--namespace", CRI_NS, *args], capture_output=True, text=True,
                              **kw)

    def _images(self) -> None:
        archive = self.dir / "image.tar"
        for name, tag in self.images.items():
            subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive),
                            tag], check=True, capture_output=True, env=podman.env())
            got = self.ctr("images", "import", "--no-unpack", str(archive), timeout=600)
            assert got.returncode == 0, got.stderr
            archive.unlink()
            got = self.ctr("images", "tag", "--force", tag, name)
            assert got.returncode == 0, got.stderr

    def _kubelet(self) -> None:
        cfg = _kubelet_config(self.dir, "/" + self.cgroup_root, free_port(), free_port())
        self.servers.append(Server("kubelet", self._in_ns([
            str(KUBE_NODE), "kubelet", "--config", str(cfg),
            "--kubeconfig", str(self.cluster.admin_kubeconfig),
            "--root-dir", str(self.dir / "kubelet"), "--hostname-override", self.node,
            "--v", "2"]), self.dir / "kubelet.log"))
        _until(lambda: self._get(resource_path("v1", "nodes", name=self.node)) is not None,
               90, self.servers[-1])

    def _sfclab(self) -> None:
        manifests.install(self.api)
        self.api.apply(manifests.object_path(self.ds), self.ds)
        self.api.apply(manifests.object_path(self.dep), self.dep)

    def _control(self) -> None:
        kc = str(self.cluster.admin_kubeconfig)
        self.servers.append(Server("kube-controller-manager", [
            str(KUBE_NODE), "kube-controller-manager", "--kubeconfig", kc,
            "--controllers", "daemonset-controller,deployment-controller,"
            "replicaset-controller,garbage-collector-controller,"
            "root-ca-certificate-publisher-controller",
            "--root-ca-file", str(self.cluster.ca), "--leader-elect=false",
            "--secure-port", "0", "--v", "2"], self.dir / "kube-controller-manager.log"))
        self.servers.append(Server("kube-scheduler", [
            str(KUBE_NODE), "kube-scheduler", "--kubeconfig", kc, "--leader-elect=false",
            "--secure-port", "0", "--v", "2"], self.dir / "kube-scheduler.log"))

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.api.get(path)
        except ClusterRefused:
            return None

    # --- what the test looks at -----------------------------------------------------------
    def pods(self, name: str = "sfclab-agent") -> list[dict[str, Any]]:
        """The agent's pods (or the controller's: ``name``) on this Node."""
        return [p for p in self.api.items(resource_path("v1", "pods", "sfclab-system"),
                                          f"app.kubernetes.io/name={name}")
                if (p.get("spec") or {}).get("nodeName") in (None, self.node)]

    def tasks(self) -> list[str]:
        """The containers containerd runs (their IDs)."""
        got = self.ctr("tasks", "ls", "-q")
        return got.stdout.split() if got.returncode == 0 else []

    def pod_log(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:]
                         for p in sorted((self.dir / "pod-logs").rglob("*.log")))

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.dir.glob("*.log"))) + "\n--- pod\n" + \
            self.pod_log()

    def rss(self) -> dict[str, int]:
        """Each process's resident memory, bytes (the Node's own processes)."""
        out = {}
        for s in self.servers:
            with contextlib.suppress(OSError), open(f"/proc/{s.proc.pid}/status") as f:
                out[s.name] = 1024 * next(int(ln.split()[1]) for ln in f
                                          if ln.startswith("VmRSS:"))
        return out

    def cgroups_left(self) -> list[str]:
        return [str(h / self.cgroup_root) for h in CGROUPS.iterdir()
                if (h / self.cgroup_root).exists()]

    # --- the context manager --------------------------------------------------------------
    def __enter__(self) -> KubeNode:
        try:
            for step in (self._cgroups, self._namespace, self._containerd, self._images,
                         self._kubelet, self._sfclab, self._control):
                t0 = time.monotonic()
                step()
                self.timings[step.__name__.strip("_")] = time.monotonic() - t0
        except BaseException:
            self.__exit__()
            raise
        return self

    def remove_daemonset(self, limit: float = 60) -> None:
        """Delete the Deployment and the DaemonSet and wait until their pods are gone (the
        garbage collector deletes them, the kubelet stops them)."""
        for obj in (self.dep, self.ds):
            with contextlib.suppress(ClusterRefused):
                self.api.delete(manifests.object_path(obj))
        deadline = time.monotonic() + limit
        while (self.pods() or self.pods("sfclab-controller") or self.tasks()) and \
                time.monotonic() < deadline:
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        if any(s.name == "kube-controller-manager" for s in self.servers):
            with contextlib.suppress(Exception):
                self.remove_daemonset()
        for path in (resource_path("coordination.k8s.io/v1", "leases", "sfclab-system",
                                   f"sfclab-agent-{self.node}"),
                     resource_path("v1", "nodes", name=self.node)):
            with contextlib.suppress(Exception):
                self.api.delete(path)
        for s in reversed(self.servers):
            if s.name == "containerd":
                self._end_tasks()
            s.end()
        self.servers.clear()
        if self.holder is not None:
            self.holder.end()
            self.holder = None
        self._remove_cgroups()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _end_tasks(self) -> None:
        """End what containerd still runs, through containerd (the shims outlive it)."""
        for task in self.tasks():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task)
        deadline = time.monotonic() + 20
        while self.tasks() and time.monotonic() < deadline:
            time.sleep(0.3)
        for task in self.tasks():
            self.ctr("tasks", "delete", "--force", task)

    def _remove_cgroups(self) -> None:
        """Our cgroup root in every hierarchy, deepest first (only under our own name)."""
        for h in sorted(CGROUPS.iterdir()):
            top = h / self.cgroup_root
            if not top.is_dir():
                continue
            for d in sorted((p for p in top.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    d.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def _until(ok: Any, limit: float, server: Server) -> None:
    """Wait until ``ok()``; fail with ``server``'s log when it exits or time runs out."""
    deadline = time.monotonic() + limit
    while not ok():
        if not server.alive():
            raise RuntimeError(f"{server.name} exited:\n{server.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name}: not ready after {limit} s:\n{server.tail()}")
        time.sleep(0.3)
