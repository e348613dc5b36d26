"""The packet-generator interface every rate measurement (curve, NDR/PDR, latency) is written
against, so the search logic can run on a fake and the real native generator alike.

One *trial* offers a constant packet rate for a duration, stops, lets queues drain, and only then
reads the counters.  Every figure of a trial is over one interval, its measured window
(``window_s``; for the native generator the span of send time after the ramp, see
:mod:`.window`), as RFC 2544 counts frames received over the offered duration:

- ``sent``: frames the generator put on the wire inside the window; ``sent_pps = sent / window_s``;
- ``received``: those of them that arrived, whenever they arrived (late frames are drained
  before counting); ``received_pps = received / window_s``;
- so ``received <= sent``, ``received_pps <= sent_pps`` and ``loss_ratio = 1 - received / sent``
  always hold (with several pairs: in each pair; the trial's loss ratio is the worst pair's).

Loss is counted against what was sent, never against what was asked for.  A trial checks
itself (:mod:`.limits`): ``measurement_limited`` is the reason the tools, not the chain, set
its figures (the generator fell short of the offered rate, the receiver dropped or saturated),
or None; ``generator_limited`` is the generator's part of that.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any

from . import limits

#: a generator that sent less than this fraction of the offered rate is generator-limited
GENERATOR_LIMIT_TOLERANCE = limits.GENERATOR_TOLERANCE


@dataclass
class Trial:
    """Counters of one trial, read after traffic stopped and queues drained."""

    offered_pps: float | None  # None: as fast as possible
    duration_s: float
    size: int | str  # frame size in bytes, or "imix"
    sent: int
    received: int
    sent_pps: float
    received_pps: float
    reordered: int = 0
    duplicated: int = 0
    latency_us: dict[str, float] = field(default_factory=dict)  # p50, p90, p99, p99.9, max
    #: where arrivals were timestamped: "softirq" (cannot wait in the receiver's queue) or
    #: "socket" (after it); None: not said
    latency_source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    #: where the lost packets died (loss_by_node, loss_by_reason, unaccounted ...), when a
    #: loss locator watched the trial (see :mod:`sfclab.traffic.loss`)
    located: dict[str, Any] | None = None
    #: several sender -> receiver pairs at once: each pair's own trial (the totals are theirs)
    pairs: list[Trial] | None = None
    #: the whole trial's counts (ramp and drain included) when ``sent``/``received`` are those of
    #: a measured window (the native generator, see :mod:`sfclab.traffic.window`); kernel drop
    #: counters see these
    sent_total: int | None = None
    received_total: int | None = None
    #: the interval every figure is over (None: ``duration_s``)
    window_s: float | None = None
    #: frames the receiver dropped itself (None: it cannot tell)
    receiver_drops: int | None = None
    #: the receiver's own verdict that it could not keep up (None: it cannot tell)
    receiver_saturated: bool | None = None
    #: where each side ran and how busy its cores were: role ("generator", "receiver",
    #: "chain") -> {"cpus": [...], "busy_pct": ..., "softirq_pct": ...}
    cores: dict[str, Any] | None = None
    #: the calibrated generator-to-receiver ceiling for this frame size, when known
    ceiling_pps: float | None = None
    #: the most frames that were due and not yet sent at once inside the window (the generator
    #: was not run for a while), and how many of those it never sent: with more than 64 due
    #: (the xdp engine: 1 ms of frames, if more) it sends the last 64 and skips the older ones
    #: rather than send them all back to back, a burst the offered rate never was (a chain's
    #: first hop in XDP holds 256 frames, the veth's ring); the skipped ones are not in
    #: ``sent`` (None: it cannot tell)
    generator_behind: int | None = None
    generator_skipped: int | None = None
    #: the longest the chain's first hop (its pinned NAPI thread) was kept from running once it
    #: had work, during the trial: its core not run by the machine (None: not watched)
    first_hop_held_s: float | None = None

    @property
    def lost(self) -> int:
        return max(self.sent - self.received, 0)

    @property
    def sent_whole(self) -> int:
        """Packets sent over the whole trial (ramp and drain included): ``sent_total`` when a
        window was measured, else ``sent``."""
        return self.sent if self.sent_total is None else self.sent_total

    @property
    def received_whole(self) -> int:
        """Packets received over the whole trial (ramp and drain included): ``received_total``
        when a window was measured, else ``received``."""
        return self.received if self.received_total is None else self.received_total

    @property
    def lost_total(self) -> int:
        """Packets lost over the whole trial (ramp included), what a loss locator can see."""
        if self.sent_total is None or self.received_total is None:
            return self.lost
        return max(self.sent_total - self.received_total, 0)

    @property
    def loss_ratio(self) -> float:
        """Lost over sent; with several pairs the worst pair's, so a loss goal holds for every
        pair at once."""
        if self.pairs:
            return max(p.loss_ratio for p in self.pairs)
        return self.lost / self.sent if self.sent else 0.0

    @property
    def pair_sent_pps(self) -> float:
        """What a sender sent per second at the rate a search asked for: with several pairs
        the least pair's (the offered rate is each pair's, the totals are the pairs' sums),
        else ``sent_pps``."""
        if self.pairs:
            return min(p.sent_pps for p in self.pairs)
        return self.sent_pps

    @property
    def generator_limited(self) -> bool:
        if self.pairs:
            return any(p.generator_limited for p in self.pairs)
        return limits.generator_short(self) is not None

    @property
    def measurement_limited(self) -> str | None:
        """Why the tools, not the chain, set this trial's figures (:mod:`.limits`), or None."""
        if self.pairs:
            found = [f"{p.raw.get('pair', i)}: {r}" for i, p in enumerate(self.pairs)
                     if (r := p.measurement_limited)]
            return "; ".join(found) if found else None
        return limits.limited_reason(self)

    @property
    def generator_bound(self) -> bool:
        """Offered above 90 % of the calibrated ceiling (a warning, see :mod:`.limits`)."""
        if self.pairs:
            return any(p.generator_bound for p in self.pairs)
        return limits.generator_bound(self.offered_pps, self.ceiling_pps)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        limited = self.measurement_limited
        d.update(lost=self.lost, loss_ratio=self.loss_ratio,
                 generator_limited=self.generator_limited,
                 measurement_limited=limited if limited else False,
                 generator_bound=self.generator_bound)
        if d["window_s"] is None:
            d["window_s"] = self.duration_s
        if self.pairs:
            d["pairs"] = [p.to_dict() for p in self.pairs]
        else:
            d.pop("pairs")
        for k in ("located", "sent_total", "received_total", "receiver_drops", "latency_source",
                  "receiver_saturated", "cores", "ceiling_pps", "generator_behind",
                  "generator_skipped", "first_hop_held_s"):
            if d[k] is None:
                d.pop(k)
        return d


class PacketGenerator(abc.ABC):
    """Offers UDP traffic from one lab node to another and counts what arrives."""

    @abc.abstractmethod
    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        """Offer ``offered_pps`` (None: maximum) for ``duration_s`` and return the counters.
        With ``ramp_s`` the rate climbs linearly from 0 to ``offered_pps`` over the first
        ``ramp_s`` seconds (a start without a burst that would fill queues at once)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """End any process the generator still owns."""

    def __enter__(self) -> "PacketGenerator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
