"""The per-Node agent of a lab on Kubernetes: its liveness by a coordination Lease, and what it
tells the cluster about the parts placed on its Node.

**The Lease.**  Agent of Node ``N`` holds Lease ``sfclab-system/sfclab-agent-N`` (holder ``N``,
:data:`LEASE_SECONDS` long) and renews it every :data:`RENEW_SECONDS`; a Lease whose
``renewTime`` plus its duration has passed is *expired* (:func:`expired`): its agent is taken
for dead.  The agent's credentials may write no other Lease (its admission policy,
``deploy/kubernetes/30-policy-agent.yaml``): liveness is what the Node's own agent says, never
another's.

**The parts.**  Each round it lists the ``LabPart`` objects labelled with its Node
(``sfclab.dev/node=N``) and writes into each one's status which agent holds it and which
generation it saw.  Building a part in this machine's kernel (the build engine of ``up``,
:mod:`sfclab.realize.build`, over the part's nodes and links) is not done yet: the status says
so (phase ``Pending``), and ``docs/kubernetes.md`` lists it under what is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from threading import Event
from typing import Any

from ...errors import ClusterUnreachable
from .kubernetes import LAB_LABEL, NAMESPACE, NODE_LABEL, labs_path, parts_path
from .kubernetes_api import KubeApi, resource_path

#: how long a Lease holds without a renewal (seconds)
LEASE_SECONDS = 15
#: how often an agent renews it (seconds)
RENEW_SECONDS = 5.0
#: what a part's status says while its agent cannot build it
NOT_BUILT = "seen by its agent; building a part on a Kubernetes Node is not implemented yet"


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

    def __init__(self, api: KubeApi, node: str, say: Callable[[str], None] | None = None):
        self.api = api
        self.node = node
        self.say = say or (lambda _m: None)
        self.acquired = time.time()

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

    def report(self, part: dict[str, Any]) -> None:
        """Say in ``part``'s status that this agent holds it, at the generation it saw."""
        meta = part["metadata"]
        status = part.get("status") or {}
        if status.get("agent") == self.node and \
                status.get("observedGeneration") == meta.get("generation"):
            return
        self.api.request("PATCH", parts_path(meta["name"], "status"),
                         {"status": {"agent": self.node, "phase": "Pending",
                                     "observedGeneration": meta.get("generation"),
                                     "message": NOT_BUILT}},
                         content_type="application/merge-patch+json")
        self.say(f"part {meta['name']}: held by {self.node}")

    def round(self) -> None:
        self.renew()
        for p in self.parts():
            self.report(p)

    def run(self, stop: Event) -> None:
        """Rounds every :data:`RENEW_SECONDS` until ``stop`` is set; a cluster that does not
        answer is retried (the Lease expires meanwhile, as it should)."""
        while not stop.is_set():
            try:
                self.round()
            except ClusterUnreachable as e:
                self.say(f"cluster not reachable, retrying: {e}")
            stop.wait(RENEW_SECONDS)


def main(argv: list[str] | None = None) -> int:
    """``python -m sfclab.realize.runtime.kubernetes_agent --node N [--kubeconfig F]
    [--context C | --in-cluster]``: the agent of Node N until SIGTERM (exit 0), or 1 when the
    cluster refuses it (one line on stderr)."""
    import argparse  # light start-up: only the agent's own process
    import signal
    import sys

    from ...errors import SfclabError
    from .kubernetes_api import KubeConfig

    p = argparse.ArgumentParser(prog="python -m sfclab.realize.runtime.kubernetes_agent")
    p.add_argument("--node", required=True, help="the Kubernetes Node this agent runs for")
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.add_argument("--in-cluster", action="store_true",
                   help="the Pod's own ServiceAccount token and the cluster's address")
    a = p.parse_args(argv)
    stop = Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        config = KubeConfig.in_cluster() if a.in_cluster else \
            KubeConfig.load(a.kubeconfig, a.context)
        agent = Agent(KubeApi(config), a.node,
                      lambda m: print(f"agent {a.node}: {m}", file=sys.stderr, flush=True))
        agent.round()  # the first round's refusal is the caller's error: exit 1
        agent.say("holding its Lease")
        agent.run(stop)
    except SfclabError as e:
        print(f"agent {a.node}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
