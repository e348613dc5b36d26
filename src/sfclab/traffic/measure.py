"""From a lab and node names to a measurement: resolve the nodes, check the request, run it.

This is the one place where a measurement request (as the CLI or an experiment file gives it)
is checked against a running lab: an unknown lab or node, nodes with no path between them, a
rate <= 0, or a frame size under 64 bytes or over the path's MTU (+ 18 bytes of Ethernet header
and FCS) are ``SpecError``/``LabError`` (exit 2) before any process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import LabError, SpecError
from ..plan.model import Plan
from ..plan.paths import NoPath, hops, path_mtu
from ..realize.lifecycle import load_plan
from .cpu import CpuMonitor
from .result import Measurement

ETH_OVERHEAD = 18  # Ethernet header (14) + FCS (4): RFC 2544 frame sizes include both
MIN_FRAME = 64


class Endpoints:
    """The two ends of a measurement inside a running lab."""

    def __init__(self, lab: str, src: str, dst: str):
        _state, self.plan = load_plan(lab)
        self.lab = lab
        self.src, self.dst = src, dst
        self.src_netns = self._netns(src)
        self.dst_netns = self._netns(dst)
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

    def generator(self, flows: int = 1, threads: int = 1, engine: str = "auto",
                  sink: str = "socket"):
        from .native import NativeGenerator

        if engine not in NativeGenerator.ENGINES:
            raise SpecError(f"expected an engine out of {', '.join(NativeGenerator.ENGINES)}, "
                            f"got {engine!r}", place="engine")
        if sink not in NativeGenerator.SINKS:
            raise SpecError(f"expected a sink out of {', '.join(NativeGenerator.SINKS)}, "
                            f"got {sink!r}", place="sink")
        if not 1 <= threads <= 64:
            raise SpecError(f"expected 1 to 64 threads, got {threads}", place="threads")
        if not 1 <= flows <= 50000:
            raise SpecError(f"expected 1 to 50000 flows, got {flows}", place="flows")
        return NativeGenerator(self.src_netns, self.dst_netns, self.dst_ip, flows=flows,
                               threads=threads, engine=engine, sink=sink)

    def describe(self) -> dict[str, Any]:
        return {"lab": self.lab, "from": self.src, "to": self.dst, "dst_ip": self.dst_ip,
                "path": self.hops, "path_mtu": self.mtu}


def parse_size(v: Any) -> int | str:
    if isinstance(v, str) and v.lower() == "imix":
        return "imix"
    try:
        return int(v)
    except (TypeError, ValueError):
        raise SpecError(f"expected a frame size in bytes or 'imix', got {v!r}",
                        place="size") from None


_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9}


def parse_rate(v: Any, place: str = "rate") -> float:
    """``250000``, ``"250k"``, ``"1.5M"`` (packets per second) -> float > 0."""
    try:
        if isinstance(v, str) and v and v[-1].lower() in _SUFFIX:
            r = float(v[:-1]) * _SUFFIX[v[-1].lower()]
        else:
            r = float(v)
    except (TypeError, ValueError):
        raise SpecError(f"expected a packet rate such as 250000 or 250k, got {v!r}",
                        place=place) from None
    if not r > 0:
        raise SpecError(f"expected a rate above 0, got {v!r}", place=place)
    return r


def _finish(m: Measurement, ends: Endpoints, cpu: CpuMonitor | None) -> dict[str, Any]:
    d = m.to_dict()
    d["params"] = {**ends.describe(), **d.get("params", {})}
    if cpu is not None and not d.get("cpu"):
        d["cpu"] = cpu.result
    return d


def iperf(lab: str, src: str, dst: str, **opts: Any) -> dict[str, Any]:
    from .iperf import run_iperf

    ends = Endpoints(lab, src, dst)
    return _finish(run_iperf(ends.src_netns, ends.dst_netns, ends.dst_ip, **opts), ends, None)


def rate(lab: str, src: str, dst: str, *, size: Any, rates: list[Any] | str, duration: float = 2,
         flows: int = 1, threads: int = 1, engine: str = "auto", sink: str = "socket",
         progress: Callable | None = None) -> dict[str, Any]:
    from .ndr import rate_curve

    ends = Endpoints(lab, src, dst)
    size = parse_size(size)
    ends.check_size(size)
    offered = None if rates == "max" else [parse_rate(r, "rates") for r in rates]
    with CpuMonitor() as cpu, ends.generator(flows, threads, engine, sink) as gen:
        if offered is None:
            t = gen.trial(None, duration, size)
            offered = [t.sent_pps]
        m = rate_curve(gen, offered, size, duration, progress=progress)
    return _finish(m, ends, cpu)


def ndr(lab: str, src: str, dst: str, *, size: Any, loss: str = "0.001%,0.1%",
        trial: float = 2, precision: float = 0.01, max_rate: Any = None, flows: int = 1,
        threads: int = 1, engine: str = "auto", sink: str = "socket",
        progress: Callable | None = None) -> dict[str, Any]:
    from .ndr import ndr_pdr

    ends = Endpoints(lab, src, dst)
    size = parse_size(size)
    ends.check_size(size)
    if not 0 < precision < 1:
        raise SpecError(f"expected a precision between 0 and 1 (e.g. 0.01), got {precision}",
                        place="precision")
    top = parse_rate(max_rate, "max_rate") if max_rate is not None else None
    with CpuMonitor() as cpu, ends.generator(flows, threads, engine, sink) as gen:
        m = ndr_pdr(gen, size, duration=trial, loss_goals=loss, precision=precision,
                    max_rate_pps=top, progress=progress)
    return _finish(m, ends, cpu)


def latency(lab: str, src: str, dst: str, *, rate: Any, size: Any, duration: float = 2,
            flows: int = 1, engine: str = "auto", sink: str = "socket") -> dict[str, Any]:
    from .ndr import latency as run_latency

    ends = Endpoints(lab, src, dst)
    size = parse_size(size)
    ends.check_size(size)
    r = parse_rate(rate)
    with CpuMonitor() as cpu, ends.generator(flows, 1, engine, sink) as gen:
        m = run_latency(gen, r, size, duration)
    return _finish(m, ends, cpu)


def from_experiment(lab: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run the measurement an experiment file describes (``measure:``) in a running lab."""
    kind = spec["type"]
    src, dst = spec.get("from") or "src", spec.get("to") or "dst"
    if kind == "iperf":
        opts = {k: spec[k] for k in ("flows", "udp", "length", "bitrate", "zerocopy", "omit")
                if spec.get(k) is not None}
        return iperf(lab, src, dst, duration=spec.get("duration", 5), **opts)
    gen = {k: spec[k] for k in ("engine", "sink") if spec.get(k) is not None}
    if kind == "rate":
        return rate(lab, src, dst, size=spec.get("size", 64), rates=spec["rates"],
                    duration=spec.get("duration", 2), **gen)
    if kind == "ndr":
        loss = ",".join(f"{x}%" for x in (spec.get("ndr_loss", 0.001), spec.get("pdr_loss", 0.1)))
        return ndr(lab, src, dst, size=spec.get("size", 64), loss=loss,
                   trial=spec.get("duration", 2),
                   precision=spec.get("precision", 0.1) / 100,  # the file gives percent
                   max_rate=spec.get("max_rate"), **gen)
    if kind == "latency":
        return latency(lab, src, dst, rate=spec["rate"], size=spec.get("size", 64),
                       duration=spec.get("duration", 2), **gen)
    raise SpecError(f"unknown measurement type '{kind}'", place="measure.type")


__all__ = ["Endpoints", "iperf", "rate", "ndr", "latency", "from_experiment", "parse_rate",
           "parse_size", "Plan"]
