"""The per-Node agent of a lab on Kubernetes: its liveness by a coordination Lease, and what it
tells the cluster about the parts placed on its Node.

**The Lease.**  Agent of Node ``N`` holds Lease ``sfclab-system/sfclab-agent-N`` (holder ``N``,
:data:`LEASE_SECONDS` long) and renews it every :data:`RENEW_SECONDS`; a Lease whose
``renewTime`` plus its duration has passed is *expired* (:func:`expired`): its agent is taken
for dead.  The agent's credentials may write no other Lease (its admission policy,
``deploy/kubernetes/30-policy-agent.yaml``): liveness is what the Node's own agent says, never
another's.

**The parts.**  Each round it lists the ``LabPart`` objects labelled with its Node
(``sfclab.dev/node=N``) and reconciles each (:meth:`Agent.reconcile`), writing its progress
and result to the part's status (``phase``: ``Building``, ``Up`` or ``Failed`` with the
error; ``agent``; ``observedGeneration``):

- a part to build (``spec.plan``, its host's share of the lab's plan) is built by the host
  agent's ``up`` verb (:func:`sfclab.realize.agent.up`: the build engine of ``up`` through
  the node, link and function tables, the journal and the lab's marks on this machine, a
  rollback on failure), run as ``python -m sfclab.live.runtime.agent_verbs up`` in this
  machine's context (``--netns``: an emulated machine's context namespace in the tests; none
  in a DaemonSet pod, whose network is the host's);
- a part built here before is checked by its record (:func:`record_path`: the part's uid and
  generation, written once its ``up`` answered) and the lab's local state (``up``): a part
  left half-built (the agent killed mid-build) is removed by its journal, its marks checked,
  then built again;
- a part whose status the controller side set to ``Removing`` (``down --kube``) is removed
  by the ``down`` verb (what its journal names, each object's mark checked) and reported
  ``Removed``; a part that is gone from the cluster while its record is here is removed too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from threading import Event
from typing import Any

from ...errors import ClusterUnreachable, RealizeError, SfclabError
from ...kernel import netns as kernel_netns
from ..state import LabState, labs_dir
from .kubernetes import LAB_LABEL, NAMESPACE, NODE_LABEL, labs_path, parts_path
from .kubernetes_api import Conflict, KubeApi, NotFound, resource_path

#: how long a Lease holds without a renewal (seconds)
LEASE_SECONDS = 15
#: how often an agent renews it (seconds)
RENEW_SECONDS = 5.0
#: how often an agent looks at its parts (seconds)
ROUND_SECONDS = 1.0
#: how long one verb (a part's build or removal) may take (seconds)
VERB_SECONDS = 600.0
#: what the host agent's answer says when another operation holds the lab's lock
#: (:meth:`sfclab.realize.state.LabState.locked`): a build left running by an agent killed
#: mid-build (its child outlives it); tried again next round, not ``Failed``
BUSY = "is busy"
#: the longest message written to a part's status (its schema's limit)
MAX_MESSAGE = 1024


def record_path(lab: str) -> Path:
    """This machine's record of the part of ``lab`` its agent built: ``{"uid", "generation",
    "part"}``, beside the lab's local state."""
    return labs_dir() / f".{lab}.kube-part.json"


def read_record(lab: str) -> dict[str, Any] | None:
    try:
        got = json.loads(record_path(lab).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def lease_name(node: str) -> str:
    return f"sfclab-agent-{node}"


def lease_path(node: str | None = None) -> str:
    return resource_path("coordination.k8s.io/v1", "leases", NAMESPACE,
                         lease_name(node) if node is not None else None)


def micro_time(t: float) -> str:
    """``t`` (seconds since the epoch) as a Kubernetes MicroTime."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def expired(lease: dict[str, Any], now: float | None = None) -> bool:
    """``lease`` was not renewed within its duration (or never was)."""
    spec = lease.get("spec") or {}
    if not spec.get("renewTime"):
        return True
    until = parse_micro_time(spec["renewTime"]) + int(spec.get("leaseDurationSeconds") or 0)
    return (time.time() if now is None else now) > until


def listing(api: KubeApi) -> list[dict[str, Any]]:
    """The labs on the cluster (``ls --kube``): each with its phase, hosts, nodes, and how many
    of its parts are held by an agent whose Lease is live."""
    live = {x["spec"].get("holderIdentity") for x in api.items(lease_path())
            if not expired(x)}
    parts: dict[str, list[dict[str, Any]]] = {}
    for p in api.items(parts_path()):
        lab = (p["metadata"].get("labels") or {}).get(LAB_LABEL)
        if lab is not None:
            parts.setdefault(lab, []).append(p)
    out = []
    for lab in api.items(labs_path()):
        name = lab["metadata"]["name"]
        mine = parts.get(name, [])
        out.append({
            "name": name, "status": (lab.get("status") or {}).get("phase", "Pending"),
            "created": lab["metadata"].get("creationTimestamp"),
            "hosts": len(mine),
            "nodes": sum(len((p.get("spec") or {}).get("nodes") or {}) for p in mine),
            "held": sum(1 for p in mine if (p.get("status") or {}).get("agent") in live
                        and (p.get("status") or {}).get("agent") == p["spec"].get("node")),
            "placement": {p["spec"]["host"]: p["spec"]["node"] for p in mine}})
    return out


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
        self.renewed = -RENEW_SECONDS  # monotonic time of the last renewal (none yet)

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
        argv = [sys.executable, "-m", "sfclab.live.runtime.agent_verbs", verb]
        text = json.dumps(req)
        try:
            if self.netns is None:
                cp = subprocess.run(argv, input=text, capture_output=True, text=True,
                                    timeout=VERB_SECONDS)
            else:
                cp = kernel_netns.run(self.netns, argv, check=False, input=text,
                                      timeout=VERB_SECONDS)
        except subprocess.TimeoutExpired as e:
            raise RealizeError(f"{verb} took more than {VERB_SECONDS:g} s") from e
        if cp.returncode != 0:
            lines = (cp.stderr or "").strip().splitlines()
            raise RealizeError(lines[-1] if lines else f"{verb} exited {cp.returncode}")
        answer = json.loads(cp.stdout or "{}")
        return answer if isinstance(answer, dict) else {}

    def status(self, part: dict[str, Any], phase: str, message: str = "") -> None:
        """Write ``part``'s status, on the condition that the part has not changed since it was
        read (its resourceVersion): a ``Removing`` written meanwhile is never overwritten."""
        meta = part["metadata"]
        self.api.request("PATCH", parts_path(meta["name"], "status"),
                         {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                          "status": {"agent": self.node, "phase": phase,
                                     "observedGeneration": meta.get("generation"),
                                     "message": message[:MAX_MESSAGE]}},
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

    def round(self) -> None:
        if time.monotonic() - self.renewed >= RENEW_SECONDS:
            self.renew()
            self.renewed = time.monotonic()
        parts = self.parts()
        for p in parts:
            try:
                self.reconcile(p)
            except Conflict:
                pass  # the part changed while it was read: the next round sees it
            except NotFound:
                pass  # deleted meanwhile: orphans() removes what was built
        self.orphans(parts)

    def run(self, stop: Event) -> None:
        """Rounds every :data:`ROUND_SECONDS` (the Lease renewed every
        :data:`RENEW_SECONDS`) until ``stop`` is set; a cluster that does not answer, or
        refuses one write, is retried (the Lease expires meanwhile, as it should)."""
        while not stop.is_set():
            try:
                self.round()
            except ClusterUnreachable as e:
                self.say(f"cluster not reachable, retrying: {e}")
            except SfclabError as e:
                self.say(f"round failed, retrying: {e}")
            stop.wait(ROUND_SECONDS)


def main(argv: list[str] | None = None) -> int:
    """``python -m sfclab.realize.runtime.kubernetes_agent --node N [--kubeconfig F]
    [--context C | --in-cluster] [--netns NS]``: the agent of Node N until SIGTERM (exit 0),
    or 1 when the cluster refuses it (one line on stderr)."""
    import argparse  # light start-up: only the agent's own process
    import signal

    from .kubernetes_api import KubeConfig

    p = argparse.ArgumentParser(prog="python -m sfclab.realize.runtime.kubernetes_agent")
    p.add_argument("--node", required=True, help="the Kubernetes Node this agent runs for")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.add_argument("--in-cluster", action="store_true",
                   help="the Pod's own ServiceAccount token and the cluster's address")
    p.add_argument("--netns", help="build in this network namespace (an emulated machine's "
                   "context; default: the agent's own)")
    a = p.parse_args(argv)
    stop = Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        config = KubeConfig.in_cluster() if a.in_cluster else \
            KubeConfig.load(a.kubeconfig, a.context)
        agent = Agent(KubeApi(config), a.node,
                      lambda m: print(f"agent {a.node}: {m}", file=sys.stderr, flush=True),
                      a.netns)
        agent.round()  # the first round's refusal is the caller's error: exit 1
        agent.say("holding its Lease")
        agent.run(stop)
    except SfclabError as e:
        print(f"agent {a.node}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
