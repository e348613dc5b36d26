"""The ``ssh`` runtime: a lab on real machines, each driven over SSH by its agent.

This machine makes nothing of such a lab.  Each host's part (:mod:`sfclab.plan.split`) is
built there by the host's agent (:mod:`sfclab.realize.agent`) with the ``local`` runtime of
that machine, journaled there; this machine's journal holds one ``remote-host`` entry per host
with what reaches it again (:class:`~sfclab.hosts.ssh.SshTarget`), written before the host is
sent anything (:mod:`sfclab.realize.remote` does ``up``, ``down``, ``inspect`` and ``exec``).

The chains' data plane is every host's share, read and changed through the agents:
:class:`Snapshot` merges every host's counters (a node's on its host, a path's on its
ingress's host) into what a local :class:`~sfclab.realize.dataplane.DataPlane` answers,
:meth:`SshRuntime.write_rows` sends each ingress host its classifier entries,
:meth:`SshRuntime.probe` runs one ``chain trace`` step at the ingress.  A machine joins a
running lab by one more ``remote-host`` entry (:meth:`SshRuntime.join`) and leaves by its
agent's ``down`` (:meth:`SshRuntime.leave`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from ...errors import LabError, RealizeError, ToolError
from ...hosts.ssh import SshTarget, call
from ...plan.model import HostPlan, Plan
from .. import remote
from ..state import LabState
from ..teardown import TeardownReport
from .base import HostRuntime, Progress

if TYPE_CHECKING:
    from ...plan.classifier_rows import Row
    from ...spec.lab import Lab


def journaled(state: LabState) -> bool:
    """The lab's parts are on hosts driven over SSH (its journal names one)."""
    return bool(remote.journaled(state))


class SshRuntime(HostRuntime):
    """Real machines, each reached over SSH and building its own part."""

    kind = "ssh"
    here = False

    def targets(self) -> dict[str, SshTarget]:
        """Each journaled host, by name."""
        return {e["host"]: SshTarget.from_dict(e["target"])
                for e in remote.journaled(self.state)}

    def each(self, ts: dict[str, SshTarget], fn: Callable[[SshTarget], Any]) -> list[Any]:
        """``fn`` on every host of ``ts`` at once (:func:`sfclab.realize.remote._each`)."""
        return remote._each(ts, fn)

    # --- a lab's life ----------------------------------------------------------------------
    def check_node(self, plan: Plan, node: str) -> None:
        return None  # checked there, by the host's agent, at up (sfclab.realize.needs)

    def up(self, lab: Lab, plan: Plan, say: Progress) -> None:
        import yaml  # light start-up: down/ls/inspect never write YAML

        state = self.state
        state.begin(plan.to_dict(), yaml.safe_dump(lab.to_dict(), sort_keys=False),
                    lab.source)
        t0 = time.monotonic()
        try:
            remote.up(lab, plan, state, say)
        except BaseException:
            if not remote.pending(state):
                state.remove()
            else:
                state.set_meta(status="failed")
            raise
        state.set_meta(status="up", pid=None, up_seconds=round(time.monotonic() - t0, 4))

    def down(self) -> TeardownReport:
        return remote.down(self.state)

    def left(self) -> list[str]:
        return remote.pending(self.state)

    def inspect(self, plan: Plan, found: dict[str, Any]) -> None:
        return None  # nothing of the lab is on this machine: inspect_far reads it

    def inspect_far(self, out: dict[str, Any]) -> None:
        remote.inspect(self.state, out)

    # --- programs in a node's namespace ----------------------------------------------------
    def context(self, host: HostPlan) -> str | None:
        return None  # a real host's context is its root namespace

    def reached_as(self, host: HostPlan | None) -> str | None:
        assert host is not None
        return host.name

    def run(self, host: str | None, ns: str | None, argv: list[str], *, check: bool,
            input: str | None, timeout: float | None) -> subprocess.CompletedProcess:
        assert host is not None
        cp = remote.run_on(self.state, host, ns, argv, input=input,
                           timeout=timeout if timeout is not None else 3600)
        if check and cp.returncode != 0:
            raise ToolError(argv, cp.returncode, cp.stderr)
        return cp

    def exec(self, host: str | None, ns: str | None, argv: list[str]) -> int:
        assert host is not None
        return remote.exec_on(self.state, host, ns, argv)

    # --- the chains' data plane ------------------------------------------------------------
    def data_plane(self, node_ids: dict[str, int]) -> Snapshot:
        return Snapshot(self, node_ids)

    def write_rows(self, plan: Plan, by_dir: dict[int, list[Row]], order: int) -> int:
        """Each ingress node's entries written by its host's agent; the number written."""
        ts = self.targets()
        per_host: dict[str, dict[str, list[Row]]] = {}
        for di, rows in by_dir.items():
            for r in rows:
                per_host.setdefault(_host_of(plan, r[0]), {}).setdefault(str(di), []).append(r)
        written = 0
        for host, rows_of in per_host.items():
            got = call(ts[host], "sfc-classify", {"lab": self.state.name, "rows": rows_of,
                                                 "order": order})
            written += int(got["entries"])
        return written

    def probe(self, plan: Plan, request: dict[str, Any]) -> None:
        """One trace step (``sfc-probe``) at the host of ingress node ``request['node']``."""
        ts = self.targets()
        call(ts[_host_of(plan, str(request["node"]))], "sfc-probe",
             {"lab": self.state.name, **request})

    # --- hosts joining and leaving ---------------------------------------------------------
    def join(self, t: SshTarget) -> None:
        """Host ``t`` joins: journaled (the entry ``up`` writes), so ``down`` reaches it."""
        self.state.record([{"op": remote.OP, "host": t.host, "target": t.to_dict()}])

    def leave(self, host: HostPlan) -> list[str]:
        """The host's agent removes its part; its journal entry goes when it did.  A host
        that could not be reached, or whose agent failed, keeps its entry (for ``down``) and
        is refused (:class:`LabError`)."""
        state = self.state
        entries = state.journal()
        mine = [e for e in entries if e.get("op") == remote.OP and e.get("host") == host.name]
        errors: list[str] = []
        for e in mine:
            try:
                got = call(SshTarget.from_dict(e["target"]), "down", {"lab": state.name},
                           timeout=300)
            except RealizeError as err:
                errors = [f"{err}; its part is left: run 'sfclab down {state.name}'"]
                break
            errors += [f"host {host.name}: {x}" for x in got.get("errors", [])]
        else:
            remote._rewrite_journal(state, [e for e in entries if e not in mine])
        if errors:
            raise LabError(f"host '{host.name}' could not be removed: {'; '.join(errors)}")
        return errors


class Snapshot:
    """Every host's counters, read once (all hosts at once): ``counters(node_id)`` and
    ``path_count(index)`` as :class:`~sfclab.realize.dataplane.DataPlane` has them."""

    def __init__(self, rt: SshRuntime, node_ids: dict[str, int]):
        ts = rt.targets()
        got = rt.each(ts, lambda t: call(t, "sfc-read", {"lab": rt.state.name}))
        by_node: dict[str, dict[str, int]] = {}
        self.paths: dict[int, int] = {}
        for g in got:
            by_node.update(g["counters"])
            for k, v in g["paths"].items():
                self.paths[int(k)] = self.paths.get(int(k), 0) + int(v)
        self.by_id = {i: by_node.get(n) for n, i in node_ids.items()}

    def counters(self, node_id: int) -> dict[str, int]:
        got = self.by_id.get(node_id)
        if got is None:
            raise LabError(f"no host answered for chain node {node_id}")
        return got

    def path_count(self, index: int) -> int:
        return self.paths.get(index, 0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _host_of(plan: Plan, node: str) -> str:
    h = plan.host_of(node)
    if h is None:
        raise LabError(f"node {node} is on no host")
    return h.name
