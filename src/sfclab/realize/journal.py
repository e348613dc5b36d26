"""What the journal says a plan will make: the entries of every part, written before anything.

Interfaces inside lab namespaces need no entry of their own: they disappear with the namespace.
Entries: ``netns`` (name), ``link`` (a root-namespace interface: name and alias mark),
``ovs-bridge`` (name), ``function`` (node and kind: its ``stop`` runs at ``down``),
``container`` (name and node: :mod:`sfclab.realize.containers`).  What each
kind of entry must contain, and what proves its object is the lab's before ``down`` removes it,
is :mod:`sfclab.realize.ownership`.
"""

from __future__ import annotations

from typing import Any

from ..plan.model import Plan
from .kinds import TABLE


def entries(plan: Plan) -> list[dict[str, Any]]:
    return [e for part in TABLE.parts() for e in part.journal(plan)]
