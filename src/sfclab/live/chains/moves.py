"""A migration's records and plans, whichever runtime makes it (:mod:`sfclab.live.ops.migrate` plans
it, the runtime's ``migrate`` makes it: :mod:`sfclab.live.runtime.local`,
:mod:`sfclab.live.runtime.ssh`).

- :class:`Owner`: the record a migrated instance belongs to (an added chain's, or the clones
  of a lab file's chain) and :func:`save` it;
- the plans once switched and once the old instance is gone are planned by
  :mod:`sfclab.plan.migration` (``switched``, ``removal``);
- :func:`drain`: wait until no packet enters the old instance;
- :func:`finish`: the records once the old instance is gone (the clone in its place).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ...plan.chainadd import Addition, NewNode
from ...plan.model import Plan
from ...realize.runtime.base import Counters
from ...realize.state import LabState
from .. import record

MAX_DRAIN_S = 5.0


@dataclass
class Owner:
    add: Addition  # the record the clone joins
    old: NewNode  # the instance, as the record knows it
    moved: dict[str, str] | None  # lab-file node -> clone (None: an added chain)

    @property
    def lab_file(self) -> bool:
        """Whether ``old`` is a node of the lab file (not one of ``add.nodes``)."""
        return self.moved is not None and all(n.node != self.old.node for n in self.add.nodes)


def finish(state: LabState, own: Owner, clone: NewNode, final: Plan, freed: list[int],
           host: str, switch_s: float, moved: int, drained: bool) -> None:
    """Record a migration whose old instance is gone: the record names the clone in its place
    (for a lab-file node, the node it stands for), without the freed labels; the final plan
    saved; a ``migrated`` event."""
    add, old = own.add, own.old
    if not own.lab_file:
        add.nodes.remove(old)
    if own.moved is not None:  # the lab-file node the instance stood for now has the clone
        stood = next((k for k, v in own.moved.items() if v == old.node), old.node)
        own.moved[stood] = clone.node
    add.hops = [h for h in add.hops if h.label not in freed]
    record.save_plan(state, final)
    save(state, own, "up")
    record.event(state, "migrated", chain=add.chain, instance=old.node, clone=clone.node,
                 host=host, switch_ms=round(1000 * switch_s, 3), conntrack_moved=moved,
                 drained=drained)


def save(state: LabState, own: Owner, status: str) -> None:
    """Save ``own``'s record: an added chain's with ``status``, or the moved record of a
    lab file's chain."""
    if own.moved is None:
        record.save_addition(state, own.add, status)
    else:
        record.save_moved(state, own.add, own.moved)


def drain(dp: Counters, node_id: int, quiet_s: float) -> bool:
    """Wait until no packet entered node ``node_id``'s function for ``quiet_s`` (at most
    :data:`MAX_DRAIN_S`); False if it never went quiet."""
    deadline = time.monotonic() + MAX_DRAIN_S
    last = dp.counters(node_id)["proxy_in"]
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(min(0.02, quiet_s))
        now = dp.counters(node_id)["proxy_in"]
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
    return False
