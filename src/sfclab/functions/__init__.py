"""Network functions: one module per kind, each a :class:`~sfclab.functions.base.NetworkFunction`
subclass registered by name.  A function node forwards like a router and adds its behaviour.

:data:`KINDS` is the list of function kinds, one line each: kind -> module.  A module is
imported the first time its kind is asked for (``get``), so commands that never touch a function
(``down`` of a plain chain, ``ls``) do not pay for loading them.  To add a function kind, write
its module here and add one line to :data:`KINDS`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import NetworkFunction

#: every function kind and the module that registers it
KINDS: dict[str, str] = {
    "router": "router",
    "firewall": "firewall",
    "nat": "nat",
    "shaper": "shaper",
    "dpi": "dpi",
    "tun": "tun",
}


def get(kind: str) -> type[NetworkFunction]:
    """The class of function kind ``kind`` (``KeyError`` if there is none)."""
    from .base import REGISTRY  # light start-up: pydantic only once a function is needed

    if kind not in REGISTRY:
        importlib.import_module(f"{__name__}.{KINDS[kind]}")  # registers it
    return REGISTRY[kind]


def kinds() -> list[str]:
    return sorted(KINDS)


__all__ = ["KINDS", "get", "kinds"]
