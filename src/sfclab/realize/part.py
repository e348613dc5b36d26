"""The shape every node kind and link form shares: one object per kind, called at each stage.

A *part* (a node kind such as ``host`` or ``ovs-bridge``, or a link form such as ``veth``) owns
everything sfclab does for its kind, from validation to removal:

==============  ================================================================================
``check``       (link forms) what only this form cannot do, at validation
``plan_*``      its objects in the plan (names, interfaces, ports), through the planner
``journal``     the journal entries of its objects that outlive a namespace
``namespaces``  build stage 1: namespaces it needs
``links``       stage 2: devices in the shared rtnetlink batch (bridges, veth pairs)
``after_links`` stage 3: what must follow the batch (moving marked ends to the root namespace)
``ovs``         stage 4: commands of the lab's one OVSDB transaction
``attach``      stage 5: what needs the OVS ports (internal ports into their namespaces)
``configure``   stage 6: per-namespace rtnetlink batches (links up, masters, addresses)
``prepare``     stage 7: kernel state of functions (rules, qdiscs), every function before any starts
``start``       stage 8: processes (functions)
``teardown``    removal of its journaled objects that carry the lab's mark, in ``teardown_rank``
``teardown_joined`` a change's removal: its objects in namespaces of the running lab the change
                joined (the attach node's end of an added node's link), each mark checked
``inspect``     what ``sfclab inspect`` shows of its objects
==============  ================================================================================

Every hook has a do-nothing default, so a part writes only the stages it takes part in.  Parts
are registered in tables (:mod:`sfclab.realize.nodes`, :mod:`sfclab.realize.links`) that refuse a
name registered twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..plan.model import Plan
    from .build import Builder
    from .state import LabState
    from .teardown import TeardownReport


class Part:
    """Base of node kinds and link forms: every stage hook, doing nothing."""

    name: ClassVar[str]
    #: order of ``teardown`` among parts (lower first): functions stop before OVS bridges go,
    #: OVS bridges before root interfaces, all before the namespaces (removed last, generically)
    teardown_rank: ClassVar[int] = 50

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return []

    def namespaces(self, b: Builder) -> None:
        pass

    def links(self, b: Builder) -> None:
        pass

    def after_links(self, b: Builder) -> None:
        pass

    def ovs(self, b: Builder) -> None:
        pass

    def attach(self, b: Builder) -> None:
        pass

    def configure(self, b: Builder) -> None:
        pass

    def prepare(self, b: Builder) -> None:
        pass

    def start(self, b: Builder) -> None:
        pass

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        """Add what ``sfclab inspect`` shows of this part's objects to ``nodes`` (by node)."""

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        pass

    def teardown_joined(self, state: LabState, plan: Plan, joined: set[str],
                        report: TeardownReport) -> None:
        """Remove what this part made of change ``plan`` inside ``joined``: namespaces of the
        running lab the change joined (:meth:`sfclab.realize.build.Builder.join_namespace`),
        which outlive the change."""


class Registry(dict[str, Any]):
    """A name -> part table that refuses a name registered twice."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def add(self, part: Any) -> Any:
        if part.name in self:
            raise ValueError(f"{self.what} '{part.name}' is registered twice "
                             f"({type(self[part.name]).__name__} and {type(part).__name__})")
        self[part.name] = part
        return part
