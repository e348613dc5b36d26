"""``chain add`` and ``chain rm`` on a lab of hosts driven over SSH: this machine's side.

:mod:`sfclab.steer.add` decides everything as for emulated hosts (placement over the hosts'
CPUs and memory, wiring, labels, tunnels, the merged plan, saved before anything is made);
only "make it on host X" goes through X's agent (:mod:`sfclab.steer.agent_chain`), each host
asked in turn with the merged plan and the addition:

1. ``chain-make`` on every host (a host that ``host add --ssh`` joined gets its empty part
   first); the hosts of a round at once (one connection and thread each), round after round: its instances, tunnel ends, attach ends, fitted interfaces, MACs, programs --
   each journaled there first;
2. ``chain-tables`` on every host: labels, paths and slots (nothing uses them yet);
3. ``chain-tables`` with classifiers on every host: only now does traffic enter the chain.

:func:`unmake` asks every host to take its share out: the classifier entries on every
host first (those ``chain classify`` added since too), a drain, then the tables, nodes and
tunnel ends on every host, collecting errors and going on past an unreachable host (``down``
still reaches what it left, by the host's journal).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ..errors import RealizeError, SpecError
from ..hosts.ssh import SshTarget, call
from ..plan.chainadd import Addition, withdraw
from ..plan.model import Plan
from ..realize import remote, remote_sfc
from ..realize.state import LabState
from .agent_chain import MODULE, part_of

TIMEOUT_S = 300


def is_remote(state: LabState) -> bool:
    return remote_sfc.is_remote(state)


def check_free(state: LabState, merged: Plan, add: Addition, source: str) -> None:
    """Refuse (:class:`SpecError`, exit 2, nothing made) a classifier entry another chain
    holds at its ingress's host (each ingress host's agent looks in its maps)."""
    base = {"lab": state.name, "plan": merged.to_dict(), "addition": add.to_dict()}
    ts = remote_sfc.targets(state)
    for got in remote._each(ts, lambda t: call(t, "chain-check", base, timeout=TIMEOUT_S,
                                                module=MODULE)):
        if got.get("taken"):
            raise SpecError(got["taken"]["message"], file=source,
                            place=got["taken"]["place"])


def make(state: LabState, plan: Plan, merged: Plan, add: Addition,
         say: Callable[[str], None], slots: bool = True) -> None:
    """Every host's share of ``add`` made by its agent (see the module's docstring);
    ``slots`` False: a migration's clone, whose paths wait for the switch (no slots, no
    classifiers)."""
    ts = remote_sfc.targets(state)
    base: dict[str, Any] = {"lab": state.name, "plan": merged.to_dict(),
                            "addition": add.to_dict()}
    addresses = {h.name: h.address for h in merged.hosts}
    say(f"hosts {', '.join(ts)}: instances, tunnel ends, programs")
    remote._each(ts, lambda t: call(t, "chain-make", {
        **base, "addresses": addresses, "part": part_of(plan, t.host).to_dict()},
        timeout=TIMEOUT_S, module=MODULE))
    say("tables")
    remote._each(ts, lambda t: call(t, "chain-tables", {**base, "classifiers": False,
                                                        "slots": slots},
                                    timeout=TIMEOUT_S, module=MODULE))
    if not slots:
        return
    say("classifiers: traffic on")
    remote._each(ts, lambda t: call(t, "chain-tables", {**base, "classifiers": True},
                                    timeout=TIMEOUT_S, module=MODULE))


def unmake(state: LabState, merged: Plan, add: Addition, drain_s: float, *,
           freed: list[int] | None = None, after: Plan | None = None,
           clear: list[list[Any]] | None = None,
           later: Mapping[int, Sequence[Mapping[str, Any]]] | None = None) -> list[str]:
    """Every host takes its share of ``add`` out; the errors (an unreachable host's too).
    ``freed``, ``after``: the labels to delete and the plan once it is gone (default: as
    ``chain rm`` has them); ``clear``: more path ranges (ingress, base, count) to clear;
    ``later``: the entries ``chain classify`` added to the chain since, by direction (each
    ingress's host deletes them with the chain's own)."""
    if after is None:
        after = Plan.from_dict(merged.to_dict())
        freed = withdraw(after, add)
    req = {"lab": state.name, "plan": merged.to_dict(), "after": after.to_dict(),
           "addition": add.to_dict(), "freed": list(freed or []), "drain": drain_s,
           "clear": clear or [], "later": {str(k): v for k, v in (later or {}).items()}}
    def one(t: SshTarget, phase: str) -> dict[str, Any] | RealizeError:
        try:
            return call(t, "chain-unmake", {**req, "phase": phase}, timeout=TIMEOUT_S,
                        module=MODULE)
        except RealizeError as e:  # unreachable: down reaches what it left later
            return e

    errors: list[str] = []
    ts = remote_sfc.targets(state)
    # classifier entries out on every host, a drain, then the rest on every host
    for phase in ("classifiers", "rest"):
        for name, got in zip(ts, remote._each(ts, partial(one, phase=phase))):
            if isinstance(got, RealizeError):
                errors.append(str(got))
                continue
            errors += [f"host {name}: {x}" for x in got.get("errors", [])]
        if phase == "classifiers":
            time.sleep(drain_s)  # packets classified just before are on their way
    return errors
