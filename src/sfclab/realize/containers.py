"""Nodes' containers: a stage of the node table for every node with an ``image``.

A node with ``image`` (:mod:`sfclab.spec.image`) is built like any node of its kind: its
namespace, links, addresses, routes and the kind's own configuration are made first, in the
namespace sfclab owns.  Then, in stage 8 (``start``), its container is started by podman
(:mod:`sfclab.kernel.podman`) *joined to that namespace*, so what runs in the container sees
exactly the node's interfaces, addresses and routes, and chains and the proxy work unchanged.
Containers of a lab start side by side (:data:`WORKERS` podman calls at a time).

Ownership.  Each container is named ``sfclab-<len>-<lab>-<node>``
(:func:`sfclab.plan.names.container_name`), journaled before anything is made (entry
``container``: name and node), and labelled ``sfclab.lab``, ``sfclab.node`` and its owner mark
``sfclab.mark=sfclab:<lab>:<node>:container``.  ``down`` (and a rollback) lists the lab's
containers by label, keeps those whose name is journaled and whose labels are all the lab's
(:func:`sfclab.realize.ownership.container_owner_problem`), and removes them by ID, before the
namespaces go.  So a container from an ``up`` killed at any point (even one podman created but
never started) is found and removed; one with a journaled name but foreign labels is reported
and left.

State.  ``inspect`` shows under the node's ``container`` its name, ID, image, status
(``running``, ``exited`` ...), exit code, how many of its processes the kernel killed for its
memory limit (``oom_kills``, from the kernel's log: :mod:`sfclab.kernel.kmsg`) and whether that
ended it (``oom_killed``); kills once seen are kept in the lab's state directory
(``containers/<node>.oom-kills.json``), since the log is a ring.  A container that died leaves
the lab up and is reported there.

The node's sysfs.  Before its container starts, each node gets a read-write sysfs of its
namespace mounted at ``<state root>/sysfs/<lab>/<node>`` (:func:`sysfs_dir`) with the source
``sfclab:<lab>:<node>:sysfs`` (:func:`sysfs_mark`): it makes the namespace's sysfs superblock
read-write for as long as it is mounted (:mod:`sfclab.kernel.sysfs`), so what sfclab writes there
later (RPS masks, threaded NAPI, through ``ip netns exec``) works beside a container that is not
privileged, whose own ``/sys`` stays read-only.  It is covered by the node's ``container``
journal entry, and unmounted (only while it carries that source) right after the container is
removed, before the namespace goes: a mount of a namespace's sysfs keeps the namespace alive.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SpecError, ToolError
from ..kernel import kmsg, netns, podman, sysfs
from ..plan.model import ContainerPlan
from ..plan.names import LABEL_LAB, container_labels
from ..spec.names import node_name_ok
from . import ownership
from .part import Part
from .state import LabState, state_root
from .step import step

if TYPE_CHECKING:
    from ..plan.model import Plan
    from .build import Builder
    from .teardown import TeardownReport

#: podman calls at a time when a lab's containers start (each mostly waits on runc)
WORKERS = 4


def container(lab: str, c: ContainerPlan,
              configs: dict[str, podman.ImageConfig] | None = None) -> podman.Container:
    """What podman is asked to run for ``c`` (the image's own command decided here, when the
    lab file gives none; ``configs``: images' configurations already read, by name)."""
    cmd = tuple(c.cmd)
    if not cmd:
        configs = {} if configs is None else configs
        if c.image not in configs:
            configs[c.image] = podman.image_config(c.image)
        from ..spec.image import run_command  # light start-up: down never reads an image
        cmd = run_command(None, configs[c.image])
    return podman.Container(
        name=c.name, image=c.image, netns_path=netns.path(c.netns),
        labels=container_labels(lab, c.node), cmd=cmd, env=dict(c.env),
        binds=tuple(podman.Bind(s, t, bool(w)) for s, t, w in c.binds),
        cpus=c.cpus, memory=c.memory, caps=tuple(c.caps), privileged=c.privileged,
        hostname=c.node)


def sysfs_dir(lab: str, node: str) -> Path:
    """Where node ``node``'s sysfs is held (names already checked: a lab's and a node's)."""
    return state_root() / "sysfs" / lab / node


def sysfs_mark(lab: str, node: str) -> str:
    """The source the held sysfs of ``node`` carries: sfclab's mark of it."""
    return f"sfclab:{lab}:{node}:sysfs"


def _hold_sysfs(lab: str, c: ContainerPlan) -> None:
    with step(f"sysfs of node {c.node} (before its container)"):
        sysfs.hold(c.netns, sysfs_dir(lab, c.node), sysfs_mark(lab, c.node))


def _release_sysfs(lab: str, nodes: list[str], errors: list[str]) -> None:
    """Unmount the held sysfs of ``nodes`` (each only while it carries its mark)."""
    for node in nodes:
        if not node_name_ok(node):
            continue  # journal text: never made into a path
        why = sysfs.release(sysfs_dir(lab, node), sysfs_mark(lab, node))
        if why:
            errors.append(f"held sysfs of node {node}: {why}")
    with contextlib.suppress(OSError):
        (state_root() / "sysfs" / lab).rmdir()  # only once empty


def _start(lab: str, c: ContainerPlan, configs: dict[str, podman.ImageConfig]) -> str:
    with step(f"container {c.name} of node {c.node} (image {c.image})"):
        return podman.run(container(lab, c, configs))


def start_node(lab: str, plan: Plan, node: str) -> None:
    """Start node ``node``'s container, if ``plan`` gives it one (its namespace made, its
    name journaled): its sysfs held first, then the container, as this stage does at ``up``."""
    c = next((c for c in plan.containers if c.node == node), None)
    if c is None:
        return
    _hold_sysfs(lab, c)
    _start(lab, c, {})


@dataclass(frozen=True)
class ImageProblem:
    """Why this machine cannot run node ``node``'s container: ``key`` is the key under the
    node's ``image`` (``name``, ``cmd``, ``memory``, ``binds[0]`` ...)."""

    node: str
    key: str
    message: str


def image_problem(cs: list[ContainerPlan]) -> ImageProblem | None:
    """The first of containers ``cs`` this machine cannot run (the checks of ``up``:
    :func:`sfclab.spec.image.machine_check`, each image and command read once), or None."""
    from ..plan.containers import image_of
    from ..spec.image import machine_check

    checked: set[tuple[str, tuple[str, ...]]] = set()
    for c in cs:
        try:
            machine_check(image_of(c), checked)
        except SpecError as e:
            return ImageProblem(c.node, e.place or "name", e.message)
    return None


def owned(lab: str, journal: list[dict[str, Any]], errors: list[str]) -> dict[str, podman.State]:
    """The lab's containers (by node) that are journaled by name *and* carry every label of
    the lab; a journaled one with foreign labels is reported in ``errors`` and left."""
    named = {e["name"]: e["node"] for e in journal if e.get("op") == "container"}
    if not named:
        return {}
    out: dict[str, podman.State] = {}
    states = podman.inspect(podman.find({LABEL_LAB: lab}))
    states.update(podman.inspect([n for n in named if n not in
                                  {s.name for s in states.values()}]))
    for st in states.values():
        node = named.get(st.name)
        if node is None:
            continue  # labelled with this lab but never journaled: not ours to remove
        problem = ownership.container_owner_problem(lab, node, st.labels)
        if problem:
            errors.append(f"container {st.name}: {problem}; left alone")
        else:
            out[node] = st
    return out


def _oom_kills(errors: list[str]) -> list[dict[str, str]]:
    """The kernel's OOM kill records (:mod:`sfclab.kernel.kmsg`); podman's own ``OOMKilled``
    stays false on these machines (conmon misses cgroup v1's OOM event), the kernel's log does
    not.  A kill's ``task_memcg`` is the container's cgroup, which ends in its ID."""
    try:
        return kmsg.oom_kills()
    except OSError as e:
        errors.append(f"the kernel's log cannot be read for OOM kills: {e.strerror or e}")
        return []


class Containers(Part):
    """The stage that starts, shows and removes nodes' containers."""

    name = "containers"
    #: removed before functions stop and before the lab's processes are ended
    teardown_rank = 5

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return [{"op": "container", "name": c.name, "node": c.node} for c in plan.containers]

    def start(self, b: Builder) -> None:
        todo = b.plan.containers
        if not todo:
            return
        b.progress(f"containers: {len(todo)}")
        configs: dict[str, podman.ImageConfig] = {}  # each image read once
        for c in todo:
            if not c.cmd and c.image not in configs:
                with step(f"image {c.image} of node {c.node}"):
                    configs[c.image] = podman.image_config(c.image)
        for c in todo:  # before any container: runc's read-only sysfs must not come first
            _hold_sysfs(b.plan.lab, c)
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(todo))) as pool:
            futures = [pool.submit(_start, b.plan.lab, c, configs) for c in todo]
        for f in futures:  # every call has ended: the first failure is raised, then rollback
            f.result()

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        if not any(e.get("op") == "container" for e in journal):
            return
        try:
            found = owned(state.name, journal, report.errors)
            podman.remove([st.id for st in found.values()])
        except ToolError as e:
            report.errors.append(f"containers: {e}")
        _release_sysfs(state.name, sorted({e["node"] for e in journal
                                           if e.get("op") == "container"}), report.errors)

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        for node, shown in states(state.name, plan).items():
            nodes.setdefault(node, {})["container"] = shown


def _seen_kills(lab: str, node: str, container_id: str, kills: list[dict[str, str]]) -> int:
    """How many OOM kills of container ``container_id`` were ever seen: those in the kernel's
    log now, added to what earlier looks kept in the lab's state (the log is a ring that other
    labs' messages overwrite within minutes on a busy machine)."""
    mine = {f"{k.get('pid')}:{k.get('task')}" for k in kills
            if k.get("task_memcg", "").endswith(f"-{container_id}")}
    state = LabState(lab)
    if not state.exists:
        return len(mine)
    kept = state.dir / "containers" / f"{node}.oom-kills.json"
    old: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        old = json.loads(kept.read_text())
    seen = set(old.get("kills", [])) if old.get("id") == container_id else set()
    if mine - seen:
        with contextlib.suppress(OSError):
            kept.parent.mkdir(exist_ok=True)
            kept.write_text(json.dumps({"id": container_id, "kills": sorted(seen | mine)}))
    return len(seen | mine)


def states(lab: str, plan: Plan) -> dict[str, dict[str, Any]]:
    """Each container's state as ``inspect`` shows it, by node (empty for a lab without)."""
    if not plan.containers:
        return {}
    journal = [{"op": "container", "name": c.name, "node": c.node} for c in plan.containers]
    errors: list[str] = []
    try:
        found = owned(lab, journal, errors)
    except ToolError as e:
        found, errors = {}, [str(e)]
    kills = _oom_kills(errors) if any(c.memory for c in plan.containers) else []
    out: dict[str, dict[str, Any]] = {}
    for c in plan.containers:
        st = found.get(c.node)
        shown: dict[str, Any] = {"name": c.name, "image": c.image, "present": st is not None}
        if st is not None:
            mine = _seen_kills(lab, c.node, st.id, kills) if c.memory else 0
            killed = st.oom_killed or (not st.running and st.exit_code == 137 and mine > 0)
            shown.update(id=st.id[:12], status=st.status, running=st.running,
                         exit_code=st.exit_code, oom_killed=killed, oom_kills=mine, pid=st.pid)
            if st.error:
                shown["error"] = st.error
        elif errors:
            shown["error"] = "; ".join(errors)
        out[c.node] = shown
    return out


def in_words(shown: dict[str, Any]) -> str:
    """A container's state (from :func:`states`) in a few words: ``running``, ``exited 0``,
    ``exited 137, OOM-killed``, ``absent``."""
    if not shown.get("present"):
        return "absent"
    if shown.get("running"):
        return "running"
    words = f"{shown.get('status')} {shown.get('exit_code')}"
    return words + (", OOM-killed" if shown.get("oom_killed") else "")


CONTAINERS = Containers()
