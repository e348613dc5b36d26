"""The agents' Leases: their names, their times, when one is expired, and the labs on the
cluster as their parts' agents hold them (``ls --kube``).

Agent of Node ``N`` holds Lease ``sfclab-system/sfclab-agent-N`` (holder ``N``,
:data:`LEASE_SECONDS` long) and renews it every :data:`RENEW_SECONDS`, from a thread of its
own, whatever else it does (a build longer than the Lease never lets it expire); a Lease whose
``renewTime`` plus its duration has passed is *expired* (:func:`expired`): its agent is taken
for dead.  The agent's credentials may write no other Lease (its admission policy,
``deploy/kubernetes/30-policy-agent.yaml``): liveness is what the Node's own agent says, never
another's.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from .kubernetes import LAB_LABEL, NAMESPACE, labs_path, parts_path
from .kubernetes_api import KubeApi, resource_path

#: how long a Lease holds without a renewal (seconds)
LEASE_SECONDS = 15
#: how often an agent renews it (seconds)
RENEW_SECONDS = 5.0


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
    """``lease`` was not renewed within its duration (or never was), by the time it names."""
    spec = lease.get("spec") or {}
    if not spec.get("renewTime"):
        return True
    until = parse_micro_time(spec["renewTime"]) + int(spec.get("leaseDurationSeconds") or 0)
    return (time.time() if now is None else now) > until


def live_holders(api: KubeApi) -> set[str]:
    """The Nodes whose agent holds a live Lease now."""
    return {x["spec"].get("holderIdentity") for x in api.items(lease_path()) if not expired(x)}


def listing(api: KubeApi) -> list[dict[str, Any]]:
    """The labs on the cluster (``ls --kube``): each with its phase, hosts, nodes, and how many
    of its parts are held by an agent whose Lease is live."""
    live = live_holders(api)
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
            "placement": {p["spec"]["host"]: p["spec"].get("node") for p in mine}})
    return out
