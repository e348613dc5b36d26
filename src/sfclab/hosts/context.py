"""A host's context: where a host's part of a lab is made.

:class:`HostContext` is what the code building a host's part may use: an rtnetlink socket in
the context, programs run there (waited for) and daemons started there.  :class:`EmulatedHost`
is a namespace of the lab (``sfclab:<lab>:@<host>``) entered by this process; :class:`OwnRoot`
is the namespace this process runs in, which is how a real host's agent
(:mod:`sfclab.realize.agent`, run there over SSH) builds its part in its own root context.
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
    #: what a native tool's ``--netns`` takes to work there ('-': where the tool runs)
    tool_netns: str = "-"

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
        self.tool_netns = ns

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


class OwnRoot(HostContext):
    """The namespace this process runs in, as the host's context (a real host's agent)."""

    def __init__(self, name: str):
        self.name = name

    def iproute(self) -> IPRoute:
        from pyroute2 import IPRoute  # light start-up: pyroute2 only when asked for

        return IPRoute()

    def run(self, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float = 60) -> str:
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise ToolError(argv, -1, f"no answer in {timeout:.0f} s") from None
        if cp.returncode != 0:
            raise ToolError(argv, cp.returncode, cp.stderr or cp.stdout)
        return cp.stdout

    def set_offloads(self, ifname: str, offloads: dict[str, bool]) -> None:
        ethtool.set_offloads(ifname, offloads)
