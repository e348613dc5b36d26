"""``host``: an endpoint namespace; it neither forwards nor bridges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .namespace import NamespaceNode

if TYPE_CHECKING:
    from pydantic import BaseModel


class Host(NamespaceNode):
    name = "host"
    mermaid = ('["', '"]')
    dot = "box"

    def params_model(self) -> type[BaseModel]:
        from ...spec.lab import HostParams  # light start-up: pydantic only to validate

        return HostParams
