"""``up``, ``down`` and ``ls``: a lab's life, by name.

``up`` refuses a name that is already up (or whose earlier ``up`` crashed: run ``down`` first)
rather than reconciling: a benchmark must start from a known state.  Before anything is made,
the whole lab is validated, functions run their machine checks, and every name is checked to be
free (sfclab never adopts an object it did not make).  The plan and the journal are written,
then objects are made; any failure (or Ctrl-C) tears down what the journal names and re-raises.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any
from typing import TYPE_CHECKING

from ..errors import LabError, SpecError
from ..plan.model import Plan
from ..plan.names import HOST_PREFIX
from ..kernel import ovs
from .runtime import far_name, runtime_at, runtime_for
from .runtime.base import HostRuntime
from .state import LabState, all_labs, pid_alive
from .teardown import TeardownReport

if TYPE_CHECKING:
    from ..spec.lab import Lab

Progress = Callable[[str], None]

#: how long ``down`` waits for a lab's lock before saying the lab is busy
DOWN_LOCK_WAIT_S = 5.0


def plan_for(lab: Lab) -> Plan:
    """The lab's plan, with ``datapath: auto`` resolved on this machine (asked only if the lab
    has an OVS bridge)."""
    from ..plan.build import build_plan  # light start-up: down/ls/inspect never plan

    dp = ovs.default_datapath() if any(n.attachment == "ovs-bridge" for n in lab.nodes.values()) \
        else "netdev"
    cpus = None
    if lab.hosts:
        from ..kernel.cpus import online  # light start-up: only labs with hosts read CPUs

        cpus = online()
    return build_plan(lab, ovs_datapath=dp, cpus=cpus)


def _refuse_existing(state: LabState) -> None:
    if not state.exists:
        return
    meta = state.meta()
    if meta.get("status") == "up":
        raise LabError(f"lab '{state.name}' is already up; run 'sfclab down {state.name}' first")
    raise LabError(f"an earlier 'sfclab up' of lab '{state.name}' did not finish "
                   f"(status {meta.get('status', 'unknown')}); run 'sfclab down {state.name}' "
                   "to remove what it made")


def check(lab: Lab) -> Plan:
    """Every check ``up`` makes short of touching the kernel: the plan, and each function's
    checks against its neighbours and the machine (programs that must exist ...), with the
    file and place named.  ``validate`` runs exactly this; ``up`` runs it first.  A node on a
    host reached over SSH is checked there, by that host's agent, at ``up``
    (:mod:`sfclab.realize.needs`), not on this machine."""
    plan = plan_for(lab)
    _check_images(lab, plan)
    for node in plan.functions:
        try:
            runtime_for(plan, plan.host_of(node)).check_node(plan, node)
        except SpecError as e:
            raise lab.error_at(e, ("nodes", node)) from None
    return plan


def _check_images(lab: Lab, plan: Plan) -> None:
    """Each node's ``image`` against this machine (:func:`sfclab.spec.image.machine_check`):
    the image present, its command inside it, limits the machine can give.  A node on a host
    reached over SSH is checked there, by the host's agent (:mod:`sfclab.realize.needs`)."""
    imaged = [n for n in lab.nodes.values() if n.image is not None]
    if not imaged:
        return
    from ..spec.image import machine_check  # light start-up: only labs with images

    checked: set[tuple[str, tuple[str, ...]]] = set()  # each image and command read once
    for n in imaged:
        if far_name(plan, plan.host_of(n.name)) is not None:
            continue  # checked on that host, by its agent (sfclab.realize.needs)
        assert n.image is not None
        try:
            machine_check(n.image, checked)
        except SpecError as e:
            raise lab.error_at(e, ("nodes", n.name, "image")) from None


def up(lab: Lab, *, progress: Progress | None = None) -> Plan:
    """Build ``lab`` on its hosts' runtime (:mod:`sfclab.realize.runtime`); return its plan.
    On failure nothing of it is left."""
    say = progress or (lambda _m: None)
    _refuse_node_selector(lab)
    state = LabState(lab.name)
    with state.locked():
        _refuse_existing(state)
        plan = check(lab)
        runtime_for(lab).up(lab, plan, say)
        return plan


def _refuse_node_selector(lab: Lab) -> None:
    """A host's ``node_selector`` chooses a Kubernetes Node: :class:`SpecError` at the first
    one, for a lab built anywhere else (this machine, hosts over SSH)."""
    for name, h in lab.hosts.items():
        if h.node_selector:
            raise lab.error_at(SpecError("Node labels choose a Kubernetes Node: only for "
                                         "'sfclab up --kube'"), ("hosts", name, "node_selector"))


def down(name: str) -> TeardownReport:
    """Remove lab ``name`` completely, from its journal; the lab file is not needed."""
    state = LabState(name)
    if not state.exists:
        known = ", ".join(s.name for s in all_labs()) or "none"
        raise LabError(f"no lab named '{name}' (labs: {known})")
    # a command killed a moment ago may leave the lock, for a few milliseconds, with a child
    # it forked that has not reached its exec yet (the lock's fd closes there): wait that out
    with state.locked(wait=DOWN_LOCK_WAIT_S):
        state.set_meta(status="removing")
        rt = runtime_for(state)
        rep = rt.down()
        if rt.left():
            return rep  # the unreachable hosts' parts stay journaled for a later down
        state.remove()  # nothing of the lab is left; the lock file goes as the lock is released
        return rep


def down_all() -> dict[str, TeardownReport]:
    return {s.name: down(s.name) for s in all_labs()}


def load_plan(name: str) -> tuple[LabState, Plan]:
    state = LabState(name)
    d = state.plan()
    if d is None:
        known = ", ".join(s.name for s in all_labs()) or "none"
        raise LabError(f"no lab named '{name}' (labs: {known})")
    return state, Plan.from_dict(d)


def listing() -> list[dict[str, Any]]:
    out = []
    for s in all_labs():
        meta = s.meta()
        d = s.plan() or {}
        status = meta.get("status", "unknown")
        if status == "building" and not pid_alive(meta.get("pid")):
            status = "crashed"
        out.append({"name": s.name, "status": status, "created": meta.get("created"),
                    "nodes": len(d.get("namespaces", [])) + len(d.get("ovs_bridges", [])),
                    "source": meta.get("source")})
    return out


def node_netns(name: str, node: str) -> str:
    """The namespace of ``node`` on this machine; ``@HOST`` names a host's context (labs with
    hosts).  A node on a host reached through its agent has none here (:func:`node_place`)."""
    ns, host = node_place(name, node)
    if host is not None:
        raise LabError(f"node '{node}' runs on host '{host}', reached through its agent: its "
                       f"namespace is on that machine (sfclab exec {name} {node} -- CMD runs "
                       f"there; or enter it on that host: ip netns exec {ns} ...)")
    assert ns is not None
    return ns


def node_place(name: str, node: str) -> tuple[str | None, str | None]:
    """Where ``node`` (or ``@HOST``, a host's context) is: its namespace, and the host reached
    over SSH it is on (``None``: this machine).  A real host's context is its root namespace
    (namespace ``None``)."""
    state, plan = load_plan(name)
    if node.startswith(HOST_PREFIX):
        host = next((h for h in plan.hosts if h.name == node[len(HOST_PREFIX):]), None)
        if host is None:
            hosts = ", ".join(HOST_PREFIX + h.name for h in plan.hosts) or "none"
            raise LabError(f"lab '{name}' has no host '{node[1:]}' (host contexts: {hosts})")
        rt = runtime_at(state, plan, host)
        return rt.context(host), rt.reached_as(host)
    try:
        ns = plan.netns_of(node)
    except KeyError:
        if any(b.node == node for b in plan.ovs_bridges):
            raise LabError(f"node '{node}' is an ovs-bridge: it has no namespace of its own") \
                from None
        nodes = [n.node for n in plan.namespaces] + [b.node for b in plan.ovs_bridges]
        raise LabError(f"lab '{name}' has no node '{node}' (nodes: {', '.join(nodes)})") from None
    host = plan.host_of(node)
    return ns, runtime_at(state, plan, host).reached_as(host)


def run_in(name: str, node: str, argv: list[str], *, check: bool = True,
           timeout: float | None = 60, input: str | None = None
           ) -> subprocess.CompletedProcess:
    """Run ``argv`` in the node's namespace (``@HOST``: a host's context) and wait, output
    captured; on a host reached over SSH, there.  ``check``: raise
    :class:`~sfclab.errors.ToolError` on a non-zero status."""
    ns, host = node_place(name, node)
    return _runtime(name, host).run(host, ns, argv, check=check, input=input, timeout=timeout)


def exec_in(name: str, node: str, argv: list[str]) -> int:
    """Run ``argv`` in the node's namespace with the terminal attached; return its exit status.
    A node on a host reached over SSH: there, over SSH (:func:`remote.exec_on`)."""
    ns, host = node_place(name, node)
    if not argv:
        raise LabError("nothing to run: give a command after '--'")
    return _runtime(name, host).exec(host, ns, argv)


def _runtime(name: str, host: str | None) -> HostRuntime:
    """The runtime of lab ``name``'s host ``host`` (``None``: this machine)."""
    state, plan = load_plan(name)
    return runtime_at(state, plan, next((h for h in plan.hosts if h.name == host), None))
