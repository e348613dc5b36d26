"""The ``ssh`` runtime's operations on a running lab (:class:`SshLive`): everything hosts
driven by their agents share (:class:`~.agents.AgentLive`: ``chain add``/``rm``, the classifier,
``chain trace``, health, ``chain migrate``), each call one SSH connection
(:class:`~sfclab.realize.runtime.ssh.SshRuntime`); and what only SSH hosts have:

- their watchers tell each other over the underlay what they see
  (:mod:`sfclab.live.health.peerwatch`): :meth:`SshLive.watch_settings` gives every host's
  agent the lab's peers (host -> underlay address), UDP port and secret, kept on this machine
  (:func:`sfclab.live.health.peerwatch.settings`); a host whose watcher is silent for 300 ms
  is taken out by the others;
- ``host add --ssh`` (:mod:`sfclab.live.hosts.join`): a machine joins the running lab.
"""

from __future__ import annotations

from typing import Any

from ...errors import LabError
from ...plan.model import Plan
from ...realize.runtime.ssh import SshRuntime
from ..health import peerwatch
from ..hosts import join as live_ssh_join
from .agents import AgentLive, part_of

__all__ = ["SshLive", "part_of"]


class SshLive(SshRuntime, AgentLive):
    """Hosts driven over SSH, each making its share of a running lab's changes."""

    def watch_settings(self, ts: dict[str, Any]) -> dict[str, Any]:
        s = peerwatch.settings(self.state)
        return {"peers": {h: t.address for h, t in ts.items()}, "port": s.port,
                "secret": s.secret}

    # --- hosts -----------------------------------------------------------------------------
    def refuse_emulated_join(self) -> None:
        """An emulated host (a namespace of this machine) cannot join a lab of real
        machines."""
        raise LabError(f"lab '{self.state.name}' runs on hosts driven over SSH: an emulated "
                       "host (a namespace of this machine) cannot join their underlay; add a "
                       "machine with --ssh USER@ADDRESS")

    def refuse_machine_join(self, plan: Plan) -> None:
        if not any(not h.emulated for h in plan.hosts):
            raise LabError(f"lab '{self.state.name}' runs on emulated hosts: its underlay is "
                           "a network sfclab made inside this machine, which no real machine "
                           "can join, so --ssh is refused; add an emulated host with --cpus N "
                           "--memory SIZE")

    def join_machine(self, plan: Plan, name: str, ssh: str, key: str | None,
                     port: int | None, cpus: int | None, memory: int | None,
                     agent_state: str | None) -> dict[str, Any]:
        return live_ssh_join.add(self, plan, name, ssh, key, port, cpus, memory, agent_state)
