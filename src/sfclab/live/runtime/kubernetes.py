"""The ``kubernetes`` runtime's operations on a running lab (:class:`KubeLive`): everything hosts
driven by their agents share (:class:`~.agents.AgentLive`: ``chain add``/``rm``, the classifier,
``chain trace``, health, ``chain migrate``), each call a request to the agent of the host's
Node (:class:`~sfclab.realize.runtime.kubernetes_runtime.KubeRuntime`).

What differs from SSH hosts:

- the watchers are given no peers (:meth:`KubeLive.watch_settings`): a host is alive while its
  Node's agent holds a live Lease, and each agent writes, for the labs it holds a part of, the
  hosts whose agent's Lease expired; their watchers take those hosts' instances out
  (:mod:`sfclab.realize.runtime.kubernetes_failover`);
- hosts cannot join or leave a lab on Kubernetes (its hosts are the Nodes placement chose at
  ``up``): refused with one line, before anything is made.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ...realize.runtime.kubernetes_runtime import KubeRuntime, not_here
from .agents import AgentLive


def _refuse(what: str) -> NoReturn:
    raise not_here(what)


class KubeLive(KubeRuntime, AgentLive):
    """A running lab on Kubernetes (see the module)."""

    def watch_settings(self, ts: dict[str, Any]) -> dict[str, Any]:
        return {}  # liveness by the agents' Leases, not by the watchers' datagrams

    def refuse_emulated_join(self) -> None:
        _refuse("host add")

    def refuse_machine_join(self, *a: Any, **k: Any) -> None:
        _refuse("host add")

    def join_machine(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("host add")
