"""A real Kubernetes API server for the tests: Debian's etcd and the kube-apiserver ``make setup``
builds (``build/kube/kube-apiserver``), started by :class:`KubeCluster` on 127.0.0.1 only.

The pattern is controller-runtime's envtest: no kubelet, no scheduler, no controller manager,
no pod ever runs; the tests create Node objects themselves and run sfclab's agents as
processes.  What the fixture makes, in a temp dir of its own:

- etcd, its data dir there, listening on two free ports of 127.0.0.1 (never 2379: a free port
  the kernel hands out, checked free when bound);
- a service-account key pair (``openssl``), the signing key kept by the API server;
- a static token file with one admin (group ``system:masters``) and its kubeconfig;
- kube-apiserver: secure port on 127.0.0.1 (a free port), serving certificate made by the server
  itself in its cert dir (the kubeconfig trusts that certificate's CA), ``--authorization-mode=RBAC``,
  no endpoint reconciler (nothing is advertised; the root namespace is not touched).

:meth:`KubeCluster.kubeconfig_for` makes a kubeconfig for a ServiceAccount from a TokenRequest
(bound to a Node object when a node is named, so the token carries that node's name).  Both
servers are held by pidfds from the moment they start and are ended through them at the end
(SIGTERM, then SIGKILL): nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from sfclab.errors import ClusterRefused, ClusterUnreachable
from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig, resource_path

from .labtools import free_port

ROOT = Path(__file__).resolve().parents[2]
APISERVER = Path(os.environ.get("SFCLAB_KUBE_APISERVER",
                                ROOT / "build" / "kube" / "kube-apiserver"))
ETCD = Path("/usr/bin/etcd")
#: what the tests skip with when a part is missing
MISSING = "kube-apiserver (make setup: build/kube/) or etcd (Debian etcd-server) missing"


class Server:
    """A process we started, held by a pidfd from its start; ended only through it."""

    def __init__(self, name: str, argv: list[str], log: Path):
        self.name = name
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.fd = os.pidfd_open(self.proc.pid)

    def alive(self) -> bool:
        return not select.select([self.fd], [], [], 0)[0]

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def end(self, grace: float = 10.0) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.fd, signal.SIGTERM)
        if select.select([self.fd], [], [], grace)[0] == []:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.fd, signal.SIGKILL)
        self.proc.wait()
        os.close(self.fd)


def kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "test", "cluster": {"server": server,
                                                   "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "test", "user": user}}]}))
    path.chmod(0o600)
    return path


class KubeCluster:
    """etcd and kube-apiserver in ``workdir``, as a context manager (see the module)."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.servers: list[Server] = []
        self.server = ""
        self.admin_kubeconfig = workdir / "admin.kubeconfig"
        self.ca = workdir / "certs" / "apiserver.crt"
        self.started = 0.0
        self.ready_after = 0.0

    def __enter__(self) -> KubeCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        d = self.dir
        d.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        client, peer, secure = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client}"
        self.servers.append(Server("etcd", [
            str(ETCD), "--name", "sfclab-test", "--data-dir", str(d / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"sfclab-test=http://127.0.0.1:{peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}"], d / "etcd.log"))
        key, pub = d / "sa.key", d / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                       check=True, capture_output=True)
        token = secrets.token_hex(16)
        tokens = d / "tokens.csv"
        tokens.write_text(f'{token},sfclab-admin,sfclab-admin,"system:masters"\n')
        tokens.chmod(0o600)
        self._wait_etcd(client)
        self.server = f"https://127.0.0.1:{secure}"
        self.servers.append(Server("kube-apiserver", [
            str(APISERVER), "--etcd-servers", etcd_url, "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1", "--secure-port", str(secure),
            "--cert-dir", str(d / "certs"), "--token-auth-file", str(tokens),
            "--service-account-key-file", str(pub),
            "--service-account-signing-key-file", str(key),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--authorization-mode", "RBAC", "--endpoint-reconciler-type", "none",
            "--service-cluster-ip-range", "10.96.0.0/24", "--allow-privileged",
            "--enable-priority-and-fairness=false"], d / "kube-apiserver.log"))
        self._wait_ready(token)
        self.ready_after = time.monotonic() - self.started

    def _wait_etcd(self, port: int, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            etcd = self.servers[0]
            if not etcd.alive():
                raise RuntimeError(f"etcd exited:\n{etcd.tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            time.sleep(0.1)
        raise RuntimeError(f"etcd not listening after {limit} s:\n{self.servers[0].tail()}")

    def _wait_ready(self, token: str, limit: float = 90.0) -> None:
        deadline = time.monotonic() + limit
        apiserver = self.servers[-1]
        while time.monotonic() < deadline:
            if not apiserver.alive():
                raise RuntimeError(f"kube-apiserver exited:\n{apiserver.tail()}")
            if self.ca.exists():
                kubeconfig(self.admin_kubeconfig, self.server, self.ca, token, "sfclab-admin")
                try:
                    KubeApi(KubeConfig.load(str(self.admin_kubeconfig)), timeout=5).get("/readyz")
                    return
                except (ClusterUnreachable, ClusterRefused):
                    pass
            time.sleep(0.2)
        raise RuntimeError(f"kube-apiserver not ready after {limit} s:\n{apiserver.tail()}")

    def stop(self) -> None:
        for s in reversed(self.servers):
            s.end()
        self.servers.clear()

    # --- for the tests ---------------------------------------------------------------------
    def admin(self) -> KubeApi:
        return KubeApi(KubeConfig.load(str(self.admin_kubeconfig)))

    def kubeconfig_for(self, namespace: str, account: str, node: str | None = None,
                       seconds: int = 3600) -> Path:
        """A kubeconfig for ServiceAccount ``namespace/account`` (which must exist), its token
        from a TokenRequest, bound to Node ``node`` when given."""
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if node is not None:
            uid = self.admin().get(resource_path("v1", "nodes", name=node))["metadata"]["uid"]
            spec["boundObjectRef"] = {"kind": "Node", "apiVersion": "v1", "name": node,
                                      "uid": uid}
        answer = self.admin().create(
            resource_path("v1", "serviceaccounts", namespace, account, "token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        name = f"{account}-{node or 'any'}"
        return kubeconfig(self.dir / f"{name}.kubeconfig", self.server, self.ca,
                          answer["status"]["token"], name)

    def user_kubeconfig(self) -> Path:
        """A kubeconfig with the rights a person running sfclab has
        (``deploy/kubernetes/22-rbac-user.yaml``): ServiceAccount ``sfclab-system/sfclab-user``
        of the tests, bound to the Role and ClusterRole ``sfclab-user`` (the manifests must be
        installed), once those bindings took effect."""
        api = self.admin()
        rbac = "rbac.authorization.k8s.io/v1"
        subject = [{"kind": "ServiceAccount", "name": "sfclab-user", "namespace": "sfclab-system"}]
        for path, obj in (
                (resource_path("v1", "serviceaccounts", "sfclab-system", "sfclab-user"),
                 {"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "sfclab-user", "namespace": "sfclab-system"}}),
                (resource_path(rbac, "rolebindings", "sfclab-system", "sfclab-user"),
                 {"apiVersion": rbac, "kind": "RoleBinding",
                  "metadata": {"name": "sfclab-user", "namespace": "sfclab-system"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                              "name": "sfclab-user"}, "subjects": subject}),
                (resource_path(rbac, "clusterrolebindings", name="sfclab-user"),
                 {"apiVersion": rbac, "kind": "ClusterRoleBinding",
                  "metadata": {"name": "sfclab-user"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "sfclab-user"}, "subjects": subject})):
            api.apply(path, obj)
        cfg = self.kubeconfig_for("sfclab-system", "sfclab-user")
        probe = KubeApi(KubeConfig.load(str(cfg)))
        settled(lambda: (probe.items(resource_path("v1", "nodes")),
                         probe.items(resource_path("sfclab.dev/v1alpha1", "labs",
                                                   "sfclab-system"))), refused=False)
        return cfg

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self.servers]

    def rss(self) -> dict[str, int]:
        """Each server's resident memory, bytes."""
        out = {}
        for s in self.servers:
            with open(f"/proc/{s.proc.pid}/status") as f:
                kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
            out[s.name] = kb * 1024
        return out


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory):
    """One API server (etcd and kube-apiserver) for the whole session: a :class:`KubeCluster`.
    Skipped, with the reason, when ``make setup`` has not built kube-apiserver or etcd is
    missing.

    The kube test modules run in two ``xdist_group`` s, each on one worker, each with a server
    of its own (a session is a worker's): ``kube`` (daemonset, controller, build, manifests)
    and ``kube-b`` (ops, agents, up, failover), about 230 s each; as one group of 470 s they
    were the longest path of the parallel phase."""
    if not (APISERVER.exists() and ETCD.exists()):
        pytest.skip(MISSING)
    with KubeCluster(tmp_path_factory.mktemp("kube")) as cluster:
        yield cluster


def settled(attempt: Callable[[], Any], *, refused: bool, limit: float = 15.0) -> Any:
    """Call ``attempt`` until it is refused by the API server (``refused``: its
    :class:`ClusterRefused` is returned) or until it is not: RBAC bindings and admission
    policies just applied take effect a moment later (the API server's caches), so a test
    waits for the rule it checks, up to ``limit`` seconds, and fails beyond."""
    deadline = time.monotonic() + limit
    while True:
        try:
            got = attempt()
            if not refused:
                return got
        except ClusterRefused as e:
            if refused:
                return e
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"not refused within {limit} s")
        time.sleep(0.2)


# --- Nodes with agents, each in an emulated machine ----------------------------------------
#: the emulated machines' underlay addresses: each is a Node's InternalIP
MACHINES = {"m1": "198.19.255.11", "m2": "198.19.255.12", "m3": "198.19.255.13"}


class AgentProcess:
    """``python -m sfclab.realize.runtime.kubernetes_agent`` for one Node, held by a pidfd:
    building in ``netns`` (its machine's context), its state in ``state`` (its machine's
    state directory), talking to the API server from this machine's namespace.  (``argv``:
    another program of the same shape, the controller.)"""

    def __init__(self, node: str, kubeconfig: Path, netns: str | None = None,
                 state: Path | None = None, log: Path | None = None,
                 argv: list[str] | None = None):

        self.node, self.kubeconfig, self.netns, self.state = node, kubeconfig, netns, state
        self.log, self.argv = log, argv
        env = dict(os.environ, **({"SFCLAB_STATE_DIR": str(state)} if state else {}))
        argv = argv or [sys.executable, "-m", "sfclab.realize.runtime.kubernetes_agent",
                        "--node", node, "--kubeconfig", str(kubeconfig),
                        *(["--netns", netns] if netns else [])]
        out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 (held by the process)
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, env=env,
                                     text=True)
        if log:
            out.close()
        self.fd = os.pidfd_open(self.proc.pid)

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.fd, sig)

    def end(self) -> None:
        if self.fd < 0:
            return
        self.signal(signal.SIGTERM)
        if not select.select([self.fd], [], [], 10)[0]:
            self.signal(signal.SIGKILL)
        self.proc.wait()
        os.close(self.fd)
        self.fd = -1

    def restart(self) -> AgentProcess:
        """The same agent started again (after :meth:`end` or a kill)."""
        self.end()
        return AgentProcess(self.node, self.kubeconfig, self.netns, self.state, self.log,
                            self.argv)


def controller(cluster: KubeCluster, log: Path, grace: float) -> AgentProcess:
    """``python -m sfclab.realize.runtime.kubernetes_controller`` with the controller's
    ServiceAccount (its rights: ``deploy/kubernetes/21-rbac-controller.yaml``), a Lab left
    without a phase taken for its writer's death after ``grace`` seconds."""
    cfg = cluster.kubeconfig_for("sfclab-system", "sfclab-controller")
    return AgentProcess("controller", cfg, log=log, argv=[
        sys.executable, "-m", "sfclab.realize.runtime.kubernetes_controller", "--kubeconfig",
        str(cfg), "--grace", str(grace)])


#: the fixture's controller's grace for a Lab left short of its parts (seconds)
CONTROLLER_GRACE = 30.0


class KubeMachines:
    """Three Kubernetes Nodes of one test, each an emulated machine (a context namespace of
    the machines' lab, its underlay address the Node's InternalIP) with its agent running,
    and sfclab's controller (a process, :func:`controller`): ``nodes`` (Node names in machine
    order), ``agents`` (by Node), ``controller``, ``context(node)``."""

    def __init__(self, cluster: KubeCluster, name: str, tmp: Path):
        self.cluster, self.name, self.tmp = cluster, name, tmp
        self.machines = f"k{name[1:]}"  # the machines' lab: a name of its own
        self.nodes = [f"{name}-{m}" for m in MACHINES]
        self.machine_of = dict(zip(self.nodes, MACHINES, strict=True))
        self.agents: dict[str, AgentProcess] = {}
        self.controller: AgentProcess | None = None

    def context(self, node: str) -> str:
        return f"sfclab:{self.machines}:@{self.machine_of[node]}"

    def state(self, node: str) -> Path:
        return self.tmp / f"state-{self.machine_of[node]}"

    def start(self, node: str) -> AgentProcess:
        cfg = self.cluster.kubeconfig_for("sfclab-system", "sfclab-agent", node)
        self.agents[node] = AgentProcess(node, cfg, self.context(node), self.state(node),
                                         self.tmp / f"agent-{node}.log")
        return self.agents[node]

    def __enter__(self) -> KubeMachines:
        from sfclab.realize import lifecycle
        from sfclab.realize.kinds import load_lab_dict
        from sfclab.realize.runtime import kubernetes_manifests as manifests

        api = self.cluster.admin()
        manifests.install(api)
        lifecycle.up(load_lab_dict({
            "name": self.machines,
            "hosts": {m: {"address": a} for m, a in MACHINES.items()},
            "nodes": {"x": {"kind": "host", "host": "m1"}}}))
        try:
            for n, m in self.machine_of.items():
                api.create(resource_path("v1", "nodes"), {
                    "apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                    "status": {"allocatable": {"cpu": "2", "memory": "1Gi"},
                               "addresses": [{"type": "InternalIP",
                                              "address": MACHINES[m]}]}})
            probe = KubeApi(KubeConfig.load(str(self.cluster.kubeconfig_for(
                "sfclab-system", "sfclab-agent", self.nodes[0]))))
            # the agent's role just bound takes effect a moment later
            settled(lambda: probe.items(resource_path("sfclab.dev/v1alpha1", "labparts",
                                                      "sfclab-system")), refused=False)
            for n in self.nodes:
                self.start(n)
            self.start_controller()
        except BaseException:
            self.__exit__()
            raise
        return self

    def start_controller(self, grace: float = CONTROLLER_GRACE) -> AgentProcess:
        """The controller (a process with its own ServiceAccount), in place of the one
        running: it allocates the labs ``up --kube`` writes."""
        if self.controller is not None:
            self.controller.end()
        cfg = self.cluster.kubeconfig_for("sfclab-system", "sfclab-controller")
        probe = KubeApi(KubeConfig.load(str(cfg)))
        # its role just bound takes effect a moment later: else its first pass is refused
        settled(lambda: probe.items(resource_path("sfclab.dev/v1alpha1", "labs",
                                                  "sfclab-system")), refused=False)
        self.controller = controller(self.cluster, self.tmp / "agent-controller.log", grace)
        return self.controller

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                         for p in sorted(self.tmp.glob("agent-*.log")))

    def left_on_machines(self) -> dict[str, list[str]]:
        """The labs a test left built on the machines (its parts not removed by their
        agents), each removed by the host agent's ``down`` (its journal, marks checked)."""
        from sfclab.kernel import netns

        out: dict[str, list[str]] = {}
        for n in self.nodes:
            labs = self.state(n) / "labs"
            for d in sorted(labs.iterdir()) if labs.is_dir() else []:
                if d.is_dir():
                    out.setdefault(n, []).append(d.name)
                    netns.run(self.context(n), [sys.executable, "-m",
                              "sfclab.live.runtime.agent_verbs", "down"], check=False,
                              input=f'{{"lab": "{d.name}"}}',
                              env=dict(os.environ, SFCLAB_STATE_DIR=str(self.state(n))))
        return out

    def __exit__(self, *exc: object) -> None:
        from sfclab.realize import lifecycle

        api = self.cluster.admin()
        left: dict[str, list[str]] = {}
        try:
            if self.controller is not None:
                self.controller.end()
            for a in self.agents.values():
                a.end()
            left = self.left_on_machines()
        finally:
            for n in self.nodes:
                with contextlib.suppress(ClusterRefused):
                    api.delete(resource_path("coordination.k8s.io/v1", "leases",
                                             "sfclab-system", f"sfclab-agent-{n}"))
                with contextlib.suppress(ClusterRefused):
                    api.delete(resource_path("v1", "nodes", name=n))
            lifecycle.down(self.machines)
        assert not left, f"a test left parts built on the machines (removed): {left}"


@pytest.fixture
def kube_machines(kube_cluster, lab_name, tmp_path):
    """:class:`KubeMachines` of this test: three Nodes, each an emulated machine running its
    agent; all of it removed after."""
    with KubeMachines(kube_cluster, lab_name, tmp_path) as ms:
        yield ms
