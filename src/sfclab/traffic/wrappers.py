"""Generators made of generators, behind the same :class:`PacketGenerator` interface, so the
rate curve and the NDR/PDR searches use them unchanged:

- :class:`PairedGenerator`: several sender -> receiver pairs offered the same rate at the same
  time; the trial's totals are the pairs' sums, its ``pairs`` each pair's own counters, and its
  loss ratio the worst pair's (a loss goal then holds for every pair at once);
- :class:`LocatedGenerator`: each trial watched by a :class:`~sfclab.traffic.loss.LossLocator`,
  so it says where its lost packets died (``located``);
- :class:`PlacedGenerator`: each trial's ``raw["placement"]`` says on which cores the
  generator, the receiver and the first hop ran (:class:`~sfclab.traffic.cores.CoreLayout`);
- :class:`CoreWatchedGenerator`: each trial says which cores the generator, the receiver and
  the chain ran on and how busy they were (``cores``, from ``/proc/stat`` around the trial), for
  the trial's self-check and the record, unless the generator already reported it;
- :class:`StallWatchedGenerator`: each trial says the longest its chain's first hop was kept
  from running (``first_hop_held_s``, :mod:`sfclab.kernel.stall`);
- :class:`CeilingGenerator`: each trial carries the calibrated ceiling for its frame size
  (``ceiling_pps``, see :mod:`.calibrate`), so it can say it was ``generator_bound``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MeasurementError
from ..kernel.stall import StallMeter
from .cores import CoreLayout
from .cpu import read_proc_stat, run_ns, usage
from .generator import PacketGenerator, Trial
from .loss import LossLocator


class PairedGenerator(PacketGenerator):
    def __init__(self, gens: Sequence[PacketGenerator], names: Sequence[str]):
        self.gens = list(gens)
        self.names = list(names)

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        results: list[Trial | None] = [None] * len(self.gens)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                results[i] = self.gens[i].trial(offered_pps, duration_s, size, ramp_s)
            except BaseException as e:  # reported below, after every pair finished
                errors.append(e)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(self.gens))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        done = [r for r in results if r is not None]
        if len(done) != len(self.gens):
            raise MeasurementError("a pair's trial returned nothing")
        for name, r in zip(self.names, done):
            r.raw = {**r.raw, "pair": name}
        return Trial(offered_pps=offered_pps, duration_s=duration_s, size=size,
                     sent=sum(r.sent for r in done), received=sum(r.received for r in done),
                     sent_pps=sum(r.sent_pps for r in done),
                     received_pps=sum(r.received_pps for r in done),
                     reordered=sum(r.reordered for r in done),
                     duplicated=sum(r.duplicated for r in done), pairs=done,
                     sent_total=sum(r.sent_whole for r in done),
                     received_total=sum(r.received_whole for r in done),
                     raw={"pairs": [r.raw for r in done]})

    def close(self) -> None:
        for g in self.gens:
            g.close()


#: drop reasons under which each receiver frees the probes it counted (not loss)
COUNTED_AS = {"kernel": ("NOT_SPECIFIED", "TC_INGRESS"), "xdp": ("NOT_SPECIFIED",),
              "tc": ("TC_INGRESS",), "socket": ()}
#: drop reasons that are a receiver's own failure to take what arrived (the measurement's)
RECEIVER_OWN = {"socket": ("SOCKET_RCVBUFF",)}


class LocatedGenerator(PacketGenerator):
    """``receivers``: receiving node -> its sink (``kernel``, ``xdp``, ``tc``, ``socket``).
    An in-kernel sink frees every probe it counts (at XDP with drop reason NOT_SPECIFIED, at
    tcx ingress with TC_INGRESS): those are not loss.  A socket sink's buffer overflows
    (SOCKET_RCVBUFF there) are the receiver's own drops, reported as ``receiver_drops``."""

    def __init__(self, gen: PacketGenerator, locator: LossLocator,
                 receivers: Mapping[str, str] | None = None):
        self.gen = gen
        self.locator = locator
        receivers = receivers or {}
        self.ignore = {(node, why) for node, sink in receivers.items()
                       for why in COUNTED_AS.get(sink, ())}
        self.receiver = {(node, why) for node, sink in receivers.items()
                         for why in RECEIVER_OWN.get(sink, ())}

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        before = self.locator.mark()
        t = self.gen.trial(offered_pps, duration_s, size, ramp_s)
        t.located = self.locator.since(before, self.ignore, self.receiver).to_dict(
            lost=t.lost_total)
        return t

    def close(self) -> None:
        self.gen.close()


class PlacedGenerator(PacketGenerator):
    """Adds to every trial where its parts ran, as the layout placed them."""

    def __init__(self, gen: PacketGenerator, layout: CoreLayout):
        self.gen = gen
        self.layout = layout

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        t = self.gen.trial(offered_pps, duration_s, size, ramp_s)
        t.raw = {**t.raw, "placement": self.layout.placement()}
        return t

    def close(self) -> None:
        self.gen.close()


class CoreWatchedGenerator(PacketGenerator):
    """``roles``: role ("generator", "receiver", "chain") -> the cores it was given.  Each
    trial's ``cores`` is role -> ``{"cpus", "busy_pct", "softirq_pct"}``, the mean over the
    role's cores: from the per-core figures the generator read over its sending
    (``raw["cores"]``), else between the trial's start and end (the drain included).

    ``chain_threads``: the threads that run the chain's work (the first hop's pinned NAPI
    threads, in whose softirq processing every later hop and the sink run, and the chain
    cores' ksoftirqd).  Their run time over the trial is the chain role's ``threads_cpu_s``:
    the chain's own CPU, which other programs' load on its cores does not add to (as it does
    to ``busy_pct``).  ``threads_frames`` is what the receiver took over the same span (the
    whole trial, ramp and drain included: ``received_total``), the divisor of a per-frame
    figure (the window's ``received`` leaves the ramp's frames out, whose work is counted)."""

    def __init__(self, gen: PacketGenerator, roles: dict[str, list[int]],
                 chain_threads: list[int] | None = None):
        self.gen = gen
        self.roles = {k: list(v) for k, v in roles.items()}
        self.chain_threads = list(chain_threads or [])

    def _threads_ns(self) -> int:
        return sum(run_ns(p) or 0 for p in self.chain_threads)

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        before, ns = read_proc_stat(), self._threads_ns()
        t = self.gen.trial(offered_pps, duration_s, size, ramp_s)
        ns = self._threads_ns() - ns
        if t.cores is None:
            # the native generator already read every core over its sending (``raw["cores"]``)
            per_core = t.raw.get("cores")
            if not isinstance(per_core, dict):
                per_core = usage(before, read_proc_stat())["cores"]
            t.cores = role_shares(per_core, self.roles)
        if self.chain_threads and t.cores and "chain" in t.cores:
            t.cores["chain"]["threads_cpu_s"] = round(ns / 1e9, 6)
            t.cores["chain"]["threads_frames"] = t.received_whole
        return t

    def close(self) -> None:
        self.gen.close()


def role_shares(per_core: dict[str, dict[str, float]],
                roles: dict[str, list[int]]) -> dict[str, Any]:
    """Mean busy and softirq percentages of each role's cores (a core gone is left out)."""
    out: dict[str, Any] = {}
    for role, cpus in roles.items():
        seen = [per_core[f"cpu{c}"] for c in cpus if f"cpu{c}" in per_core]
        n = max(len(seen), 1)
        out[role] = {"cpus": list(cpus),
                     "busy_pct": round(sum(c["busy"] for c in seen) / n, 1),
                     "softirq_pct": round(sum(c["softirq"] for c in seen) / n, 1)}
    return out


class StallWatchedGenerator(PacketGenerator):
    """Each trial says the longest its chain's first hop was kept from running once it had
    work (``first_hop_held_s``): ``meter`` watches the first hop's pinned NAPI threads
    (:mod:`sfclab.kernel.stall`), read before and after the trial."""

    def __init__(self, gen: PacketGenerator, meter: StallMeter):
        self.gen = gen
        self.meter = meter

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        self.meter.read()
        t = self.gen.trial(offered_pps, duration_s, size, ramp_s)
        held = max(h.longest_s for h in self.meter.read().values())
        for one in [t, *(t.pairs or [])]:  # each pair's trial checks itself
            one.first_hop_held_s = round(held, 6)
        return t

    def close(self) -> None:
        self.gen.close()


class CeilingGenerator(PacketGenerator):
    """``ceiling(size)``: the calibrated ceiling for a frame size, or None."""

    def __init__(self, gen: PacketGenerator, ceiling: Callable[[int | str], float | None]):
        self.gen = gen
        self.ceiling = ceiling

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        t = self.gen.trial(offered_pps, duration_s, size, ramp_s)
        if t.ceiling_pps is None:
            t.ceiling_pps = self.ceiling(size)
        return t

    def close(self) -> None:
        self.gen.close()
