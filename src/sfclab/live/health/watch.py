"""Health of function instances and failover: the lab's watcher process.

**Probes** (every :data:`PERIOD_S`, and at once when a watched program ends: the watcher
waits on pidfds of the programs): an instance is *alive* while its namespace exists and, for
kinds that run a program (``tun``, ``dpi``), while that program runs; *crossing* compares what
entered the function (the proxy's ``proxy_in``) with what left it (``proxy_out``) over the last
second: packets in and none out is *stalled* (shown, not acted on: a firewall may drop
everything on purpose).

**Failover.**  When an instance dies, every chain direction with a path through it gets its
slot table rewritten over the paths that avoid dead instances, by their weights, in one map
update: its flows move to the other instances of the group (flows of other paths may move too,
as the slots are shared out again).  When no path is left, every slot points at the empty path
(:data:`sfclab.plan.chainpaths.NO_PATH`): the classifier drops and counts what the chain matches
(counter ``no_instance``) and nothing leaks past the missing function.  An instance that comes
back (its program started again) is put back the same way.  Each change is an event in the
lab's ``events.jsonl`` (``chain inspect`` shows them), with the time from the last probe that
saw the instance alive to the rewrite.

**The watcher** is ``python -m sfclab.live.health.watch LAB``, started by ``chain add`` inside the
namespace of the chain's attach node (so it belongs to the lab: journaled, and ended by PID at
``down`` like every process in the lab's namespaces).  Slot-table rewrites of the watcher and
of ``chain migrate``/``rm`` are serialized by the lab's slot lock, and the watcher reads the
saved plan again whenever it changes.

**On hosts driven over SSH** the same watcher runs on each host holding a chain's ingress or
instance, started there by the host's agent, reading that host's share of the maps and part of
the plan (:func:`scope`: the directions whose ingress is there, the instances placed there).
It probes its own instances and tells the other hosts' watchers what it sees, and takes the
instances of other hosts out of its directions when their watchers report them dead or fall
silent (a :class:`~.peerwatch.PeerLink`; the model: :mod:`.peerwatch`,
:mod:`sfclab.live.runtime.ssh`).

**On Kubernetes** the same watcher runs on each Node's share, with no peers: another host is
lost when its Node's agent's Lease expires, which the agent of this Node writes in the lab's
state here (:data:`~sfclab.realize.runtime.kubernetes_failover.LOST_HOSTS`: each lost host and
the nodes its part holds); the watcher reads that file again whenever it changes and takes
those hosts' instances out of its directions (:func:`_leased`), and puts them back when their
host leaves the file (:mod:`sfclab.realize.runtime.kubernetes_failover`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...kernel import netns
from ...plan.model import Plan
from ...plan.sfc import DirectionPlan, SteeringPlan
from ...plan.sfc_hosts import remote_host
from ...realize.dataplane import DataPlane, share_dir
from ...realize.state import LabState
from .. import record
from ..chains import tables
from .watcher import instances
from .peerwatch import CONFIG, PeerLink

PERIOD_S = 0.05
CROSSING_WINDOW_S = 1.0


@dataclass
class Watch:
    """What the watcher knows of a lab between two probes."""

    lab: str
    plan: Plan | None = None
    sp: SteeringPlan | None = None
    mtime: float = 0.0
    alive: dict[str, bool] = field(default_factory=dict)
    last_seen: dict[str, float] = field(default_factory=dict)
    crossing: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    stalled: dict[str, bool] = field(default_factory=dict)
    programs: dict[str, Any] = field(default_factory=dict)
    reapply: bool = False
    pidfds: dict[int, int] = field(default_factory=dict)
    #: what this watcher acts on and probes (:func:`scope`)
    directions: list[DirectionPlan] = field(default_factory=list)
    watched: list[str] = field(default_factory=list)
    #: over SSH: the other hosts' watchers, what they said of instances of its directions
    #: (instance -> alive) and which hosts fell silent
    link: PeerLink | None = None
    remote: dict[str, bool] = field(default_factory=dict)
    lost: set[str] = field(default_factory=set)
    #: on Kubernetes: the lost hosts' file as last read (its mtime) and what it said
    lost_mtime: float = 0.0
    lost_nodes: dict[str, str] = field(default_factory=dict)  # node -> its lost host


def scope(plan: Plan, sp: SteeringPlan) -> tuple[list[DirectionPlan], list[str]]:
    """The directions whose slot tables a watcher rewrites and the instances it probes.  On
    this machine's lab: all of them.  On a host driven over SSH (its part, :func:`remote_host`):
    the directions whose ingress is on the host (their slot tables are in its maps) and every
    instance placed on the host, of any direction (their namespaces and programs are its own;
    what it sees of those goes to the other hosts' watchers: :mod:`.peerwatch`)."""
    host = remote_host(plan)
    if host is None:
        return list(sp.directions), instances(sp)
    here = set(host.nodes)
    dirs = [d for d in sp.directions if d.ingress in here]
    return dirs, [i for i in instances(sp) if i in here]


def _reload(w: Watch, state: LabState) -> None:
    try:
        m = (state.dir / "plan.json").stat().st_mtime
    except FileNotFoundError:
        return
    if m == w.mtime and w.plan is not None:
        return
    d = state.plan()
    if d is None:
        return
    w.plan = Plan.from_dict(d)
    w.sp = w.plan.steering
    w.mtime = m
    w.reapply = True  # a writer may have put dead instances' paths back: take them out again
    w.programs = {}
    w.directions, w.watched = scope(w.plan, w.sp) if w.sp else ([], [])
    if w.sp:
        from ...realize.functions import instantiate  # light start-up: the agent's verbs
        # import this module for scope() and load no function models

        for i in w.watched:
            f = instantiate(state, w.plan, i) if i in w.plan.functions else None
            w.programs[i] = f if f is not None and hasattr(f, "running_pids") else None
        known = set(w.watched)
        w.alive = {k: v for k, v in w.alive.items() if k in known}


def probe(w: Watch, node: str) -> bool:
    """Is ``node`` alive: its namespace there and, for a program, the program running (each
    running program's PID is also held as a pidfd, so its end wakes the watcher at once)."""
    assert w.plan is not None
    try:
        ns = w.plan.netns_of(node)
    except KeyError:
        return False
    if not netns.exists(ns):
        return False
    f = w.programs.get(node)
    if f is None:
        return True
    pids = f.running_pids()
    for pid in pids:
        if pid not in w.pidfds:
            try:
                w.pidfds[pid] = os.pidfd_open(pid)
            except OSError:  # ended meanwhile: the next probe sees it
                pass
    return bool(pids)


def wait_for_change(w: Watch, period: float) -> None:
    """Sleep ``period``, or less if a watched program ends (its pidfd becomes readable) or
    another host's watcher reports (its datagram is waiting)."""
    fds = list(w.pidfds.values()) + ([w.link.fileno()] if w.link is not None else [])
    if not fds:
        time.sleep(period)
        return
    ready, _, _ = select.select(fds, [], [], period)
    for pid, fd in list(w.pidfds.items()):
        if fd in ready:
            os.close(fd)
            del w.pidfds[pid]


def apply_health(w: Watch, state: LabState, dp: DataPlane, changed: list[str],
                 detected: float) -> None:
    """Change the slot tables of directions through ``changed`` instances (dead: those its
    probes found dead and those other hosts' watchers reported dead or fell silent)."""
    assert w.sp is not None
    dead = {i for i, ok in w.alive.items() if not ok} | \
        {i for i, ok in w.remote.items() if not ok}
    for d in w.directions:
        if not any(i in p.instances for p in d.paths for i in changed):
            continue
        weights = [0 if dead & set(p.instances) else p.weight for p in d.paths]
        moved = tables.change_slots(dp, d, tables.slot_paths(w.sp, d, weights))
        record.event(state, "failover", chain=d.chain, direction=d.index, slots_moved=moved,
                     instances_out=sorted(dead & {i for p in d.paths for i in p.instances}),
                     paths_left=sum(1 for x in weights if x),
                     dropping=not any(weights),
                     ms=round(1000 * (time.monotonic() - detected), 3))


def tick(w: Watch, state: LabState, dp: DataPlane | None) -> None:
    """One probe of the watched instances, the reports of other hosts' watchers (over SSH),
    the slot tables rewritten if something changed.  ``dp`` None (over SSH only: a host whose
    share has no maps yet): no rewrite, done once the maps are there."""
    with record.slot_lock(state, wait=False) as held:
        if not held:  # a change of the slot tables is on: keep the peers informed only
            _beat(w)
            return
        _reload(w, state)
        if w.sp is None:
            return
        now = time.monotonic()
        changed: list[str] = []
        for i in w.watched:
            ok = probe(w, i)
            was = w.alive.get(i)
            if ok:
                w.last_seen[i] = now
            if was is None:
                w.alive[i] = ok
                if not ok:
                    changed.append(i)
                continue
            if ok != was:
                w.alive[i] = ok
                changed.append(i)
                record.event(state, "instance-up" if ok else "instance-down", instance=i,
                             since_alive_ms=round(1000 * (now - w.last_seen.get(i, now)), 3))
        if w.link is not None:
            changed += _peers(w, state, bool(changed))
        else:
            changed += _leased(w, state)
        if w.reapply:
            changed = sorted(set(changed) | {i for i, ok in w.alive.items() if not ok} |
                             {i for i, ok in w.remote.items() if not ok})
            w.reapply = dp is None
        if changed and dp is None:
            w.reapply = True
        elif changed:
            assert dp is not None
            apply_health(w, state, dp, changed, now)
        _crossing(w, state, dp, now)


def _beat(w: Watch) -> None:
    """While the slot tables are being changed (``chain add``/``rm``/``migrate`` hold the slot
    lock, up to a second or two), this host's heartbeat still goes out when due, with what
    it last saw, so its peers never take a busy host for a silent one; what they say is taken
    in and acted on at the next probe."""
    if w.link is None or w.sp is None:
        return
    w.link.receive()
    if not w.link.due():
        return
    w.link.send("beat", [i for i in w.watched if w.alive.get(i)],
                [i for i in w.watched if w.alive.get(i) is False])


def _peers(w: Watch, state: LabState, own_changed: bool) -> list[str]:
    """Tell the other hosts what this one sees of its instances (at once on a change, else
    a heartbeat when due), take in what they said; the instances of this host's directions,
    placed elsewhere, whose state changed."""
    link = w.link
    assert link is not None and w.sp is not None
    link.reload()
    link.receive()
    alive = [i for i in w.watched if w.alive.get(i)]
    down = [i for i in w.watched if w.alive.get(i) is False]
    if own_changed or link.due():
        link.send("change" if own_changed else "beat", alive, down)
    lost = link.table.lost()
    status = link.table.status()
    for h in sorted(lost - w.lost):
        record.event(state, "peer-lost", peer=h,
                     instances=sorted(i for i in status if link.table.host_of(i) == h))
    for h in sorted(w.lost - lost):
        record.event(state, "peer-back", peer=h)
    w.lost = lost
    wanted = {i for d in w.directions for p in d.paths for i in p.instances} - set(w.watched)
    changed = []
    remote: dict[str, bool] = {}
    for i in sorted(wanted):
        ok = status.get(i)
        was = w.remote.get(i, True)
        if ok is not None:
            remote[i] = ok
        if (True if ok is None else ok) != was:
            changed.append(i)
    if remote != w.remote:
        tmp = state.dir / "remote-health.json.tmp"
        tmp.write_text(json.dumps({i: {"alive": ok, "host": link.table.host_of(i)}
                                   for i, ok in remote.items()}))
        os.replace(tmp, state.dir / "remote-health.json")
    w.remote = remote
    return changed


def _leased(w: Watch, state: LabState) -> list[str]:
    """On Kubernetes (see the module): the lost hosts' file read again when it changed; the
    instances of this host's directions, placed on other hosts, whose state changed."""
    from ...realize.runtime.kubernetes_failover import LOST_HOSTS  # light start-up: the
    # agent's verbs import this module for scope() and load no runtime

    f = state.dir / LOST_HOSTS
    try:
        m = f.stat().st_mtime
    except FileNotFoundError:
        m = 0.0
    if m != w.lost_mtime:
        w.lost_mtime = m
        try:
            hosts = dict(json.loads(f.read_text()).get("hosts") or {}) if m else {}
        except (OSError, ValueError, AttributeError):
            hosts = {h: {"nodes": [n for n, x in w.lost_nodes.items() if x == h]}
                     for h in w.lost}  # being written: as it was
        nodes = {str(n): str(h) for h, d in hosts.items() for n in (d or {}).get("nodes", [])}
        for h in sorted(set(hosts) - w.lost):
            record.event(state, "peer-lost", peer=h, via="lease",
                         node=(hosts[h] or {}).get("node"),
                         instances=sorted(n for n, x in nodes.items() if x == h))
        for h in sorted(w.lost - set(hosts)):
            record.event(state, "peer-back", peer=h, via="lease")
        w.lost, w.lost_nodes = set(hosts), nodes
    wanted = {i for d in w.directions for p in d.paths for i in p.instances} - set(w.watched)
    remote = {i: i not in w.lost_nodes for i in sorted(wanted)}
    changed = [i for i in remote if remote[i] != w.remote.get(i, True)]
    if remote != w.remote:
        tmp = state.dir / "remote-health.json.tmp"
        tmp.write_text(json.dumps({i: {"alive": ok, "host": w.lost_nodes.get(i)}
                                   for i, ok in remote.items()}))
        os.replace(tmp, state.dir / "remote-health.json")
    w.remote = remote
    return changed


def _crossing(w: Watch, state: LabState, dp: DataPlane | None, now: float) -> None:
    assert w.sp is not None
    for i in w.watched if dp is not None else []:
        nid = w.sp.node_ids.get(i)
        if nid is None:
            continue
        t0, in0, out0 = w.crossing.get(i, (0.0, -1, -1))
        if now - t0 < CROSSING_WINDOW_S:
            continue
        assert dp is not None
        c = dp.counters(nid)
        if in0 >= 0:
            stalled = c["proxy_in"] > in0 and c["proxy_out"] == out0 and w.alive.get(i, False)
            if stalled != w.stalled.get(i, False):
                record.event(state, "stalled" if stalled else "crossing", instance=i)
            w.stalled[i] = stalled
        w.crossing[i] = (now, c["proxy_in"], c["proxy_out"])
    health = {i: {"alive": w.alive.get(i), "stalled": w.stalled.get(i, False)}
              for i in w.watched}
    tmp = state.dir / "health.json.tmp"
    tmp.write_text(json.dumps(health))
    os.replace(tmp, state.dir / "health.json")


def watch(lab: str, period: float = PERIOD_S, peer_fd: int | None = None) -> int:
    """The watcher's loop; ends when the lab's state goes or on SIGTERM.  ``peer_fd``: over
    SSH, the UDP socket its agent made on the host's underlay address (:mod:`.peerwatch`)."""
    state = LabState(lab)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    w = Watch(lab)
    if peer_fd is not None:
        w.link = PeerLink(lab, socket.socket(fileno=peer_fd), state.dir / CONFIG)
    dp: DataPlane | None = None
    retry = 0.0
    while not stop["now"] and state.exists:
        try:
            if dp is None and w.link is None:
                dp = DataPlane(lab, _maps_dir(state))
            elif dp is None and time.monotonic() >= retry:  # a host may hold no maps yet
                try:
                    dp = DataPlane(lab, _maps_dir(state))
                except Exception:
                    retry = time.monotonic() + 0.5
            tick(w, state, dp)
        except Exception as e:  # keep watching; say what went wrong once
            print(f"sfclab health {lab}: {e}", file=sys.stderr, flush=True)
            if dp is not None:
                dp.close()
                dp = None
            time.sleep(0.5)
        wait_for_change(w, period)
    if dp is not None:
        dp.close()
    if w.link is not None:
        w.link.close()
    for fd in w.pidfds.values():
        os.close(fd)
    return 0


def _maps_dir(state: LabState) -> Path | None:
    """The maps the watcher reads and writes: the lab's (None), or on a host driven over SSH
    that host's share."""
    d = state.plan()
    host = remote_host(Plan.from_dict(d)) if d else None
    return share_dir(state.name, host.name) if host else None


if __name__ == "__main__":
    sys.exit(watch(sys.argv[1], peer_fd=int(sys.argv[3]) if sys.argv[2:3] == ["--peer-fd"]
                   else None))
