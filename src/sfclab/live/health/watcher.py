"""The lab's health watcher as a process: found, started, ended (the watcher itself, what it
probes and rewrites: :mod:`sfclab.live.health.watch`).

One watcher per lab on this machine (per host's part, over SSH: each host's agent starts its
own, :mod:`sfclab.live.runtime.agent_health`), run as ``python -m sfclab.live.health.watch LAB`` in
a namespace of the lab and journaled (``watcher``, its PID and namespace) before it runs;
``watcher.json`` in the lab's state says which process it is, checked against the namespace it runs
in so a reused PID is never taken for it.  ``health.json`` (and over SSH ``remote-health.json``) are
what it last found: :func:`dead` reads them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from ...kernel import netns
from ...plan.model import Plan
from ...plan.sfc import SteeringPlan
from ...realize import ownership
from ...realize.state import LabState, pid_alive


def instances(sp: SteeringPlan) -> list[str]:
    return sorted({i for d in sp.directions for p in d.paths for i in p.instances})



def watcher_pid(state: LabState) -> int | None:
    try:
        d = json.loads((state.dir / "watcher.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    pid = d.get("pid")
    ino = netns.inode(d.get("netns", ""))
    try:
        same = ino is not None and os.stat(f"/proc/{pid}/ns/net").st_ino == ino[1]
    except OSError:
        same = False
    return pid if pid_alive(pid) and same else None


def _watcher_netns_owned(state: LabState) -> bool:
    try:
        ns = json.loads((state.dir / "watcher.json").read_text()).get("netns")
    except (FileNotFoundError, ValueError, AttributeError):
        return False
    return isinstance(ns, str) and ownership.namespace_problem(state.name, ns)[0] is not None


def ensure_watcher(state: LabState, plan: Plan, node: str,
                   peer_sock: socket.socket | None = None) -> int:
    """Start the lab's watcher in ``node``'s namespace unless it runs; journaled first.
    ``peer_sock``: over SSH, the socket it talks to other hosts' watchers through (it inherits
    it; the caller closes its own copy)."""
    pid = watcher_pid(state)
    if pid:
        return pid
    ns = plan.netns_of(node)
    argv = [sys.executable, "-m", "sfclab.live.health.watch", state.name]
    fds: tuple[int, ...] = ()
    if peer_sock is not None:
        argv += ["--peer-fd", str(peer_sock.fileno())]
        fds = (peer_sock.fileno(),)
    log = open(state.dir / "watcher.log", "ab")
    try:
        p = netns.popen(ns, argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                        start_new_session=True, pass_fds=fds)
    finally:
        log.close()
    state.record([{"op": "watcher", "pid": p.pid, "netns": ns}])
    tmp = state.dir / "watcher.json.tmp"
    tmp.write_text(json.dumps({"pid": p.pid, "netns": ns, "peers": peer_sock is not None}))
    os.replace(tmp, state.dir / "watcher.json")
    return p.pid


def watcher_talks(state: LabState) -> bool:
    """The running watcher was started with a socket to its peers (over SSH: a watcher
    started before its host knew the lab's peers, e.g. by a migration onto a host that held
    nothing, has none, and must be started again once it does)."""
    try:
        return bool(json.loads((state.dir / "watcher.json").read_text()).get("peers"))
    except (FileNotFoundError, ValueError):
        return False


def stop_watcher(state: LabState, wait_s: float = 2.0) -> int | None:
    """End the lab's watcher (SIGTERM; SIGKILL if it is still there after ``wait_s``), if it
    runs in a namespace of the lab that carries its mark; its PID.  It is held by a pidfd
    first, then checked again, so a PID reused meanwhile is never signalled."""
    pid = watcher_pid(state)
    if pid:
        netns.end_processes([pid], wait_s, owned=lambda p: watcher_pid(state) == p
                            and _watcher_netns_owned(state))
    (state.dir / "watcher.json").unlink(missing_ok=True)
    return pid


def dead(state: LabState) -> set[str]:
    """Instances the watcher last found dead or (over SSH) took as dead on other hosts'
    reports (none without a watcher)."""
    out: set[str] = set()
    for f in ("health.json", "remote-health.json"):
        try:
            health = json.loads((state.dir / f).read_text())
        except (FileNotFoundError, ValueError):
            continue
        out |= {i for i, h in health.items() if h.get("alive") is False}
    return out


