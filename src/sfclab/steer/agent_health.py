"""The agent's verbs for the health watcher on a host driven over SSH (:mod:`.sshhealth` says
what such a watcher sees and does):

- ``chain-watch`` ``{"lab"}``: start the host's watcher (:func:`sfclab.steer.health.ensure_watcher`,
  journaled in the host's journal) in the namespace of the first ingress node of a chain
  direction placed here, unless it runs or no such ingress is here; answers ``{"host",
  "watcher", "started", "instances"}`` (``watcher``: its PID or None; ``instances``: those it
  probes);
- ``chain-health`` ``{"lab"}``: the host's watcher, the health of the instances it probes and
  the events of the host's record (:func:`sfclab.steer.health.status` read there).
"""

from __future__ import annotations

from typing import Any

from ..errors import LabError
from ..plan.model import Plan
from ..plan.sfc import SteeringPlan
from ..plan.sfc_hosts import remote_host
from ..realize.state import LabState
from . import health


def watch(req: dict[str, Any]) -> dict[str, Any]:
    state = LabState(str(req["lab"]))
    d = state.plan()
    if d is None:
        return {"watcher": None, "started": False, "instances": []}
    part = Plan.from_dict(d)
    host = remote_host(part)
    if host is None:
        raise LabError(f"lab '{state.name}''s part here is not a host's part")
    sp = SteeringPlan.from_dict(part.steering) if part.steering else SteeringPlan()
    dirs, watched = health.scope(part, sp)
    if not dirs:
        return {"host": host.name, "watcher": None, "started": False, "instances": []}
    with state.locked():
        running = health.watcher_pid(state)
        pid = running or health.ensure_watcher(state, part, sorted(d.ingress for d in dirs)[0])
    return {"host": host.name, "watcher": pid, "started": not running, "instances": watched}


def status(req: dict[str, Any]) -> dict[str, Any]:
    state = LabState(str(req["lab"]))
    if state.plan() is None:
        return {"watcher": None, "instances": {}, "events": []}
    return health.status(state.name)


VERBS = {"chain-watch": watch, "chain-health": status}
