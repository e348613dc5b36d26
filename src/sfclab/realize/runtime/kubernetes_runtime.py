"""The ``kubernetes`` runtime: a lab whose hosts are Kubernetes Nodes, each driven by its Node's
agent (:mod:`.kubernetes_agent`).

This machine makes nothing of such a lab.  ``up`` journals one :data:`OP` entry (the
kubeconfig and context that reach the cluster, and its server) in this machine's state of the
lab, *before* the cluster is written, then writes the lab's objects (:func:`.kubernetes.up`:
the lab file, nothing allocated), waits until the controller has allocated the lab
(:func:`.kubernetes_parts.wait_allocated`; a lab it refuses is removed again and the command
exits 2 with its reason), saves the lab's plan as placed (each host at its Node's address,
planned again from the same objects as the controller planned it, :func:`whole_plan`: what
``chain add`` plans its tunnels against) and waits until every part is ``Up``
(:func:`.kubernetes_parts.wait_up`).  A
lab so journaled has this runtime (:func:`journaled`, read by
:func:`sfclab.realize.runtime.kind_for` and, for one host of it,
:func:`~sfclab.realize.runtime.runtime_at`), so the lab's usual commands reach the cluster with
no ``--kube``: ``down`` has each part removed by its agent and then deletes the objects
(:func:`.kubernetes_parts.remove`); ``inspect`` reads the parts' statuses
(:meth:`KubeRuntime.inspect_far`).

Everything else goes through the Nodes' agents as through SSH hosts' (:class:`~.agents.AgentHosts`):
a call is a request to the agent of the host's Node (:mod:`.kubernetes_requests`), the host
agent's verb run there.  So ``exec`` and ``run`` are the ``proc-run`` verb (the output comes back
whole when the program ends: no terminal is attached there, and standard input is passed only
when it is not a terminal), a measurement's receiver is ``proc-start``/``proc-read``/``proc-end``
(:mod:`.process`), and the chains' data plane is every Node's share.  Hosts cannot join or leave
such a lab (refused with one line).
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING, Any

from ...errors import LabError, RealizeError, SpecError, ToolError
from ...plan.model import HostPlan, Plan
from ..state import LabState
from ..teardown import TeardownReport
from .agents import CALL_TIMEOUT_S, AgentHosts
from .base import Progress
from .journal_ops import KUBE_CLUSTER
from .kubernetes_api import KubeApi, KubeConfig
from .kubernetes_requests import KubeTarget, call, call_armed

if TYPE_CHECKING:
    from ...spec.lab import Lab

OP = KUBE_CLUSTER
#: how long ``down`` waits for the agents to remove their parts (seconds)
DOWN_SECONDS = 300.0


def journaled(state: LabState) -> dict[str, Any] | None:
    """The cluster lab ``state`` was written to (its journal's :data:`OP` entry), if any."""
    return next((e for e in state.journal() if e.get("op") == OP), None)


def not_here(what: str) -> LabError:
    return LabError(f"{what} is not available for a lab on Kubernetes: its hosts are the "
                    "Nodes placement chose at up (docs/kubernetes.md)")


class KubeRuntime(AgentHosts):
    """A lab on a Kubernetes cluster (see the module)."""

    kind = "kubernetes"
    here = False

    def __init__(self, state: LabState, api: KubeApi | None = None,
                 kubeconfig: str | None = None, context: str | None = None,
                 timeout: float = DOWN_SECONDS):
        super().__init__(state)
        self._api = api
        self.kubeconfig = kubeconfig
        self.context_name = context
        self.timeout = timeout
        self.say: Progress = lambda _m: None
        self.placement: dict[str, str] = {}  # host -> Node, once up has placed them
        self._left = False
        self._targets: dict[str, KubeTarget] | None = None

    @property
    def api(self) -> KubeApi:
        """The cluster's client: the one given, else the journaled kubeconfig's."""
        if self._api is None:
            e = journaled(self.state)
            if e is None:
                raise LabError(f"lab '{self.state.name}' names no Kubernetes cluster here")
            self._api = KubeApi(KubeConfig.load(e.get("kubeconfig"), e.get("context")))
        return self._api

    # --- a lab's life ----------------------------------------------------------------------
    def check_node(self, plan: Plan, node: str) -> None:
        return None  # checked there, by the Node's agent, as it builds (sfclab.realize.needs)

    def up(self, lab: Lab, plan: Plan, say: Progress) -> None:
        import yaml  # light start-up: down/ls/inspect never write YAML

        from . import kubernetes
        from .kubernetes_parts import wait_allocated, wait_up

        state = self.state
        state.begin(plan.to_dict(), yaml.safe_dump(lab.to_dict(), sort_keys=False), lab.source)
        state.record([{"op": OP, "server": self.api.config.server,
                       "kubeconfig": os.path.abspath(self.kubeconfig) if self.kubeconfig
                       else None, "context": self.context_name}])
        t0 = time.monotonic()
        try:
            res = kubernetes.up(lab, self.api)
        except BaseException:
            state.remove()  # nothing was written to the cluster (all or nothing)
            raise
        say(f"lab '{lab.name}' written: {len(res.parts)} parts; waiting for the controller "
            "to allocate it")
        try:
            got = wait_allocated(self.api, lab.name, self.timeout, say)
        except SpecError:  # refused by the controller: nothing of it built anywhere
            kubernetes.down(lab.name, self.api)
            state.remove()
            raise
        except BaseException:
            state.set_meta(status="failed")  # on the cluster: down removes it
            raise
        try:
            self.placement = {x["host"]: x["node"] for x in got["status"]["placement"]}
            # the whole plan, each host at its Node's address (chain add plans with it):
            # planned again as the controller planned it, from the same objects
            state.save_plan(whole_plan(self.api, got).to_dict())
            say(f"lab '{lab.name}' allocated; waiting for the agents to build its parts")
            wait_up(self.api, lab.name, self.timeout, say)
        except BaseException:
            state.set_meta(status="failed")  # on the cluster: down removes it
            raise
        state.set_meta(status="up", pid=None, up_seconds=round(time.monotonic() - t0, 4))

    def down(self) -> TeardownReport:
        from .kubernetes_parts import remove

        rep = TeardownReport()
        try:
            got = remove(self.api, self.state.name, self.timeout, self.say)
        except LabError as e:
            if "no lab" not in str(e):
                raise
            got = {"parts": []}  # removed already (down --kube from elsewhere)
        except RealizeError as e:
            rep.errors.append(str(e))
            self._left = True
            return rep
        rep.hosts = [{"host": p.split(".", 1)[-1], "address": p, "removed": True, "part": p}
                     for p in got["parts"]]
        return rep

    def left(self) -> list[str]:
        return ["the cluster's parts"] if self._left else []

    def inspect(self, plan: Plan, found: dict[str, Any]) -> None:
        return None  # nothing of the lab is on this machine: inspect_far reads the cluster

    def inspect_far(self, out: dict[str, Any]) -> None:
        from .kubernetes_parts import parts_of, phase

        lab, parts = parts_of(self.state.name, self.api)
        out["kube"] = {"server": self.api.config.server,
                       "phase": ((lab or {}).get("status") or {}).get("phase"),
                       "parts": [part_row(p, phase(p)) for p in parts]}
        for p in parts:
            for n in (p.get("spec") or {}).get("nodes") or {}:
                if n in out.get("nodes", {}):
                    out["nodes"][n].update(kube_node=p["spec"].get("node"),
                                           kube_phase=phase(p))

    # --- programs in a node's namespace ----------------------------------------------------
    def context(self, host: HostPlan) -> str | None:
        return None  # a Node's context is its own root namespace

    def reached_as(self, host: HostPlan | None) -> str | None:
        assert host is not None
        return host.name

    def run(self, host: str | None, ns: str | None, argv: list[str], *, check: bool,
            input: str | None, timeout: float | None) -> subprocess.CompletedProcess:
        """``argv`` run by the host's agent (``proc-run``) in namespace ``ns`` there."""
        t = timeout if timeout is not None else 3600.0
        got = self.call(self.target(host), "proc-run", {
            "lab": self.state.name, "ns": ns, "argv": argv, "input": input, "timeout": t},
            timeout=t + 60)
        cp = subprocess.CompletedProcess(argv, int(got["status"]), got.get("stdout", ""),
                                         got.get("stderr", ""))
        if check and cp.returncode != 0:
            raise ToolError(argv, cp.returncode, cp.stderr)
        return cp

    def exec(self, host: str | None, ns: str | None, argv: list[str]) -> int:
        """As :meth:`run`, its output printed once it ends; standard input passed when it is
        a pipe or a file (not a terminal: nothing is attached there)."""
        import sys

        text = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
        cp = self.run(host, ns, argv, check=False, input=text, timeout=None)
        sys.stdout.write(cp.stdout)
        sys.stdout.flush()
        sys.stderr.write(cp.stderr)
        return cp.returncode

    # --- the hosts' agents -------------------------------------------------------------------
    def targets(self) -> dict[str, KubeTarget]:
        """Each host of the lab as the agent of its Node is reached: its part's Node and its
        address (the Lab's status), read once per runtime object."""
        if self._targets is None:
            from .kubernetes_parts import parts_of

            lab, parts = parts_of(self.state.name, self.api)
            addresses = (((lab or {}).get("status") or {}).get("underlay") or {}).get("hosts") \
                or {}
            self._targets = {
                str(p["spec"]["host"]): KubeTarget(
                    str(p["spec"]["host"]), str(addresses.get(p["spec"]["host"], "")),
                    str(p["spec"]["node"]), self.state.name) for p in parts}
        return self._targets

    def call(self, t: KubeTarget, verb: str, request: dict[str, Any], *,
             timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        return call(self.api, t, verb, request, timeout=timeout)

    def call_armed(self, ts: dict[str, KubeTarget], verb: str, request: dict[str, Any], *,
                   timeout: float = CALL_TIMEOUT_S) -> tuple[dict[str, dict[str, Any]], float]:
        return call_armed(self.api, ts, verb, request, timeout=timeout)

    def leave(self, host: HostPlan) -> list[str]:
        raise not_here("a host leaving")


def whole_plan(api: KubeApi, lab: dict[str, Any]) -> Plan:
    """The whole plan of ``lab`` (a Lab the controller allocated) as the controller planned
    it: :func:`.kubernetes_controller.part_plans` of the lab's objects, at the placement, Node
    addresses and CPUs its status names."""
    from .kubernetes_controller import lab_of, part_plans
    from .kubernetes_parts import parts_of

    _, parts = parts_of(lab["metadata"]["name"], api)
    status = lab["status"]
    placement = {x["host"]: x["node"] for x in status["placement"]}
    addresses = (status.get("underlay") or {}).get("hosts") or {}
    ips = {placement[h]: str(a).split("/")[0] for h, a in addresses.items() if h in placement}
    return part_plans(lab_of(lab, parts), placement, ips, status.get("planCpus"))[2]


def part_row(p: dict[str, Any], ph: str) -> dict[str, Any]:
    """One part as ``inspect`` and ``host ls`` show it."""
    spec, status = p.get("spec") or {}, p.get("status") or {}
    return {"part": p["metadata"]["name"], "host": spec.get("host"), "node": spec.get("node"),
            "phase": ph, "agent": status.get("agent"), "message": status.get("message"),
            "nodes": sorted((spec.get("nodes") or {}))}
