"""``chain watch`` and the health ``chain inspect`` shows: the library entry points of the
lab's watcher (the watcher itself, its probes and failover: :mod:`sfclab.live.health.watch`).
Both ask the lab's runtime (:func:`sfclab.live.runtime.table.live_for`): on this machine one
watcher, over SSH one on each host with a chain's ingress or instance."""

from __future__ import annotations

from typing import Any

from ...errors import LabError
from ...realize import lifecycle
from ...realize.state import LabState
from .. import record
from ..runtime.table import live_for


def start(lab: str) -> dict[str, Any]:
    """Start the lab's watcher (``sfclab chain watch``) unless it runs: on this machine in the
    namespace of the first forwarding node on a chain's path; over SSH one on each host with
    a chain's ingress or instance (the runtime's ``watch``, :mod:`sfclab.live.runtime.base`)."""
    state = LabState(lab)
    with record.lab_lock(state, what="chain watch"):
        _, plan = lifecycle.load_plan(lab)
        if not plan.steering:
            raise LabError(f"lab '{lab}' has no chains to watch")
        got = live_for(state).watch(plan)
    return {"lab": lab, "watcher": got["watcher"], "started": got["started"],
            "instances": got["instances"]}


def status(lab: str, chain: str | None = None, only: set[str] | None = None
           ) -> dict[str, Any]:
    """What ``chain inspect`` shows: the watcher, each instance's health (``only`` those),
    the events (of ``chain`` and the lab's own).  On hosts driven over SSH, every host's
    watcher and record merged (the runtime's ``health``, :mod:`sfclab.live.runtime.base`)."""
    return live_for(LabState(lab)).health(chain, only)
