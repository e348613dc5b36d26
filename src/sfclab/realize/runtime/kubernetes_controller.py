"""The controller of labs on Kubernetes (the ``sfclab-controller`` Deployment of
``deploy/kubernetes/50-deployment-controller.yaml``): it keeps what the cluster says of each
lab true, whoever wrote it and whatever stopped half-way.

``up --kube`` writes a lab as the Lab, then its parts, then the Lab's status (its allocation and
phase ``Pending``), and the Nodes' agents build the parts; ``down --kube`` sets the parts
``Removing``, waits for their agents, then deletes the parts and the Lab.  Either command may be
killed at any point (``kill -9``), and a Lab may be deleted by hand (``kubectl delete``); the
controller holds no state of its own (it reads everything from the API server, following the
Labs, parts, requests and Leases: :func:`.kubernetes_watch.follow`), so it may be killed and
started again at any point too.  Each pass (on every change, and every :data:`TICK_SECONDS`)
decides from what it reads (:func:`decide`, pure) and acts:

- **a Lab whose writer stopped before it was whole** (no phase in its status :data:`GRACE_SECONDS`
  after it was created: ``up --kube`` killed between its first write and its last) is removed:
  its phase ``Removing`` with the reason, its parts ``Removing`` (their agents remove what they
  built of them), and once every part is ``Removed`` (or has no agent's Node any more), the
  parts and the Lab deleted;
- **a Lab set ``Removing``** goes on being removed the same way (a controller killed meanwhile
  picks it up where it was);
- **every other Lab's phase** is its parts' (:func:`lab_phase`): ``Failed`` when a part failed,
  ``Removing`` while ``down`` removes it, ``Degraded`` when the agent of a part's Node holds no
  live Lease, ``Up`` when every part is up at its generation, else ``Pending``;
- **a part whose Lab is gone** (deleted by hand, or the Lab of that name is another one: its
  owner reference names another uid) is removed the same way: ``Removing``, then deleted once
  ``Removed``;
- **requests left behind** (:mod:`.kubernetes_requests`: their caller died before it deleted
  them) are deleted: answered ones after :data:`ANSWERED_KEEP_SECONDS`, unanswered ones after
  :data:`UNANSWERED_KEEP_SECONDS`, and any whose lab is gone.

Every object it changes carries sfclab's labels (the writers' mark) and, for a part, its owner
reference; it deletes only parts so marked, and requests labelled with a lab.  It runs as
``python -m sfclab.realize.runtime.kubernetes_controller [--kubeconfig F] [--context C |
--in-cluster] [--grace S]`` with the controller's ServiceAccount (``21-rbac-controller.yaml``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from threading import Event
from typing import Any

from ...errors import ClusterRefused, ClusterUnreachable
from .kubernetes import LAB_LABEL, MANAGED, labs_path, parts_path
from .kubernetes_api import KubeApi
from .kubernetes_lease import lease_path
from .kubernetes_parts import phase as part_phase
from .kubernetes_requests import ANSWERED, requests_path
from .kubernetes_watch import Liveness, follow

#: how long a Lab may be without a phase before its writer is taken for dead (seconds)
GRACE_SECONDS = 30.0
#: how often a pass runs when nothing changes (seconds)
TICK_SECONDS = 2.0
#: how long an answered request is kept for its caller to read (seconds)
ANSWERED_KEEP_SECONDS = 60.0
#: how long an unanswered request is kept (seconds): beyond any call's time
UNANSWERED_KEEP_SECONDS = 900.0


def created(obj: dict[str, Any]) -> float:
    """When ``obj`` was created (seconds since the epoch; now if it does not say)."""
    text = (obj.get("metadata") or {}).get("creationTimestamp")
    if not text:
        return time.time()
    return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def managed(obj: dict[str, Any], lab: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LAB_LABEL) == lab and all(labels.get(k) == v for k, v in MANAGED.items())


def owner_uid(part: dict[str, Any]) -> str | None:
    refs = (part.get("metadata") or {}).get("ownerReferences") or []
    return next((r.get("uid") for r in refs if r.get("kind") == "Lab"), None)


def lab_phase(parts: list[dict[str, Any]], dead: set[str]) -> tuple[str, str]:
    """A lab's phase from its parts (see the module) and why; ``dead``: the Nodes whose
    agent holds no live Lease."""
    phases = {p["metadata"]["name"]: part_phase(p) for p in parts}
    if not parts:
        return "Pending", "no part yet"
    failed = sorted(n for n, ph in phases.items() if ph == "Failed")
    if failed:
        return "Failed", f"failed: {', '.join(failed)}"
    if any(ph in ("Removing", "Removed") for ph in phases.values()):
        return "Removing", "its parts are being removed"
    lost = sorted(p["metadata"]["name"] for p in parts if p["spec"].get("node") in dead)
    if lost:
        return "Degraded", f"no live agent for: {', '.join(lost)}"
    if all(ph == "Up" for ph in phases.values()):
        return "Up", f"{len(parts)} parts up"
    return "Pending", ", ".join(f"{n} {ph}" for n, ph in sorted(phases.items()))


@dataclass
class Actions:
    """What one pass does: status patches, parts to set ``Removing``, objects to delete."""

    lab_status: dict[str, dict[str, Any]] = field(default_factory=dict)  # Lab -> status
    removing: list[str] = field(default_factory=list)  # parts
    delete_parts: list[str] = field(default_factory=list)
    delete_labs: list[str] = field(default_factory=list)
    delete_requests: list[str] = field(default_factory=list)


def _removal(lab: str, parts: list[dict[str, Any]], known_nodes: set[str], out: Actions
             ) -> bool:
    """Remove ``parts`` (see the module); whether every one is gone or removed."""
    done = True
    for p in parts:
        ph = (p.get("status") or {}).get("phase")
        if ph == "Removed" or p["spec"].get("node") not in known_nodes:
            out.delete_parts.append(p["metadata"]["name"])
            continue
        done = False
        if ph != "Removing":
            out.removing.append(p["metadata"]["name"])
    return done


def decide(labs: list[dict[str, Any]], parts: list[dict[str, Any]],
           requests: list[dict[str, Any]], dead: set[str], known_nodes: set[str], now: float,
           grace: float = GRACE_SECONDS) -> Actions:
    """One pass (see the module), pure: the objects as read, the Nodes whose agent holds no
    live Lease (``dead``), the Nodes there are; what to do."""
    out = Actions()
    by_lab: dict[str, list[dict[str, Any]]] = {}
    for p in parts:
        lab = ((p.get("metadata") or {}).get("labels") or {}).get(LAB_LABEL)
        if lab is not None and managed(p, lab) and p.get("spec", {}).get("lab") == lab:
            by_lab.setdefault(lab, []).append(p)
    uids = {}
    others = set()  # Labs of those names that are not sfclab's: their parts left alone
    for lab in labs:
        name, meta = lab["metadata"]["name"], lab["metadata"]
        if not managed(lab, name):
            others.add(name)
            continue
        uids[name] = meta.get("uid")
        mine = [p for p in by_lab.get(name, []) if owner_uid(p) == meta.get("uid")]
        status = lab.get("status") or {}
        if status.get("phase") == "Removing" or \
                (not status.get("phase") and now - created(lab) > grace):
            if status.get("phase") != "Removing":
                out.lab_status[name] = {"phase": "Removing", "message": (
                    "its writer (up --kube) stopped before the lab was whole: removed")}
            if _removal(name, mine, known_nodes, out):
                out.delete_labs.append(name)
            continue
        if not status.get("phase"):
            continue  # being written
        ph, why = lab_phase(mine, dead)
        if (ph, why) != (status.get("phase"), status.get("message")):
            out.lab_status[name] = {"phase": ph, "message": why}
    for name, mine in by_lab.items():  # parts of no Lab, or of another Lab of that name
        if name in others:
            continue
        orphans = [p for p in mine if name not in uids or owner_uid(p) != uids[name]]
        _removal(name, orphans, known_nodes, out)
    for r in requests:
        meta, status = r.get("metadata") or {}, r.get("status") or {}
        lab = (meta.get("labels") or {}).get(LAB_LABEL)
        age = now - created(r)
        if lab is None or lab not in uids or \
                (status.get("phase") in ANSWERED and age > ANSWERED_KEEP_SECONDS) or \
                age > UNANSWERED_KEEP_SECONDS:
            out.delete_requests.append(meta["name"])
    return out


class Controller:
    """The controller (see the module), through ``api`` (its own credentials)."""

    def __init__(self, api: KubeApi, say: Any = None, grace: float = GRACE_SECONDS):
        self.api, self.grace = api, grace
        self.say = say or (lambda _m: None)
        self.changed = Event()
        self.leases = Liveness()
        self.lock = threading.Lock()

    def act(self, a: Actions) -> None:
        for name, status in a.lab_status.items():
            self.api.merge(labs_path(name, "status"), {"status": status})
            self.say(f"lab {name}: {status['phase']}: {status.get('message', '')}")
        for name in a.removing:
            self.api.merge(parts_path(name, "status"), {"status": {"phase": "Removing"}})
            self.say(f"part {name}: Removing (its lab is gone or was never whole)")
        for name in a.delete_parts:
            self.api.delete(parts_path(name))
            self.say(f"part {name}: deleted")
        for name in a.delete_labs:
            self.api.delete(labs_path(name))
            self.say(f"lab {name}: deleted")
        for name in a.delete_requests:
            self.api.delete(requests_path(name))

    def one_pass(self) -> Actions:
        """Read everything, decide, act; what was done."""
        from .kubernetes_api import resource_path

        labs = self.api.items(labs_path())
        parts = self.api.items(parts_path())
        requests = self.api.items(requests_path())
        nodes = {n["metadata"]["name"] for n in self.api.items(resource_path("v1", "nodes"))}
        with self.lock:
            if not self.leases.seen:  # before the Leases are followed: as they are now
                self.leases.listed(self.api.items(lease_path()))
            dead = {p["spec"].get("node") for p in parts} - \
                {n for n in self.leases.seen if self.leases.live(n)}
        a = decide(labs, parts, requests, dead, nodes, time.time(), self.grace)
        self.act(a)
        return a

    def run(self, stop: Event) -> None:
        """Follow the Leases, and pass on every change of a Lab, part or request and every
        :data:`TICK_SECONDS`, until ``stop``."""
        def leases_listed(items: list[dict[str, Any]]) -> None:
            with self.lock:
                self.leases.listed(items)

        def lease_changed(kind: str, obj: dict[str, Any]) -> None:
            with self.lock:
                self.leases.saw(obj, deleted=kind == "DELETED")

        def poke(*_a: Any) -> None:
            self.changed.set()

        for path, on_list, on_change in ((lease_path(), leases_listed, lease_changed),
                                         (labs_path(), poke, poke), (parts_path(), poke, poke),
                                         (requests_path(), poke, poke)):
            threading.Thread(target=follow, daemon=True, args=(self.api, path, stop), kwargs={
                "on_list": on_list, "on_change": on_change, "say": self.say}).start()
        while not stop.is_set():
            self.changed.wait(TICK_SECONDS)
            self.changed.clear()
            try:
                self.one_pass()
            except (ClusterUnreachable, ClusterRefused) as e:
                self.say(f"pass failed, retrying: {e}")
                stop.wait(1.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m sfclab.realize.runtime.kubernetes_controller [--kubeconfig F] [--context C
    | --in-cluster] [--grace S]``: the controller until SIGTERM (exit 0), or 1 when the cluster
    refuses its first pass (one line on stderr)."""
    import argparse  # light start-up: only the controller's own process

    from .kubernetes_api import cluster_arguments, serve

    p = argparse.ArgumentParser(prog="python -m sfclab.realize.runtime.kubernetes_controller")
    cluster_arguments(p)
    p.add_argument("--grace", type=float, default=GRACE_SECONDS,
                   help="seconds a Lab may stay without a phase before its writer is taken "
                   f"for dead (default {GRACE_SECONDS:g})")
    a = p.parse_args(argv)

    def start(api: KubeApi, say: Any, stop: Event) -> None:
        c = Controller(api, say, a.grace)
        c.one_pass()  # the first refusal is the caller's error: exit 1
        c.say("reconciling")
        c.run(stop)

    return serve("controller", a, start)


if __name__ == "__main__":
    raise SystemExit(main())
