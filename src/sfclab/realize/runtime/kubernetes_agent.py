"""The per-Node agent of a lab on Kubernetes: its liveness by a coordination Lease, the parts
placed on its Node built and removed, the requests to it answered, and the other agents'
Leases followed for failover.

It runs as ``python -m sfclab.realize.runtime.kubernetes_agent --node N``, four threads each
following the API server (:func:`.kubernetes_watch.follow`: a list, then a watch, so a change is
seen within a round trip rather than at the next poll):

- **its Lease** (:mod:`.kubernetes_lease`), renewed every
  :data:`~.kubernetes_lease.RENEW_SECONDS` by a thread that does nothing else, so a build
  longer than the Lease never lets it expire;
- **the parts** (``LabPart`` labelled with its Node, ``sfclab.dev/node=N``: the controller
  labels a part so when it places it, in the same update that gives it its plan), each reconciled
  (:meth:`Agent.reconcile`) as it changes, its progress and result written to the part's
  status (``phase``: ``Building``, ``Up`` or ``Failed`` with the error; ``agent``;
  ``observedGeneration``; ``nodes``, the nodes the part holds now):

  - a part to build (``spec.plan``, its host's share of the lab's plan, which the controller
    allocated; a part without one is left alone until it has it) is built by the host
    agent's ``up`` verb (:func:`sfclab.realize.agent.up`: the build engine of ``up`` through
    the node, link and function tables, the journal and the lab's marks on this machine, a
    rollback on failure), run as ``python -m sfclab.live.runtime.agent_verbs up`` in this
    machine's context (``--netns``: an emulated machine's context namespace in the tests;
    none in a DaemonSet pod, whose network is the host's);
  - a part built here before is checked by its record (:func:`record_path`: the part's uid
    and generation, written once its ``up`` answered) and the lab's local state (``up``): a
    part left half-built (the agent killed mid-build) is removed by its journal, its marks
    checked, then built again;
  - a part whose status ``down --kube`` (or the controller) set to ``Removing`` is
    removed by the ``down`` verb (what its journal names, each object's mark checked) and
    reported ``Removed``; a part that is gone from the cluster while its record is here is
    removed too;

- **the requests** to it (``LabRequest``, :mod:`.kubernetes_answer`): the host agent's other
  verbs, which ``exec``, ``traffic`` and ``chain add``/``rm``/``migrate`` run on a lab on
  Kubernetes; after each, the part's ``status.nodes`` is brought up to date;
- **every agent's Lease** (:class:`.kubernetes_watch.Liveness`), looked at every
  :data:`~.kubernetes_failover.CHECK_SECONDS`: the hosts of its labs whose agent's Lease
  expired are written where its labs' health watchers take their instances out
  (:mod:`.kubernetes_failover`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from threading import Event
from typing import Any

from ...errors import ClusterRefused, ClusterUnreachable, RealizeError, SfclabError
from ...plan.model import Plan
from ..state import LabState, labs_dir
from . import kubernetes_failover as failover
from .kubernetes import NAMESPACE, NODE_LABEL, parts_path
from .kubernetes_answer import Answerer, run_verb
from .kubernetes_api import Conflict, KubeApi, NotFound
from .kubernetes_lease import (LEASE_SECONDS, RENEW_SECONDS, expired, lease_name, lease_path,
                               listing, micro_time, parse_micro_time)
from .kubernetes_requests import requests_path
from .kubernetes_watch import Liveness, follow

__all__ = ["LEASE_SECONDS", "RENEW_SECONDS", "Agent", "expired", "lease_name", "lease_path",
           "listing", "main", "micro_time", "parse_micro_time", "record_path"]

#: what the host agent's answer says when another operation holds the lab's lock
#: (:meth:`sfclab.realize.state.LabState.locked`): a build left running by an agent killed
#: mid-build (its child outlives it); tried again next round, not ``Failed``
BUSY = "is busy"
#: the longest message written to a part's status (its schema's limit)
MAX_MESSAGE = 1024


def record_path(lab: str) -> Path:
    """This machine's record of the part of ``lab`` its agent built: ``{"uid", "generation",
    "part"}``, beside the lab's local state."""
    return labs_dir() / f".{lab}{failover.RECORD}"


def read_record(lab: str) -> dict[str, Any] | None:
    try:
        got = json.loads(record_path(lab).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


class Agent:
    """The agent of Node ``node``, talking to the cluster through ``api`` (its own
    credentials)."""

    def __init__(self, api: KubeApi, node: str, say: Callable[[str], None] | None = None,
                 netns: str | None = None):
        self.api = api
        self.node = node
        self.netns = netns  # the machine's context, when it is not this process's own
        self.say = say or (lambda _m: None)
        self.acquired = time.time()
        self.reported: dict[str, list[str]] = {}  # lab -> the nodes its part last reported

    def renew(self) -> dict[str, Any]:
        """Write this Node's Lease, renewed now (made on the first call)."""
        return self.api.apply(lease_path(self.node), {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease_name(self.node), "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "sfclab",
                                    NODE_LABEL: self.node}},
            "spec": {"holderIdentity": self.node, "leaseDurationSeconds": LEASE_SECONDS,
                     "acquireTime": micro_time(self.acquired),
                     "renewTime": micro_time(time.time())}}, manager=f"agent-{self.node}")

    def parts(self) -> list[dict[str, Any]]:
        """The parts placed on this Node (label and ``spec.node`` both say so)."""
        return [p for p in self.api.items(parts_path(), f"{NODE_LABEL}={self.node}")
                if (p.get("spec") or {}).get("node") == self.node]

    # --- reconciling ---------------------------------------------------------------------
    def verb(self, verb: str, req: dict[str, Any]) -> dict[str, Any]:
        """The host agent's ``verb`` on this machine (see the module); its answer, or
        :class:`RealizeError` with its one line."""
        return run_verb(verb, req, self.netns)

    def status(self, part: dict[str, Any], phase: str, message: str = "") -> None:
        """Write ``part``'s status, on the condition that the part has not changed since it was
        read (its resourceVersion): a ``Removing`` written meanwhile is never overwritten."""
        meta = part["metadata"]
        self.api.request("PATCH", parts_path(meta["name"], "status"),
                         {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                          "status": {"agent": self.node, "phase": phase,
                                     "observedGeneration": meta.get("generation"),
                                     "message": message[:MAX_MESSAGE],
                                     **({"nodes": nodes_here(str(part["spec"]["lab"]))}
                                        if phase == "Up" else {})}},
                         content_type="application/merge-patch+json")
        self.say(f"part {meta['name']}: {phase}{': ' + message if message else ''}")

    def fresh(self, part: dict[str, Any]) -> dict[str, Any]:
        return self.api.get(parts_path(part["metadata"]["name"]))

    def remove(self, lab: str) -> dict[str, Any]:
        """Remove this machine's part of ``lab`` (the ``down`` verb: what its journal names,
        marks checked), then its record."""
        got = self.verb("down", {"lab": lab})
        if got.get("errors"):
            raise RealizeError("; ".join(map(str, got["errors"])))
        record_path(lab).unlink(missing_ok=True)
        return got

    def reconcile(self, part: dict[str, Any]) -> None:
        """Bring this machine to what ``part`` asks (see the module)."""
        meta, spec = part["metadata"], part.get("spec") or {}
        status = part.get("status") or {}
        lab = str(spec.get("lab"))
        phase = status.get("phase")
        if phase == "Removed":
            return
        if phase == "Removing":
            t0 = time.monotonic()
            try:
                got = self.remove(lab)
            except SfclabError as e:
                self.status(part, "Removing", f"removal failed, retrying: {e}")
                return
            self.status(part, "Removed", f"{got.get('namespaces', 0)} namespaces removed in "
                        f"{time.monotonic() - t0:.2f} s" if not got.get("absent")
                        else "nothing of it was here")
            return
        if "plan" not in spec:
            return
        rec = read_record(lab)
        state = LabState(lab)
        if rec is not None and rec.get("uid") == meta.get("uid") and \
                rec.get("generation") == meta.get("generation") and state.exists and \
                state.meta().get("status") == "up":
            if phase != "Up" or status.get("observedGeneration") != meta.get("generation"):
                self.status(part, "Up", rec.get("message", ""))
            return
        if phase == "Failed" and status.get("observedGeneration") == meta.get("generation"):
            return  # its build failed and rolled back; a new generation is tried again
        self.status(part, "Building")
        part = self.fresh(part)
        try:
            if state.exists:  # half-built (its agent killed), or an older generation's
                self.say(f"part {meta['name']}: removing what an earlier build left")
                self.remove(lab)
            t0 = time.monotonic()
            got = self.verb("up", {"plan": spec["plan"],
                                   "token": str(meta.get("uid", "")).replace("-", "")})
        except SfclabError as e:
            if BUSY in str(e):  # a build its killed predecessor started is still running
                self.status(part, "Building", f"waiting for an earlier build to end: {e}")
                return
            self.status(part, "Failed", str(e))
            return
        message = f"{len(got.get('namespaces') or [])} namespaces built in " \
                  f"{time.monotonic() - t0:.2f} s, underlay {got.get('underlay_if')}"
        tmp = record_path(lab).with_suffix(".tmp")
        tmp.write_text(json.dumps({"uid": meta.get("uid"), "generation": meta.get("generation"),
                                   "part": meta["name"], "message": message}))
        os.replace(tmp, record_path(lab))
        self.status(part, "Up", message)

    def orphans(self, parts: list[dict[str, Any]]) -> None:
        """Remove the parts this machine built whose LabPart is gone from the cluster."""
        uids = {p["metadata"].get("uid") for p in parts}
        for f in labs_dir().glob(".*.kube-part.json"):
            lab = f.name[1:-len(".kube-part.json")]
            rec = read_record(lab)
            if rec is None or rec.get("uid") in uids:
                continue
            try:
                self.api.get(parts_path(str(rec.get("part"))))
                continue  # there, but not (or no longer) placed on this Node's list yet
            except NotFound:
                pass
            self.say(f"part {rec.get('part')}: gone from the cluster; removing it here")
            try:
                self.remove(lab)
            except SfclabError as e:
                self.say(f"part {rec.get('part')}: removal failed, retrying: {e}")

    def report_nodes(self, lab: str) -> None:
        """Bring the ``status.nodes`` of this Node's part of ``lab`` up to date (after a
        request changed what the part holds: ``chain add``, ``rm``, ``migrate``)."""
        rec = read_record(lab)
        nodes = nodes_here(lab)
        if rec is None or self.reported.get(lab) == nodes:
            return
        try:
            self.api.merge(parts_path(str(rec.get("part")), "status"),
                           {"status": {"nodes": nodes}})
            self.reported[lab] = nodes
        except (ClusterRefused, ClusterUnreachable) as e:
            self.say(f"part {rec.get('part')}: its nodes not reported: {e}")

    def round(self) -> None:
        """One pass, as the threads do it: the Lease renewed, every part of this Node
        reconciled, the parts gone from the cluster removed here."""
        self.renew()
        self.parts_listed(self.parts())

    def parts_listed(self, parts: list[dict[str, Any]]) -> None:
        mine = [p for p in parts if (p.get("spec") or {}).get("node") == self.node]
        for p in mine:
            self.part_changed("MODIFIED", p)
        self.orphans(mine)

    def part_changed(self, kind: str, part: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.orphans([])
            return
        if (part.get("spec") or {}).get("node") != self.node:
            return
        try:
            self.reconcile(part)
        except Conflict:
            pass  # the part changed while it was read: its change comes next
        except NotFound:
            pass  # deleted meanwhile: orphans() removes what was built

    # --- the threads -----------------------------------------------------------------------
    def renewing(self, stop: Event) -> None:
        """Renew the Lease every :data:`RENEW_SECONDS` until ``stop``; a cluster that does
        not answer, or refuses, is retried every second (the Lease expires meanwhile, as it
        should)."""
        while not stop.is_set():
            try:
                self.renew()
                wait = RENEW_SECONDS
            except SfclabError as e:
                self.say(f"Lease not renewed, retrying: {e}")
                wait = 1.0
            stop.wait(wait)

    def failing_over(self, stop: Event) -> None:
        """Follow every agent's Lease; every :data:`~.kubernetes_failover.CHECK_SECONDS`, tell
        the labs built here which of their hosts lost their agent."""
        seen = Liveness()
        lock = threading.Lock()

        def listed(items: list[dict[str, Any]]) -> None:
            with lock:
                seen.listed(items)

        def changed(kind: str, obj: dict[str, Any]) -> None:
            with lock:
                seen.saw(obj, deleted=kind == "DELETED")

        threading.Thread(target=follow, daemon=True, args=(self.api, lease_path(), stop),
                         kwargs={"on_list": listed, "on_change": changed,
                                 "say": self.say}).start()
        while not stop.wait(failover.CHECK_SECONDS):
            with lock:
                dead = seen.expired()
            try:
                for lab in failover.look(self.api, dead, self.node):
                    self.say(f"lab {lab}: hosts lost (their agent's Lease expired): "
                             f"{sorted(dead - {self.node}) or 'none'}")
            except SfclabError as e:
                self.say(f"failover: retrying: {e}")

    def run(self, stop: Event) -> None:
        """The four threads of the module's docstring until ``stop`` is set."""
        answers = Answerer(self.api, self.node, self.netns, self.say, self.report_nodes)
        selector = f"{NODE_LABEL}={self.node}"
        threads = [
            threading.Thread(target=self.renewing, args=(stop,)),
            threading.Thread(target=follow, args=(self.api, parts_path(), stop), kwargs={
                "on_list": self.parts_listed, "on_change": self.part_changed,
                "selector": selector, "say": self.say}),
            threading.Thread(target=follow, args=(self.api, requests_path(), stop), kwargs={
                "on_list": answers.listed, "on_change": answers.changed,
                "selector": selector, "say": self.say}),
            threading.Thread(target=self.failing_over, args=(stop,))]
        for t in threads:
            t.daemon = True  # a build or a watch under way does not hold the exit
            t.start()
        stop.wait()


def nodes_here(lab: str) -> list[str]:
    """The nodes this machine's part of ``lab`` holds now (its saved plan's host)."""
    d = LabState(lab).plan()
    if d is None:
        return []
    hosts = Plan.from_dict(d).hosts
    return sorted(hosts[0].nodes) if len(hosts) == 1 else []


def main(argv: list[str] | None = None) -> int:
    """``python -m sfclab.realize.runtime.kubernetes_agent --node N [--kubeconfig F]
    [--context C | --in-cluster] [--netns NS]``: the agent of Node N until SIGTERM (exit 0),
    or 1 when the cluster refuses it (one line on stderr)."""
    import argparse  # light start-up: only the agent's own process

    from .kubernetes_api import cluster_arguments, serve

    p = argparse.ArgumentParser(prog="python -m sfclab.realize.runtime.kubernetes_agent")
    p.add_argument("--node", required=True, help="the Kubernetes Node this agent runs for")
    cluster_arguments(p)
    p.add_argument("--netns", help="build in this network namespace (an emulated machine's "
                   "context; default: the agent's own)")
    a = p.parse_args(argv)

    def start(api: KubeApi, say: Callable[[str], None], stop: Event) -> None:
        agent = Agent(api, a.node, say, a.netns)
        agent.renew()  # the first refusal is the caller's error: exit 1
        agent.say("holding its Lease")
        agent.run(stop)

    return serve(f"agent {a.node}", a, start)


if __name__ == "__main__":
    raise SystemExit(main())
