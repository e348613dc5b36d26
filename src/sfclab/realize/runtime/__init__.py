"""Host runtimes: one interface (:class:`.base.HostRuntime`), one implementation per way of
reaching a host, one table.

- :mod:`.base`: the interface and its model; :mod:`.process`: a long-running program in a
  lab's namespace, here or on a host driven by its agent;
- :mod:`.local`: ``local``, this machine's kernel and hosts emulated in it;
- :mod:`.agents`: what the runtimes of hosts each driven by its agent share (the chains' data
  plane through the agents, programs there), each runtime saying how a call reaches a host;
- :mod:`.ssh`: ``ssh``, real machines each driven over SSH by its agent;
- :mod:`.kubernetes_runtime`: ``kubernetes``, Kubernetes Nodes each driven by its agent;
  :mod:`.kubernetes` writes and removes a lab's resources on a cluster (``up --kube``),
  :mod:`.kubernetes_parts` waits for and reads the parts' statuses,
  :mod:`.kubernetes_requests` asks a Node's agent to run a verb (a ``LabRequest``),
  :mod:`.kubernetes_agent` is the per-Node agent (its Lease, its parts built, its requests
  answered by :mod:`.kubernetes_answer`, failover by :mod:`.kubernetes_failover`),
  :mod:`.kubernetes_lease` the agents' Leases, :mod:`.kubernetes_watch` following the API
  server (list and watch) and liveness, :mod:`.kubernetes_controller` the controller (Labs'
  phases, parts of labs written half or deleted, requests left behind),
  :mod:`.kubernetes_api` the HTTPS client and kubeconfig, :mod:`.kubernetes_manifests` the
  manifests of ``deploy/kubernetes/``.

- :mod:`.rows`: a table whose rows are loaded when first read (this one: a command on a lab of
  this machine loads neither the SSH nor the Kubernetes client); :mod:`.journal_ops`: the
  journal entries that say a lab's hosts are reached over SSH or on a cluster.

:func:`runtime_for` is the one place that tells them apart: a lab whose journal names a
Kubernetes cluster (``up --kube`` wrote it) has the ``kubernetes`` runtime; a lab whose file
gives its hosts ``ssh``, whose plan has a host that is not emulated, or whose journal names a
host reached over SSH, has the ``ssh`` runtime (in a plan: a host that is not emulated); every
other lab the ``local`` one.  (A lab file never says ``kubernetes``: ``up --kube`` chooses it,
:data:`RUNTIMES` ``["kubernetes"]``.)  Another way of reaching hosts (a Kubernetes cluster, say) is one more module
implementing
:class:`~.base.HostRuntime` and one more row in :data:`RUNTIMES` (and, for the operations on a
running lab, in :data:`sfclab.live.runtime.table.LIVE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...plan.model import HostPlan, Plan
from ..state import LabState
from .base import HostRuntime
from .journal_ops import KUBE_CLUSTER, SSH_HOST
from .rows import Rows

if TYPE_CHECKING:
    from ...spec.lab import Lab


def _local() -> type[HostRuntime]:
    from .local import LocalRuntime
    return LocalRuntime


def _ssh() -> type[HostRuntime]:
    from .ssh import SshRuntime
    return SshRuntime


def _kubernetes() -> type[HostRuntime]:
    from .kubernetes_runtime import KubeRuntime
    return KubeRuntime


#: each runtime by its name, its module loaded when its row is first read (:mod:`.rows`)
RUNTIMES: Rows[type[HostRuntime]] = Rows({"local": _local, "ssh": _ssh,
                                          "kubernetes": _kubernetes})


def kind_for(where: LabState | Lab | Plan, host: HostPlan | None = None) -> str:
    """The name of the runtime of ``where``: a running lab (its journal), a lab file (its
    hosts' ``ssh``), or host ``host`` of a plan (``None``: a node on no host, this
    machine's)."""
    if isinstance(where, LabState):
        ops = {e.get("op") for e in where.journal()}
        if KUBE_CLUSTER in ops:
            return "kubernetes"
        return "ssh" if SSH_HOST in ops else "local"
    if isinstance(where, Plan):
        return "ssh" if host is not None and not host.emulated else "local"
    return "ssh" if any(h.ssh is not None for h in where.hosts.values()) else "local"


def runtime_for(where: LabState | Lab | Plan, host: HostPlan | None = None) -> HostRuntime:
    """The runtime of ``where`` (see :func:`kind_for`), for its lab's state."""
    state = where if isinstance(where, LabState) else \
        LabState(where.lab if isinstance(where, Plan) else where.name)
    return RUNTIMES[kind_for(where, host)](state)


def runtime_at(state: LabState, plan: Plan, host: HostPlan | None) -> HostRuntime:
    """The runtime that reaches ``host`` of running lab ``state`` (whose plan is ``plan``):
    the lab's own when it is on a Kubernetes cluster (every host a Node, reached through its
    agent), else the host's (:func:`runtime_for`)."""
    if kind_for(state) == "kubernetes":
        return RUNTIMES["kubernetes"](state)
    return runtime_for(plan, host)


def far_name(plan: Plan, host: HostPlan | None) -> str | None:
    """The name ``host`` of ``plan`` is reached by from this machine (over SSH), ``None`` for
    this machine (no host, or an emulated one)."""
    return runtime_for(plan, host).reached_as(host) if host is not None else None
