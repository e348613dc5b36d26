"""The kind table: every node kind and link form, and the lab-file loaders bound to it.

Validation (:mod:`sfclab.spec`) and planning (:mod:`sfclab.plan`) are handed this table, so
they know kinds only through the small interfaces they declare; building, teardown and inspect
call the same objects' stages.  ``load_lab``, ``load_lab_text`` and ``load_lab_dict`` are the
loaders everything above uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .hosts import HOSTS
from .links import LINK_FORMS, LinkForm
from .nodes import NODE_KINDS
from .part import Part
from .tenancy import TENANCY

if TYPE_CHECKING:
    from ..spec.lab import Lab, LinkSpec, NodeSpec


class KindTable:
    """Node kinds and link forms by name (implements :class:`sfclab.spec.kinds.KindTable`)."""

    def node_kind(self, name: str) -> Any:
        return NODE_KINDS.get(name)

    def node_kind_names(self) -> list[str]:
        return sorted(NODE_KINDS)

    def link_form(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> LinkForm:
        return next(f for f in LINK_FORMS.values() if f.selects(a, b, link))

    def parts(self) -> list[Part]:
        """Every part in stage order: hosts first (their contexts exist before nodes and links
        meet them), node kinds (their namespaces and bridges exist before links meet them),
        link forms, tenants' routing in shared nodes, the SFC data plane, then nodes'
        containers (each joins a namespace that is complete)."""
        from .containers import CONTAINERS  # nodes' containers start in their namespaces
        from .steering import STEERING  # the SFC data plane follows the links it runs on

        return [HOSTS, *NODE_KINDS.values(), *LINK_FORMS.values(), TENANCY, STEERING,
                CONTAINERS]

    def shapes(self) -> dict[str, tuple[tuple[str, str], str]]:
        """How ``graph`` draws each node kind: (mermaid brackets, Graphviz shape)."""
        return {k: (p.mermaid, p.dot) for k, p in NODE_KINDS.items()}


TABLE = KindTable()


def load_lab(path: str) -> Lab:
    """Read and validate a lab file."""
    from ..spec import lab  # light start-up: down, ls and inspect read no lab file

    return lab.load_lab(path, TABLE)


def load_lab_text(text: str, source: str) -> Lab:
    from ..spec import lab  # light start-up: down, ls and inspect read no lab file

    return lab.load_lab_text(text, source, TABLE)


def load_lab_dict(data: dict[str, Any], source: str = "<dict>") -> Lab:
    """Validate a lab given as a mapping (e.g. inline in an experiment file)."""
    from ..spec import lab  # light start-up: down, ls and inspect read no lab file

    return lab.load_lab_dict(data, source, TABLE)
