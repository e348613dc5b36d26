"""Failover by Leases, the agent's side: which hosts of the labs built on this machine have
lost their agent, written where the lab's health watcher reads it.

On hosts driven over SSH the watchers of a lab's hosts tell each other over the underlay what
they see, and a host whose watcher falls silent is taken out (:mod:`sfclab.live.health.peerwatch`).
On Kubernetes a host is alive while the agent of its Node holds a live Lease
(:class:`.kubernetes_watch.Liveness`): every agent follows all the agents' Leases and, for each
lab it holds a part of, writes :data:`LOST_HOSTS` in that lab's state on its machine: each
host of the lab whose Node's Lease has expired, with the nodes its part last reported
(``status.nodes``: its share of the lab file's nodes and the chain instances added there since).
The lab's watcher on this machine (:mod:`sfclab.live.health.watch`) takes those hosts'
instances out of the slot tables of the directions whose ingress is here, as it takes out an
instance that dies here; when the Lease is live again the host leaves the file and its
instances are put back.

The time, from an agent's death to its instances out of the other hosts' slot tables: the
Lease's :data:`~.kubernetes_lease.LEASE_SECONDS` after its last renewal (which was at most
:data:`~.kubernetes_lease.RENEW_SECONDS` before the death), plus :data:`CHECK_SECONDS` for this
agent to look, plus one probe period of the watcher (50 ms): at most
``LEASE_SECONDS + CHECK_SECONDS + 0.05`` s, 16.05 s.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..state import LabState, labs_dir
from .kubernetes import LAB_LABEL, parts_path
from .kubernetes_api import KubeApi

#: the file of a lab's state (on the machine of one of its parts) naming its lost hosts
LOST_HOSTS = "lost-hosts.json"
#: how often an agent looks at the Leases it follows (seconds)
CHECK_SECONDS = 1.0
#: the longest from an agent's death to its instances failed over (seconds; the module)
FAILOVER_SECONDS = 15 + CHECK_SECONDS + 0.05
#: the suffix of an agent's record of a part it built (:func:`.kubernetes_agent.record_path`)
RECORD = ".kube-part.json"


def labs_here() -> list[str]:
    """The labs whose part the agent of this machine built (its records)."""
    return sorted(f.name[1:-len(RECORD)] for f in labs_dir().glob(f".*{RECORD}"))


def part_nodes(part: dict[str, Any]) -> list[str]:
    """The nodes a part holds: as its agent last reported them, else its lab file's share."""
    status = part.get("status") or {}
    if status.get("nodes") is not None:
        return sorted(str(n) for n in status["nodes"])
    return sorted((part.get("spec") or {}).get("nodes") or {})


def lost_of(api: KubeApi, lab: str, dead: set[str]) -> dict[str, dict[str, Any]]:
    """The hosts of ``lab`` placed on Nodes ``dead``: host -> its Node and nodes."""
    out = {}
    for p in api.items(parts_path(), f"{LAB_LABEL}={lab}"):
        spec = p.get("spec") or {}
        if spec.get("node") in dead:
            out[str(spec.get("host"))] = {"node": spec["node"], "nodes": part_nodes(p)}
    return out


def write_lost(lab: str, hosts: dict[str, dict[str, Any]]) -> bool:
    """Write lab ``lab``'s :data:`LOST_HOSTS` here unless it says so already; whether it
    changed (nothing is written for a lab with no state here)."""
    state = LabState(lab)
    if not state.exists:
        return False
    f = state.dir / LOST_HOSTS
    want = {"hosts": hosts}
    try:
        if json.loads(f.read_text()) == want:
            return False
    except (OSError, ValueError):
        if not hosts:
            return False
    tmp = f.with_name(f.name + ".tmp")
    tmp.write_text(json.dumps(want))
    os.replace(tmp, f)
    return True


def look(api: KubeApi, dead: set[str], node: str) -> list[str]:
    """Every lab built here told its lost hosts (``dead``: the Nodes whose Lease expired,
    this agent's own ``node`` never among them); the labs whose file changed."""
    changed = []
    for lab in labs_here():
        hosts = lost_of(api, lab, dead - {node}) if dead - {node} else {}
        if write_lost(lab, hosts):
            changed.append(lab)
    return changed
