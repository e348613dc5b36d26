"""The two steps of ``chain migrate`` that run where a node lives: on this machine for
emulated hosts (:mod:`sfclab.live.ops.migrate`), in the host's agent over SSH
(:mod:`sfclab.live.runtime.agent_chain`'s ``chain-ready`` and ``chain-retire``), one code path for
both.

- :func:`ready`: the clone is *ready* when its program runs (kinds with a process) and its
  link answers: one ping from the clone to its attach node's end (``gateway``), which also
  settles the clone's ARP entry before any labelled packet reaches it.
- :func:`retire`: a lab file's function node stops being a function: its function stopped
  (processes, cgroups; a shaper's qdiscs stay) and its nftables ruleset flushed (the namespace
  is the lab's and every rule in it the function's), so it forwards as a plain transit node;
  its namespace, links and addresses stay.
"""

from __future__ import annotations

import time

from ...errors import LabError
from ...kernel import netns
from ...plan.model import Plan
from ...realize.functions import instantiate
from ...realize.state import LabState
from . import wire

READY_TIMEOUT_S = 5.0


def ready(state: LabState, plan: Plan, node: str, ns: str, gateway: str, attach: str) -> None:
    """Wait (at most :data:`READY_TIMEOUT_S`) until ``node``'s program runs, then ping
    ``gateway`` (``attach``'s end of its link) once from its namespace ``ns``; a
    :class:`LabError` naming the clone if either fails."""
    f = instantiate(state, plan, node)
    deadline = time.monotonic() + READY_TIMEOUT_S
    running = getattr(f, "running_pids", None)
    while running is not None and not running():
        if time.monotonic() > deadline:
            raise LabError(f"clone {node}: its program did not start")
        time.sleep(0.02)
    gw = gateway.split("/")[0]
    cp = netns.run(ns, ["ping", "-c", "1", "-W", "2", gw], check=False, timeout=10)
    if cp.returncode != 0:
        raise LabError(f"clone {node}: no answer from {attach} ({gw}) on its link")


def retire(state: LabState, plan: Plan, node: str, ns: str) -> list[str]:
    """Stop lab-file node ``node``'s function and flush its nftables ruleset in ``ns``; the
    errors (it keeps going past them)."""
    errors = wire.stop_function(state, plan, node)
    cp = netns.run(ns, ["nft", "flush", "ruleset"], check=False, timeout=10)
    if cp.returncode != 0:
        errors.append(f"nftables of {node}: {cp.stderr.strip()}")
    return errors
