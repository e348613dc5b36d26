"""A table whose rows are loaded when first read: :class:`Rows`.

The runtime tables (:data:`sfclab.realize.runtime.RUNTIMES`,
:data:`sfclab.live.runtime.table.LIVE`) name every way of reaching hosts, but a command on a
lab of this machine needs only the ``local`` row: the SSH client (asyncio) and the Kubernetes
client (HTTPS, YAML) would cost each such command about 35 ms of start-up.  Each row is a
function that imports its module and returns what the row holds (an import in a function, so
the architecture contract still sees it); it runs once, when the row is first read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

T = TypeVar("T")


class Rows(Mapping[str, T]):
    """``name -> T``, each row's value from its loader, called on the first read."""

    def __init__(self, loaders: dict[str, Callable[[], T]]):
        self._loaders = dict(loaders)
        self._loaded: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._loaded:
            self._loaded[name] = self._loaders[name]()  # KeyError for an unknown row
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)
