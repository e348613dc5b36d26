"""Health and failover on a lab of hosts driven over SSH: a watcher on every host, talking to
each other over the underlay; records merged.

Failing an instance over within a second cannot wait for SSH round trips, so the watcher of
:mod:`.health` runs *on* each host whose part holds an instance of a chain or the ingress of a
chain direction, started there by the host's agent (``chain-watch``, :mod:`.agent_health`) in
one of the lab's namespaces on that host: journaled in the host's journal, ended by its PID by
the host's ``down`` (as every process in the lab's namespaces) and by ``chain rm`` once the
host holds neither.  It reads that host's share of the maps and the host's part of the plan:

- it probes the instances placed on its host (their namespaces, their programs' PIDs through
  pidfds, their crossing counters in its maps) and reports them to the other hosts' watchers
  (at once on a change, and as a heartbeat every 100 ms: :mod:`.peerwatch`);
- it rewrites the slot tables of the directions whose ingress is on its host (they are in its
  maps), taking out its own dead instances, those another host reports dead, and all those of
  a host whose watcher is silent for 300 ms (:mod:`.peertable`); they are put back when
  reported alive again.

:func:`start` gives every host's agent the lab's peers (host -> underlay address), UDP port and
secret (:func:`sfclab.steer.peerwatch.settings`, kept on this machine).  Events
(``instance-down`` by the probing host, ``failover``, ``peer-lost``, ``peer-back`` by the
ingress host, ...) are written in the record of the host whose watcher saw them; ``chain
inspect`` (:func:`status`) merges every host's record with this machine's (``chain-added``,
``migrated``), each host's event tagged with ``host``.
"""

from __future__ import annotations

from typing import Any

from ..errors import RealizeError
from ..hosts.ssh import SshTarget, call
from ..realize import remote, remote_sfc
from ..realize.state import LabState
from . import peerwatch, record

TIMEOUT_S = 60
#: the agent whose verbs include :mod:`.agent_health`'s (:data:`.agent_chain.MODULE`; named
#: here, not imported: that agent imports :mod:`.health`, which imports this module)
AGENT = "sfclab.steer.agent_chain"


def is_remote(state: LabState) -> bool:
    return remote_sfc.is_remote(state)


def start(state: LabState) -> dict[str, Any]:
    """Every host's agent keeps the lab's peers, port and secret (:mod:`.peerwatch`) and starts
    its watcher unless it runs or the host holds no ingress and no instance:
    ``watchers`` (host -> PID, hosts with one), ``started`` (whether one was started),
    ``instances`` (the instances some host's watcher probes), ``errors`` (hosts that could
    not start one: named, not raised, as what the command made stands)."""
    ts = remote_sfc.targets(state)
    s = peerwatch.settings(state)
    req = {"lab": state.name, "peers": {h: t.address for h, t in ts.items()},
           "port": s.port, "secret": s.secret}

    def one(t: SshTarget) -> dict[str, Any]:
        try:
            return call(t, "chain-watch", req, module=AGENT, timeout=TIMEOUT_S)
        except RealizeError as e:
            return {"error": str(e)}

    got = remote._each(ts, one)
    watchers = {h: g["watcher"] for h, g in zip(ts, got) if g.get("watcher")}
    return {"watchers": watchers, "started": any(g.get("started") for g in got),
            "instances": sorted({i for g in got for i in g.get("instances", [])}),
            "errors": [g["error"] for g in got if "error" in g]}


def status(state: LabState, chain: str | None = None, only: set[str] | None = None
           ) -> dict[str, Any]:
    """What ``chain inspect`` shows of health on such a lab: each host's watcher
    (``watcher``: host -> PID), the instances some host's watcher probes (each with the
    ``host`` that probes it; ``only`` those), and the events of every host's record and this
    machine's, in time order (of ``chain`` and the lab's own; the last 50).  A host that does
    not answer is named in ``unreachable``."""
    ts = remote_sfc.targets(state)

    def one(t: SshTarget) -> dict[str, Any] | RealizeError:
        try:
            return call(t, "chain-health", {"lab": state.name}, module=AGENT,
                        timeout=TIMEOUT_S)
        except RealizeError as e:
            return e

    watchers: dict[str, int] = {}
    health: dict[str, Any] = {}
    events = list(record.events(state))
    unreachable: dict[str, str] = {}
    for host, got in zip(ts, remote._each(ts, one)):
        if isinstance(got, RealizeError):
            unreachable[host] = str(got)
            continue
        if got.get("watcher"):
            watchers[host] = got["watcher"]
        for i, h in got.get("instances", {}).items():
            health[i] = {**h, "host": host}
        events += [{**e, "host": host} for e in got.get("events", [])]
    if only is not None:
        health = {i: h for i, h in health.items() if i in only}
    if chain is not None:
        events = [e for e in events if e.get("chain") in (None, chain)]
    events.sort(key=lambda e: e.get("time", 0))
    out: dict[str, Any] = {"watcher": watchers, "instances": health, "events": events[-50:]}
    if unreachable:
        out["unreachable"] = unreachable
    return out
