"""A lab on real hosts, driven over SSH: ``up`` and ``down`` of this machine's side.

This machine makes nothing of such a lab: each host's part (:mod:`sfclab.plan.split`) is built
by the host's agent (:mod:`sfclab.realize.agent`), there, with its own journal.  This machine's
journal holds one ``remote-host`` entry per host, written *before* that host is sent its part,
with everything needed to reach it again (:class:`~sfclab.hosts.ssh.SshTarget`), so ``down``
needs neither the lab file nor the process that ran ``up``.

- ``up``: every host is checked first (reachable, its agent runs, it has what it needs); then
  every host is journaled and sent its part, all hosts at once (one thread and connection
  each).  Any failure removes the parts already sent.
- ``down``: each journaled host is asked to remove its part, even when another is unreachable.
  Hosts that could not be reached stay in the journal (status ``removing``) and are named in
  the report with their address and why (:func:`outcome`); a later ``down`` retries exactly
  those.  Each host is sent the token of the ``up`` it was journaled by, so a part still on
  its way when ``up`` was killed is refused there when it arrives.
- ``exec``: a command in a node's namespace on its host (:func:`exec_on`).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from ..errors import RealizeError
from ..hosts.ssh import HostUnreachable, SshTarget, call, run_attached, run_captured
from ..plan.model import Plan
from ..plan.split import check_partition, split
from .runtime.journal_ops import SSH_HOST
from .teardown import TeardownReport

if TYPE_CHECKING:
    from ..spec.lab import Lab
    from .state import LabState

OP = SSH_HOST


def targets(lab: Lab, plan: Plan) -> dict[str, SshTarget]:
    out = {}
    for h in plan.hosts:
        ssh = lab.hosts[h.name].ssh
        assert ssh is not None
        out[h.name] = SshTarget(h.name, h.address.split("/")[0], ssh.user, ssh.key, ssh.port,
                                ssh.python, ssh.state, ssh.netns, ssh.known_hosts)
    return out


def up(lab: Lab, plan: Plan, state: LabState, say: Callable[[str], None]) -> dict[str, Any]:
    """Check every host, then send each its part (hosts in parallel, each journaled before it
    is sent anything); on failure remove what was sent and raise.  Returns each host's check
    answer."""
    parts = split(plan)
    check_partition(plan, parts)
    ts = targets(lab, plan)
    say(f"checking hosts {', '.join(f'{n} ({t.address})' for n, t in ts.items())}")
    checks = dict(zip(ts, _each(ts, lambda t: call(
        t, "check", {"address": t.address, "plan": parts[t.host].to_dict()}))))
    token = uuid.uuid4().hex  # this up, for each host's down to refuse it if it comes late
    state.record([{"op": OP, "host": name, "target": t.to_dict(), "token": token}
                  for name, t in ts.items()])
    try:
        for name in ts:
            say(f"host {name}: {len(parts[name].namespaces)} namespaces, "
                f"{len(parts[name].host_links)} hosted links")
        _each(ts, lambda t: call(t, "up", {"plan": parts[t.host].to_dict(), "token": token},
                                 timeout=300))
    except BaseException as e:
        say("rolling back")
        rep = down(state, late_up=False)  # every host has answered its up: none is on its way
        if rep.errors:
            raise RealizeError(f"{e} (rollback: {'; '.join(rep.errors)})") from e
        raise
    return checks


def _each(ts: dict[str, SshTarget], fn: Callable[[SshTarget], Any]) -> list[Any]:
    """``fn`` on every host at once (one thread each: a connection leaves from the namespace
    its thread entered); the results in host order, or the first host's failure once all
    have answered."""
    with ThreadPoolExecutor(max_workers=max(1, len(ts))) as ex:
        futures = [ex.submit(fn, t) for t in ts.values()]
        wait(futures)
    return [f.result() for f in futures]


def journaled(state: LabState) -> list[dict[str, Any]]:
    return [e for e in state.journal() if e.get("op") == OP]


def down(state: LabState, *, late_up: bool = True) -> TeardownReport:
    """Ask every journaled host (at once) to remove its part; keep the unreachable ones
    journaled.  ``errors`` names every host whose part is left (for a later ``down``);
    ``hosts`` has each host's outcome (why a part is left: :func:`outcome`).  ``late_up``:
    a host's part may still be on its way (``up`` was killed as it sent it): each host is
    sent the ``up``'s token, to refuse that part when it arrives."""
    rep = TeardownReport()
    entries = journaled(state)
    ts = {e["host"]: SshTarget.from_dict(e["target"]) for e in entries}
    tokens = {e["host"]: e.get("token") if late_up else None for e in entries}

    def one(t: SshTarget) -> dict[str, Any] | RealizeError:
        try:
            return call(t, "down", {"lab": state.name, "token": tokens[t.host]}, timeout=300)
        except RealizeError as err:  # unreachable, or its agent failed: retried later
            return err

    left = []
    for e, got in zip(entries, _each(ts, one)):
        t = ts[e["host"]]
        if isinstance(got, RealizeError):
            rep.errors.append(f"{got}; its part is left: run 'sfclab down {state.name}' again")
            rep.hosts.append(outcome(t, got))
            left.append(e)
            continue
        rep.namespaces += int(got.get("namespaces", 0))
        rep.processes += int(got.get("processes", 0))
        rep.links += int(got.get("links", 0))
        rep.errors += [f"host {e['host']}: {x}" for x in got.get("errors", [])]
        rep.hosts.append(outcome(t, None, got))
    _rewrite_journal(state, left)  # what is left for a later down (nothing: all removed)
    return rep


def outcome(t: SshTarget, err: RealizeError | None,
            got: dict[str, Any] | None = None) -> dict[str, Any]:
    """One host's outcome of ``down``: removed (with counts), or left with a one-word
    ``reason`` (``refused``, ``timeout``, ``auth``, ``host-key``, ``network``, ``ssh``: not
    reached; ``agent``: reached, its agent failed) and the error."""
    d: dict[str, Any] = {"host": t.host, "address": t.address, "removed": err is None}
    if err is None:
        g = got or {}
        d.update(absent=bool(g.get("absent")), namespaces=int(g.get("namespaces", 0)),
                 processes=int(g.get("processes", 0)), links=int(g.get("links", 0)))
    else:
        d.update(reason=err.reason if isinstance(err, HostUnreachable) else "agent",
                 error=str(err))
    return d


def _rewrite_journal(state: LabState, entries: list[dict[str, Any]]) -> None:
    tmp = state.dir / "journal.tmp"
    with open(tmp, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, state.dir / "journal")


def inspect(state: LabState, out: dict[str, Any]) -> None:
    """Fill ``out`` (a local ``inspect`` of the lab's plan) with what each host's agent reads
    live there: its nodes, its host entry and its hosted-link ends; an unreachable host says
    so (``reachable: false`` and the reason)."""
    ends: dict[tuple[int, str, str], dict[str, Any]] = {}
    for e in journaled(state):
        t = SshTarget.from_dict(e["target"])
        entry = out.setdefault("hosts", {}).setdefault(t.host, {})
        try:
            got = call(t, "inspect", {"lab": state.name})
        except RealizeError as err:
            entry.update({"reachable": False, "error": str(err), "present": False})
            continue
        entry["reachable"] = True
        if got.get("absent"):
            entry["present"] = False
            continue
        entry.update(got["hosts"].get(t.host, {}))
        for node, n in got["nodes"].items():
            out.setdefault("nodes", {})[node] = {**n, "host": t.host}
        for hl in got["host_links"]:
            for end in hl["ends"]:
                ends[(hl["link"], end["host"], end["node"])] = end
    for hl in out.get("host_links", []):
        hl["ends"] = [ends.get((hl["link"], x["host"], x["node"]), {**x, "present": False})
                      for x in hl["ends"]]


def exec_on(state: LabState, host: str, ns: str | None, argv: list[str]) -> int:
    """Run ``argv`` on host ``host`` over SSH, in namespace ``ns`` there (``ip netns exec``;
    ``None``: the host's context, its root namespace), output passed through; its exit
    status."""
    return run_attached(_target(state, host), _in(ns, argv))


def run_on(state: LabState, host: str, ns: str | None, argv: list[str], *,
           input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """:func:`exec_on`, its output captured (what the Python API's ``Lab.exec`` returns)."""
    status, out, err = run_captured(_target(state, host), _in(ns, argv), input=input,
                                    timeout=timeout)
    return subprocess.CompletedProcess(argv, status, out, err)


def _in(ns: str | None, argv: list[str]) -> list[str]:
    return (["ip", "netns", "exec", ns] if ns else []) + argv


def _target(state: LabState, host: str) -> SshTarget:
    t = next((SshTarget.from_dict(e["target"]) for e in journaled(state) if e["host"] == host),
             None)
    if t is None:
        raise RealizeError(f"host {host} of lab '{state.name}' is not journaled here (its part "
                           "is removed): nothing of the lab runs there")
    return t


def pending(state: LabState) -> list[str]:
    """The hosts whose parts a ``down`` has yet to remove."""
    return [e["host"] for e in journaled(state)]
