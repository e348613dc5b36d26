"""A packet generator that simulates a chain of known capacity, for testing rate searches.

:class:`FakeGenerator` answers :meth:`~sfclab.traffic.generator.PacketGenerator.trial` from a
model instead of packets.  The chain it models loses, as a function of the rate it actually
receives (the generator's *sent* rate, which can be below the offered rate):

* nothing up to ``ndr_pps``;
* a small constant ratio ``plateau_loss`` (default 0.05 %: above the usual NDR goal of 0.001 %,
  below the usual PDR goal of 0.1 %) up to ``pdr_pps``;
* beyond ``pdr_pps``, everything above the capacity ``pdr_pps`` (``1 - pdr/rate``), and at
  least ``heavy_loss`` (default 1 %), so the PDR boundary is sharp.

So with the default goals the true NDR is ``ndr_pps`` and the true PDR is ``pdr_pps``.

``noise`` (relative standard deviation) moves both thresholds independently in each trial, drawn
from a ``random.Random(seed)``: the same seed gives the same sequence of trials.  ``ceiling_pps``
caps what the generator can send (``sent_pps = min(offered, ceiling)``), which is how a slow
generator looks to the search.  An offered rate of ``None`` (as fast as possible) sends at the
ceiling, or at ``line_rate_pps`` without one.  ``receiver_ceiling_pps`` is the most the
receiver takes: above it the receiver drops the excess itself (``receiver_drops``, counted as
lost too), which makes the trial measurement-limited (:mod:`.limits`); ``receiver_stalls`` is the
chance that a trial's receiver is starved at any rate (it drops 1 % itself), drawn from the same
``random.Random(seed)``.  No time passes: a trial returns at once and is appended to ``trials``.
"""

from __future__ import annotations

import math
import random

from .generator import PacketGenerator, Trial


class FakeGenerator(PacketGenerator):
    def __init__(self, ndr_pps: float = 400_000, pdr_pps: float = 600_000, *,
                 plateau_loss: float = 0.0005, heavy_loss: float = 0.01,
                 line_rate_pps: float = 2_000_000, ceiling_pps: float | None = None,
                 noise: float = 0.0, seed: int = 0, base_latency_us: float = 20.0,
                 receiver_ceiling_pps: float | None = None, receiver_stalls: float = 0.0):
        if not 0 < ndr_pps <= pdr_pps:
            raise ValueError("need 0 < ndr_pps <= pdr_pps")
        if ceiling_pps is not None and ceiling_pps <= 0:
            raise ValueError("ceiling_pps must be positive")
        self.ndr_pps = float(ndr_pps)
        self.pdr_pps = float(pdr_pps)
        self.plateau_loss = plateau_loss
        self.heavy_loss = heavy_loss
        self.line_rate_pps = float(line_rate_pps)
        self.ceiling_pps = ceiling_pps
        self.noise = noise
        self.rng = random.Random(seed)
        self.base_latency_us = base_latency_us
        self.receiver_ceiling_pps = receiver_ceiling_pps
        self.receiver_stalls = receiver_stalls
        self.trials: list[Trial] = []
        self.ramps: list[float | None] = []
        self.closed = False

    def loss_at(self, rate_pps: float, ndr: float | None = None, pdr: float | None = None) -> float:
        """The model's loss ratio when the chain receives ``rate_pps`` (no noise)."""
        ndr = self.ndr_pps if ndr is None else ndr
        pdr = self.pdr_pps if pdr is None else pdr
        if rate_pps <= ndr:
            return 0.0
        if rate_pps <= pdr:
            return self.plateau_loss
        return max(self.heavy_loss, 1.0 - pdr / rate_pps)

    def _latency(self, rate_pps: float) -> dict[str, float]:
        load = min(rate_pps / self.pdr_pps, 2.0)
        p50 = self.base_latency_us * (1.0 + load ** 4)
        return {"p50": p50, "p90": p50 * 1.5, "p99": p50 * 3.0, "p99.9": p50 * 5.0,
                "max": p50 * 10.0}

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        if duration_s <= 0:
            raise ValueError("duration_s must be positive")
        if offered_pps is not None and offered_pps <= 0:
            raise ValueError("offered_pps must be positive")
        cap = self.ceiling_pps if self.ceiling_pps is not None else self.line_rate_pps
        sent_pps = cap if offered_pps is None else min(offered_pps, cap)
        ndr, pdr = self.ndr_pps, self.pdr_pps
        if self.noise:
            ndr *= 1.0 + self.rng.gauss(0.0, self.noise)
            pdr = max(pdr * (1.0 + self.rng.gauss(0.0, self.noise)), ndr)
        loss = self.loss_at(sent_pps, ndr, pdr)
        sent = int(round(sent_pps * duration_s))
        lost = min(sent, math.ceil(sent * loss)) if loss > 0 else 0
        drops = 0
        rcap = self.receiver_ceiling_pps
        if rcap is not None and sent_pps > rcap:
            drops = int(round((sent_pps - rcap) * duration_s))
        if self.receiver_stalls and self.rng.random() < self.receiver_stalls:
            drops = max(drops, math.ceil(sent * 0.01))
        lost = min(sent, max(lost, drops))
        received = sent - lost
        t = Trial(offered_pps=offered_pps, duration_s=duration_s, size=size, sent=sent,
                  received=received, sent_pps=sent / duration_s,
                  received_pps=received / duration_s, latency_us=self._latency(sent_pps),
                  raw={"model": {"ndr_pps": ndr, "pdr_pps": pdr, "loss": loss}},
                  window_s=duration_s, receiver_drops=drops)
        self.trials.append(t)
        self.ramps.append(ramp_s)
        return t

    def close(self) -> None:
        self.closed = True
