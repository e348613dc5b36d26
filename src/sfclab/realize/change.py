"""A change to a running lab, made by the engine that builds a lab at ``up``.

A change is a plan of its own holding only the objects to add (for nodes that ``chain add`` or
``chain migrate`` add: :func:`sfclab.plan.chainadd.change_of`), beside the lab's whole plan
with them.  It is journaled by the same parts (:func:`journal`: their ``journal`` entries,
written before anything is made) and made by the same parts' stages (:func:`make`: the
:class:`~sfclab.realize.build.Builder` over the kind table, :mod:`sfclab.realize.kinds`), so a
node kind or link form in the table builds its objects on a running lab as it does at ``up``.
A failure is raised naming the object; the caller takes out what the change made (its
namespaces, whose removal takes their links' ends with them).
"""

from __future__ import annotations

from collections.abc import Callable

from ..plan.model import Plan
from .build import Builder
from .journal import entries
from .kinds import TABLE
from .state import LabState


def journal(state: LabState, change: Plan) -> None:
    """Write the journal entries of ``change``'s objects, before any is made."""
    state.record(entries(change))


def make(state: LabState, whole: Plan, change: Plan,
         say: Callable[[str], None] | None = None) -> None:
    """Make ``change``'s objects, stage by stage, with every part of the kind table; ``whole``
    is the running lab's plan with them."""
    builder = Builder(change, TABLE.parts(), state, say, whole=whole)
    try:
        builder.build()
    finally:
        builder.close()
