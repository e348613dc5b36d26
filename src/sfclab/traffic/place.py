"""Where one program of a measurement runs: a node's namespace, reached through the runtime of
the node's host (:meth:`sfclab.realize.runtime.base.HostRuntime.run` and ``spawn``).

For a lab on this machine that is the namespace here; for a node of a host driven by its agent
(over SSH, or a Kubernetes Node) it is that namespace on that host: the sender runs there to
its end (``run``), the receiver is started there and asked for its counters
(``spawn``: :mod:`sfclab.realize.runtime.process`), and the generator's program is the one of
that host (:meth:`Place.sfcgen`).  :class:`NsPlace` is a namespace of this machine named
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
    from ..realize.runtime.process import Process


class NsPlace:
    """Namespace ``ns`` of this machine."""

    here = True

    def __init__(self, ns: str):
        self.ns = ns

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return netns.run(self.ns, argv, check=False, timeout=timeout)

    def spawn(self, argv: list[str]) -> Process:
        from ..realize.runtime.process import LocalProcess  # light start-up

        return LocalProcess(self.ns, argv)

    def sfcgen(self) -> str:
        from .native import sfcgen_binary  # native imports this module

        return sfcgen_binary()

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

    def sfcgen(self) -> str:
        """The generator's program on the node's host (this machine's own when it is here)."""
        if self._tools is None:
            self._tools = self.rt.tools(self.host)
        if "sfcgen" not in self._tools:
            return NsPlace(self.ns).sfcgen()
        path = self._tools["sfcgen"]
        if not path:
            raise MeasurementError(f"host {self.host} has no native generator: "
                                   f"{self._tools.get('why', 'sfcgen is not built there')}")
        return str(path)

    def __str__(self) -> str:
        return self.ns if self.host is None or self.here else f"{self.host}:{self.ns}"
