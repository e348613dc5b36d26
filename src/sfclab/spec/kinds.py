"""What validation needs to know of node kinds and link forms, declared where it is used.

The kinds themselves (one class per node kind and per link form, each owning its checks,
planning, journal entries, realization, teardown and inspection) live with the code that
realizes them, in :mod:`sfclab.realize.nodes` and :mod:`sfclab.realize.links`.  Validation is
handed their table (:class:`KindTable`) by its caller, so this layer imports nothing above it.

A node kind says how links meet it (its *attachment*: a namespace, a Linux bridge or an OVS
bridge), whether it has a namespace of its own, whether it forwards, and which keys it takes.
A link form says whether it is the one for a given pair of endpoints and link keys, and checks
what only it can check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from ..errors import SpecError
    from .lab import LinkSpec, NodeSpec

#: how links meet a node: inside its namespace, as a port of its Linux bridge, of its OVS bridge
Attachment = Literal["namespace", "linux-bridge", "ovs-bridge"]

#: raises the located error for a place below the current link: ``at("port")("message")``
Locate = Callable[..., Callable[[str], "SpecError"]]


class NodeKind(Protocol):
    """A node kind as validation sees it."""

    @property
    def name(self) -> str: ...

    @property
    def attachment(self) -> str:
        """How links meet it: one of :data:`Attachment`."""
        ...

    @property
    def has_namespace(self) -> bool:
        """Hosts, functions and Linux bridges have a namespace of their own; OVS bridges not."""
        ...

    @property
    def forwards(self) -> bool:
        """Routers and functions forward packets; hosts and bridges do not."""
        ...

    @property
    def sfc_program(self) -> str | None:
        """An SFC-aware eBPF function's program, which the data plane attaches on the node in
        place of its forwarder and proxy; None for every other kind."""
        ...

    @property
    def families(self) -> tuple[int, ...]:
        """The address families (4, 6) its nodes carry; a lab of another ``ip:`` is refused."""
        ...

    def params_model(self) -> type[BaseModel]:
        """The pydantic model of the node's keys (``kind`` excluded for functions)."""
        ...

    def params_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The part of the node's mapping that :meth:`params_model` validates."""
        ...


class LinkForm(Protocol):
    """A link form as validation sees it."""

    @property
    def name(self) -> str: ...

    def selects(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> bool:
        """True if a link between ``a`` and ``b`` with these keys takes this form."""
        ...

    def check(self, link: LinkSpec, ends: tuple[NodeSpec, NodeSpec], at: Locate) -> None:
        """Raise ``at(*place)(message)`` for what this form cannot do."""
        ...


class KindTable(Protocol):
    """Every node kind and link form, by name."""

    def node_kind(self, name: str) -> NodeKind | None: ...

    def node_kind_names(self) -> list[str]: ...

    def link_form(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> LinkForm: ...
