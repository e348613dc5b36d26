"""From a typed request (:mod:`sfclab.spec.measurement`) to a measurement in a running lab.

The command line and experiment files both hand a validated request here; this is where it is
checked against the lab: an unknown lab or node, a node without a namespace (a bridge), nodes
with no path between them, or a frame size over the path's MTU (+ 18 bytes of Ethernet header
and FCS) are ``SpecError``/``LabError`` (exit 2) before any process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LabError, SpecError
from ..plan.paths import NoPath, hops, path_mtu
from ..realize.lifecycle import load_plan
from ..spec.measurement import (MAX, AnyRequest, IperfRequest, LatencyRequest, NdrRequest,
                                PacketRequest, RateRequest)
from .cpu import CpuMonitor
from .result import Measurement

if TYPE_CHECKING:
    from .native import NativeGenerator

Progress = Callable[[dict[str, Any]], None]

ETH_OVERHEAD = 18  # Ethernet header (14) + FCS (4): RFC 2544 frame sizes include both
MIN_FRAME = 64


class Endpoints:
    """The two ends of a measurement inside a running lab."""

    def __init__(self, lab: str, src: str, dst: str):
        _state, self.plan = load_plan(lab)
        self.lab = lab
        self.src, self.dst = src, dst
        if src == dst:
            raise SpecError(f"expected two different nodes, got '{src}' twice", place="--to")
        self.src_netns = self._netns(src)
        self.dst_netns = self._netns(dst)
        for node, option in ((src, "--from"), (dst, "--to")):
            if not self.plan.addresses_of(node):
                raise SpecError(f"expected a node with an address (a host or a function), got "
                                f"'{node}', which has none (a bridge?)", place=option)
        self.dst_ip = str(self.plan.address_of(dst))
        try:
            self.hops = hops(self.plan, src, self.plan.address_of(dst))
        except NoPath as e:
            raise LabError(f"no path from '{src}' to '{dst}' in lab '{lab}': {e}") from None
        self.mtu = path_mtu(self.plan, self.hops)

    def _netns(self, node: str) -> str:
        try:
            return self.plan.netns_of(node)
        except KeyError:
            names = [n.node for n in self.plan.namespaces]
            raise LabError(f"lab '{self.lab}' has no node '{node}' with a namespace "
                           f"(nodes: {', '.join(names)})") from None

    def check_size(self, size: int | str) -> None:
        if size == "imix":
            if 1518 > self.mtu + ETH_OVERHEAD:
                raise SpecError(f"IMIX has 1518-byte frames, over this path's MTU of {self.mtu}",
                                place="size")
            return
        if not isinstance(size, int) or size < MIN_FRAME or size > self.mtu + ETH_OVERHEAD:
            raise SpecError(f"expected a frame size from {MIN_FRAME} to "
                            f"{self.mtu + ETH_OVERHEAD} bytes (path MTU {self.mtu} + Ethernet), "
                            f"or imix; got {size}", place="size")

    def generator(self, r: PacketRequest) -> NativeGenerator:
        from .native import NativeGenerator  # light start-up: only packet measurements

        return NativeGenerator(self.src_netns, self.dst_netns, self.dst_ip, flows=r.flows,
                               threads=r.threads, engine=r.engine, sink=r.sink)

    def describe(self) -> dict[str, Any]:
        return {"lab": self.lab, "from": self.src, "to": self.dst, "dst_ip": self.dst_ip,
                "path": self.hops, "path_mtu": self.mtu}


def _finish(m: Measurement, ends: Endpoints, cpu: CpuMonitor | None) -> Measurement:
    m.params = {**ends.describe(), **m.params}
    if cpu is not None and not m.cpu:
        m.cpu = cpu.result
    return m


def iperf(lab: str, r: IperfRequest) -> Measurement:
    from .iperf import run_iperf  # light start-up: the iperf3 driver only when used

    ends = Endpoints(lab, r.from_, r.to)
    m = run_iperf(ends.src_netns, ends.dst_netns, ends.dst_ip, flows=r.flows, udp=r.udp,
                  length=r.length, bitrate=r.bitrate, zerocopy=r.zerocopy, duration=r.duration,
                  omit=r.omit, affinity=r.affinity)
    return _finish(m, ends, None)


def rate(lab: str, r: RateRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import rate_curve  # light start-up: the search code only when used

    ends = Endpoints(lab, r.from_, r.to)
    ends.check_size(r.size)
    with CpuMonitor() as cpu, ends.generator(r) as gen:
        offered: list[float] = []
        for x in r.rates:
            if x == MAX:
                offered.append(gen.trial(None, r.duration, r.size).sent_pps)
            else:
                offered.append(float(x))
        m = rate_curve(gen, offered, r.size, r.duration, progress=progress)
    return _finish(m, ends, cpu)


def ndr(lab: str, r: NdrRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import ndr_pdr  # light start-up: the search code only when used

    ends = Endpoints(lab, r.from_, r.to)
    ends.check_size(r.size)
    with CpuMonitor() as cpu, ends.generator(r) as gen:
        m = ndr_pdr(gen, r.size, duration=r.duration, loss_goals=[r.ndr_loss, r.pdr_loss],
                    precision=r.precision / 100, max_rate_pps=r.max_rate, progress=progress)
    return _finish(m, ends, cpu)


def latency(lab: str, r: LatencyRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import latency as run_latency  # light start-up: the search code only when used

    ends = Endpoints(lab, r.from_, r.to)
    ends.check_size(r.size)
    with CpuMonitor() as cpu, ends.generator(r) as gen:
        m = run_latency(gen, r.rate, r.size, r.duration)
    return _finish(m, ends, cpu)


def run(lab: str, r: AnyRequest, progress: Progress | None = None) -> Measurement:
    """Run request ``r`` (of any kind) in the running lab ``lab``."""
    if isinstance(r, IperfRequest):
        return iperf(lab, r)
    if isinstance(r, RateRequest):
        return rate(lab, r, progress)
    if isinstance(r, NdrRequest):
        return ndr(lab, r, progress)
    return latency(lab, r, progress)


__all__ = ["Endpoints", "iperf", "rate", "ndr", "latency", "run"]
