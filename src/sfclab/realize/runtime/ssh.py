"""The ``ssh`` runtime: a lab on real machines, each driven over SSH by its agent.

This machine makes nothing of such a lab.  Each host's part (:mod:`sfclab.plan.split`) is
built there by the host's agent (:mod:`sfclab.realize.agent`) with the ``local`` runtime of
that machine, journaled there; this machine's journal holds one ``remote-host`` entry per host
with what reaches it again (:class:`~sfclab.hosts.ssh.SshTarget`), written before the host is
sent anything (:mod:`sfclab.realize.remote` does ``up``, ``down``, ``inspect`` and ``exec``).

What every runtime of hosts driven by their agents shares (the chains' data plane read and
written through the agents, a long-running program in a node's namespace) is
:class:`~.agents.AgentHosts`'; here a call is one SSH connection (:func:`sfclab.hosts.ssh.call`,
:func:`~sfclab.hosts.ssh.call_armed`).  A machine joins a running lab by one more
``remote-host`` entry (:meth:`SshRuntime.join`) and leaves by its agent's ``down``
(:meth:`SshRuntime.leave`).
"""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING, Any

from ...errors import LabError, RealizeError, ToolError
from ...hosts import ssh
from ...hosts.ssh import SshTarget
from ...plan.model import HostPlan, Plan
from .. import remote
from ..state import LabState
from ..teardown import TeardownReport
from .agents import CALL_TIMEOUT_S, AgentHosts
from .base import Progress

if TYPE_CHECKING:
    from ...spec.lab import Lab


def journaled(state: LabState) -> bool:
    """The lab's parts are on hosts driven over SSH (its journal names one)."""
    return bool(remote.journaled(state))


class SshRuntime(AgentHosts):
    """Real machines, each reached over SSH and building its own part."""

    kind = "ssh"
    here = False

    def targets(self) -> dict[str, SshTarget]:
        """Each journaled host, by name."""
        return {e["host"]: SshTarget.from_dict(e["target"])
                for e in remote.journaled(self.state)}

    def call(self, t: SshTarget, verb: str, request: dict[str, Any], *,
             timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        return ssh.call(t, verb, request, timeout=timeout)

    def call_armed(self, ts: dict[str, SshTarget], verb: str, request: dict[str, Any], *,
                   timeout: float = CALL_TIMEOUT_S) -> tuple[dict[str, dict[str, Any]], float]:
        return ssh.call_armed(ts, verb, request, timeout=timeout)

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
                got = ssh.call(SshTarget.from_dict(e["target"]), "down", {"lab": state.name},
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
