"""Latency statistics: a log-linear (HDR-style) histogram of one-way delays in nanoseconds.

The bucket layout is the receiver's own (``include/hist.h``, shared by the socket sink and
the XDP/tcx sink's eBPF program), so the sink can hand its bucket counts over unchanged:

- a value below ``2**SUB_BITS`` ns (128 ns) has a bucket of its own;
- above, every power of two is split into ``2**(SUB_BITS - 1)`` (64) equal buckets, so a
  bucket's middle is within 1/128 of any value in it (relative error under 0.8 %);
- values above ``2**(MAX_MSB + 1)`` ns (about 9.8 hours) are clamped into the last bucket.

A :class:`LatencyHistogram` holds ``index -> count``; :meth:`~LatencyHistogram.percentile` is
the value of the bucket holding the ``ceil(q * count)``-th smallest delay (at most the largest
delay recorded); :meth:`~LatencyHistogram.summary` gives ``p50``, ``p90``, ``p99``, ``p99.9``,
``max`` (and ``min``, ``mean``, ``count``) in microseconds, the shape of ``Trial.latency_us``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

SUB_BITS = 7
HALF = 1 << (SUB_BITS - 1)
MAX_MSB = 44
BUCKETS = (MAX_MSB - SUB_BITS + 2) * HALF + HALF
#: the percentiles every latency result reports, as (name, quantile)
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999))


def bucket_index(ns: int) -> int:
    """The bucket of a delay of ``ns`` nanoseconds (``hist_index`` of hist.h)."""
    if ns < 0:
        raise ValueError(f"a delay cannot be negative: {ns}")
    if ns < (1 << SUB_BITS):
        return ns
    msb = ns.bit_length() - 1
    if msb > MAX_MSB:
        ns, msb = (1 << (MAX_MSB + 1)) - 1, MAX_MSB
    shift = msb - (SUB_BITS - 1)
    return shift * HALF + (ns >> shift)


def bucket_value(i: int) -> float:
    """The middle of bucket ``i``'s range, in ns (``hist_value`` of the sink)."""
    if not 0 <= i < BUCKETS:
        raise ValueError(f"no bucket {i} (0..{BUCKETS - 1})")
    if i < (1 << SUB_BITS):
        return float(i)
    shift = i // HALF - 1
    m = i - shift * HALF
    return ((m << shift) + ((m + 1) << shift) - 1) / 2.0


class LatencyHistogram:
    """Counts of delays per bucket, with the exact minimum, maximum and sum kept beside."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.min_ns: int | None = None
        self.max_ns = 0
        self.sum_ns = 0

    def record(self, ns: int, n: int = 1) -> None:
        if n <= 0:
            return
        i = bucket_index(ns)
        self.counts[i] = self.counts.get(i, 0) + n
        self.count += n
        self.sum_ns += ns * n
        self.max_ns = max(self.max_ns, ns)
        self.min_ns = ns if self.min_ns is None else min(self.min_ns, ns)

    def record_all(self, values_ns: Iterable[int]) -> LatencyHistogram:
        for v in values_ns:
            self.record(v)
        return self

    @classmethod
    def from_buckets(cls, buckets: Iterable[Iterable[int]], *, max_ns: int | None = None,
                     min_ns: int | None = None, sum_ns: int | None = None) -> LatencyHistogram:
        """From the sink's sparse ``[[index, count], ...]``; without the exact extremes and
        sum, the buckets' middles stand for them."""
        h = cls()
        for pair in buckets:
            i, n = (int(x) for x in pair)
            bucket_value(i)  # a bucket that does not exist is an error
            if n < 0:
                raise ValueError(f"bucket {i} has a negative count {n}")
            if n:
                h.counts[i] = h.counts.get(i, 0) + n
                h.count += n
        if h.counts:
            lo, hi = min(h.counts), max(h.counts)
            h.min_ns = int(bucket_value(lo)) if min_ns is None else min_ns
            h.max_ns = int(bucket_value(hi)) if max_ns is None else max_ns
            h.sum_ns = (int(sum(bucket_value(i) * n for i, n in h.counts.items()))
                        if sum_ns is None else sum_ns)
        return h

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        for i, n in other.counts.items():
            self.counts[i] = self.counts.get(i, 0) + n
        self.count += other.count
        self.sum_ns += other.sum_ns
        self.max_ns = max(self.max_ns, other.max_ns)
        if other.min_ns is not None:
            self.min_ns = other.min_ns if self.min_ns is None else min(self.min_ns, other.min_ns)
        return self

    def percentile(self, q: float) -> float:
        """The delay (ns) at quantile ``q`` in (0, 1]; 0 for an empty histogram."""
        if not 0 < q <= 1:
            raise ValueError(f"a quantile is in (0, 1], not {q}")
        if not self.count:
            return 0.0
        want = max(math.ceil(q * self.count), 1)
        acc = 0
        for i in sorted(self.counts):
            acc += self.counts[i]
            if acc >= want:
                return min(bucket_value(i), float(self.max_ns))
        return float(self.max_ns)

    def summary(self) -> dict[str, float]:
        """Percentiles, max, min and mean in µs, and the count (empty: ``{"count": 0}``)."""
        if not self.count:
            return {"count": 0}
        out = {name: self.percentile(q) / 1e3 for name, q in PERCENTILES}
        out.update(max=self.max_ns / 1e3, min=(self.min_ns or 0) / 1e3,
                   mean=self.sum_ns / self.count / 1e3, count=float(self.count))
        return out


def from_sink(report: Mapping[str, object]) -> LatencyHistogram | None:
    """The histogram a sink's snapshot carries (``latency_hist``: sparse buckets, with
    ``latency_us`` giving the exact min, max and mean), or None when it has none."""
    buckets = report.get("latency_hist")
    if not isinstance(buckets, list):
        return None
    lat = report.get("latency_us")
    exact: dict[str, int | None] = {"max_ns": None, "min_ns": None, "sum_ns": None}
    if isinstance(lat, Mapping) and lat.get("count"):
        n = int(lat["count"])
        exact = {"max_ns": round(float(lat["max"]) * 1e3),
                 "min_ns": round(float(lat["min"]) * 1e3),
                 "sum_ns": round(float(lat["mean"]) * 1e3 * n)}
    return LatencyHistogram.from_buckets(buckets, **exact)
