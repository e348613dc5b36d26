"""A host's context: where a host's part of a lab is made.

:class:`HostContext` is what the code building a host's part may use: an rtnetlink socket in
the context, programs run there (waited for) and daemons started there.  :class:`EmulatedHost`
is a namespace of the lab (``sfclab:<lab>:@<host>``) entered by this process; a host over SSH
would run the same requests on its own root context.
"""

from __future__ import annotations

import abc
import subprocess
from typing import TYPE_CHECKING

from ..errors import ToolError
from ..kernel import ethtool, netns

if TYPE_CHECKING:
    from pyroute2 import IPRoute


class HostContext(abc.ABC):
    """The root context of one host."""

    name: str

    @abc.abstractmethod
    def iproute(self) -> IPRoute:
        """An rtnetlink socket in the context (the caller closes it)."""

    @abc.abstractmethod
    def run(self, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float = 60) -> str:
        """Run ``argv`` there and wait; raise :class:`~sfclab.errors.ToolError` on failure."""

    @abc.abstractmethod
    def set_offloads(self, ifname: str, offloads: dict[str, bool]) -> None:
        """Set an interface's offloads (ethtool's words)."""


class EmulatedHost(HostContext):
    """An emulated host: the lab's namespace ``netns`` plays its root context."""

    def __init__(self, name: str, ns: str):
        self.name = name
        self.netns = ns

    def iproute(self) -> IPRoute:
        return netns.iproute(self.netns)

    def run(self, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float = 60) -> str:
        try:
            return netns.run(self.netns, argv, timeout=timeout, env=env).stdout
        except subprocess.TimeoutExpired:
            raise ToolError(argv, -1, f"no answer in {timeout:.0f} s") from None


    def set_offloads(self, ifname: str, offloads: dict[str, bool]) -> None:
        with netns.entered(self.netns):
            ethtool.set_offloads(ifname, offloads)
