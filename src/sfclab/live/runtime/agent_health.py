"""The agent's verbs for the health watcher on a host driven over SSH
(:mod:`sfclab.live.runtime.ssh` says what such a watcher sees and does):

- ``chain-watch`` ``{"lab", "peers", "port", "secret"}``: keep the lab's peers (host ->
  underlay address), port and secret as ``peers.json`` (:mod:`sfclab.live.health.peerwatch`), then
  start the host's watcher (:func:`ensure`, journaled in the host's journal) unless it runs or the
  host holds no direction's ingress and no instance (one that runs without a socket to its peers,
  started before the host had ``peers.json``, is ended and started again); answers ``{"host",
  "watcher", "started", "instances"}`` (``watcher``: its PID or None; ``instances``: those it
  probes);
- ``chain-health`` ``{"lab"}``: the host's watcher, the health of the instances it probes and
  the events of the host's record (:func:`sfclab.live.ops.health.status` read there).
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import LabError
from ...plan.model import Plan
from ...plan.sfc import SteeringPlan
from ...plan.sfc_hosts import remote_host
from ...realize.state import LabState
from ..health import peerwatch, watcher
from ..health.watch import scope


def watch(req: dict[str, Any]) -> dict[str, Any]:
    state = LabState(str(req["lab"]))
    d = state.plan()
    if d is None:
        return {"watcher": None, "started": False, "instances": []}
    part = Plan.from_dict(d)
    host = remote_host(part)
    if host is None:
        raise LabError(f"lab '{state.name}''s part here is not a host's part")
    with state.locked():
        if req.get("secret"):  # the lab's peers, port and secret (kept for later restarts)
            peerwatch.write_private(state.dir / peerwatch.CONFIG, {
                "host": host.name, "peers": dict(req.get("peers", {})),
                "port": int(req["port"]), "secret": str(req["secret"])})
        running = watcher.watcher_pid(state)
        if running and req.get("secret") and not watcher.watcher_talks(state):
            watcher.stop_watcher(state)  # started before this host knew its peers: again
            running = None
        pid, watched = ensure(state, part)
    return {"host": host.name, "watcher": pid, "started": bool(pid) and not running,
            "instances": watched}


def ensure(state: LabState, part: Plan) -> tuple[int | None, list[str]]:
    """Start the host's watcher unless it runs, if the host holds a direction's ingress or an
    instance, with the socket its peers talk to it through (when the lab's ``peers.json`` is
    here); end it if the host holds neither.  In the namespace of the first ingress, else of
    the first node that is no chain's instance, else of the first instance (a removed
    instance's namespace ends it: :func:`sfclab.live.chains.wire.remove_nodes`; the next call starts
    it again).  Its PID (None: none needed) and the instances it probes."""
    sp = part.steering or SteeringPlan()
    dirs, watched = scope(part, sp)
    if not dirs and not watched:
        watcher.stop_watcher(state)
        return None, []
    running = watcher.watcher_pid(state)
    if running:
        return running, watched
    host = part.hosts[0]
    plain = [n for n in host.nodes if n not in set(watcher.instances(sp))]
    node = (sorted(d.ingress for d in dirs) or sorted(plain) or watched)[0]
    sock = None
    try:
        cfg = json.loads((state.dir / peerwatch.CONFIG).read_text())
        sock = peerwatch.open_socket(host.address, int(cfg["port"]))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError) as e:
        raise LabError(f"lab '{state.name}': no socket for the health watcher on host "
                       f"'{host.name}' ({host.address}): {e}") from e
    try:
        return watcher.ensure_watcher(state, part, node, sock), watched
    finally:
        if sock is not None:
            sock.close()


def status(req: dict[str, Any]) -> dict[str, Any]:
    state = LabState(str(req["lab"]))
    if state.plan() is None:
        return {"watcher": None, "instances": {}, "events": []}
    from .table import live_for  # light start-up: chain-watch (and chain-make, which imports
    # this module) load no runtime's operations

    return live_for(LabState(state.name)).health(None, None)


VERBS = {"chain-watch": watch, "chain-health": status}
