"""The packet-generator interface every rate measurement (curve, NDR/PDR, latency) is written
against, so the search logic can run on a fake and the real native generator alike.

One *trial* offers a constant packet rate for a duration, stops, lets queues drain, and only then
reads the counters.  Its rates and loss are counts over one span of send time divided by that
span (for the native generator the measured window after the ramp, see :mod:`.window`), never
what arrived over a longer span: a trial never reports a rate it did not reach.  ``sent`` is what the generator actually put on the wire; loss is counted
against it, never against what was asked for, and ``generator_limited`` says the generator could
not reach the offered rate (so the chain is not blamed for it).
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any

#: a generator that sent less than this fraction of the offered rate is generator-limited
GENERATOR_LIMIT_TOLERANCE = 0.97


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

    @property
    def lost(self) -> int:
        return max(self.sent - self.received, 0)

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
    def generator_limited(self) -> bool:
        if self.pairs:
            return any(p.generator_limited for p in self.pairs)
        if self.offered_pps is None:
            return False
        return self.sent_pps < GENERATOR_LIMIT_TOLERANCE * self.offered_pps

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(lost=self.lost, loss_ratio=self.loss_ratio,
                 generator_limited=self.generator_limited)
        if self.pairs:
            d["pairs"] = [p.to_dict() for p in self.pairs]
        else:
            d.pop("pairs")
        if self.located is None:
            d.pop("located")
        for k in ("sent_total", "received_total"):
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
