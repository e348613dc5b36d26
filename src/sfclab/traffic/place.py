"""Where one program of a measurement runs: a node's namespace, reached through the runtime of
the node's host (:meth:`sfclab.realize.runtime.base.HostRuntime.run` and ``spawn``).

For a lab on this machine that is the namespace here; for a node of a host driven by its agent
(over SSH, or a Kubernetes Node) it is that namespace on that host: the sender runs there to
its end (``run``), the receiver is started there and asked for its counters
(``spawn``: :mod:`sfclab.realize.runtime.process`), iperf3's servers and clients are started
there together and held until they end (``spawn_all``), and the generator's program and
iperf3 are the ones of that host (:meth:`Place.sfcgen`, :meth:`Place.iperf3`).  :class:`NsPlace` is a namespace of this machine named
directly (the native generator's own callers: tests, calibration).

What a measurement does besides running its programs -- pinning the sender and the receiver to
cores apart from the chain's, steering the first hop's receive processing, locating losses by
the kernel's drop tracepoints, the xdp engine's change of the first hop's peer -- works on this
machine's kernel: :attr:`Place.here` says whether the node is there (the runtime's ``here``).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from ..errors import MeasurementError
from ..kernel import netns

if TYPE_CHECKING:
    from ..realize.runtime.base import HostRuntime
    from ..realize.runtime.process import Process, Programs


class NsPlace:
    """Namespace ``ns`` of this machine."""

    here = True
    host: str | None = None

    def __init__(self, ns: str):
        self.ns = ns

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return netns.run(self.ns, argv, check=False, timeout=timeout)

    def spawn(self, argv: list[str]) -> Process:
        from ..realize.runtime.process import LocalProcess  # light start-up

        return LocalProcess(self.ns, argv)

    def spawn_all(self, argvs: list[list[str]], *, listen: list[int] | None = None,
                  timeout: float = 5.0) -> Programs:
        from ..realize.runtime.process import LocalPrograms  # light start-up

        return LocalPrograms(self.ns, argvs, listen, timeout)

    def sfcgen(self) -> str:
        from .native import sfcgen_binary  # native imports this module

        return sfcgen_binary()

    def iperf3(self) -> str:
        """The version of iperf3 here (:class:`MeasurementError` without one)."""
        from .environment import tool_version  # light start-up

        version = tool_version("iperf3")
        if version == "absent":
            raise MeasurementError("iperf3 is not installed")
        return version

    def __str__(self) -> str:
        return self.ns


class Place:
    """Namespace ``ns`` of host ``host`` (None: a node on no host), reached through ``rt``,
    the runtime of the lab's host (:func:`sfclab.realize.runtime.runtime_at`)."""

    def __init__(self, rt: HostRuntime, host: str | None, ns: str):
        self.rt, self.host, self.ns = rt, host, ns
        self.here = rt.here
        self._tools: dict[str, object] | None = None

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return self.rt.run(self.host, self.ns, argv, check=False, input=None, timeout=timeout)

    def spawn(self, argv: list[str]) -> Process:
        return self.rt.spawn(self.host, self.ns, argv)

    def spawn_all(self, argvs: list[list[str]], *, listen: list[int] | None = None,
                  timeout: float = 5.0) -> Programs:
        return self.rt.spawn_all(self.host, self.ns, argvs, listen=listen, timeout=timeout)

    def tools(self) -> dict[str, object]:
        """What the node's host has of a measurement's programs (empty: this machine)."""
        if self._tools is None:
            self._tools = self.rt.tools(self.host)
        return self._tools

    def sfcgen(self) -> str:
        """The generator's program on the node's host (this machine's own when it is here)."""
        tools = self.tools()
        if "sfcgen" not in tools:
            return NsPlace(self.ns).sfcgen()
        path = tools["sfcgen"]
        if not path:
            raise MeasurementError(f"host {self.host} has no native generator: "
                                   f"{tools.get('why', 'sfcgen is not built there')}")
        return str(path)

    def iperf3(self) -> str:
        """The version of iperf3 on the node's host (this machine's when it is here)."""
        tools = self.tools()
        if "iperf3" not in tools:
            return NsPlace(self.ns).iperf3()
        if tools["iperf3"] == "absent":
            raise MeasurementError(f"iperf3 is not installed on host {self.host}")
        return str(tools["iperf3"])

    def __str__(self) -> str:
        return self.ns if self.host is None or self.here else f"{self.host}:{self.ns}"


#: where a program of a measurement runs
AnyPlace = NsPlace | Place
