"""The latency histogram (sfclab.traffic.histogram): the receiver's bucket layout, percentiles
within the layout's precision, merging, the sink's sparse form; and latency at shares of the
NDR (``ndr --latency``) on the fake generator."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfclab.traffic.fake import FakeGenerator
from sfclab.traffic.histogram import (BUCKETS, LatencyHistogram, bucket_index, bucket_value,
                                      from_sink)
from sfclab.traffic.native import latency_of, latency_source
from sfclab.traffic.ndrlatency import latency_at_shares, latency_metrics


def test_layout_matches_the_receivers_hist_h():
    # values below 128 ns have a bucket each; then 64 buckets per power of two
    assert [bucket_index(v) for v in (0, 1, 127)] == [0, 1, 127]
    assert bucket_index(128) == 128 and bucket_index(129) == 128 and bucket_index(130) == 129
    assert bucket_index(256) == 192 and bucket_index(2 ** 45) == BUCKETS - 1
    assert bucket_value(128) == 128.5 and bucket_value(129) == 130.5
    assert bucket_index(10 ** 30) == BUCKETS - 1  # clamped, not out of range


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2 ** 45 - 1))
def test_a_buckets_middle_is_within_one_128th_of_its_values(ns):
    mid = bucket_value(bucket_index(ns))
    assert abs(mid - ns) <= max(ns / 128, 0.5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10 ** 10), min_size=1, max_size=2000),
       st.sampled_from([0.5, 0.9, 0.99, 0.999, 1.0]))
def test_percentiles_are_the_exact_ones_within_the_precision(values, q):
    h = LatencyHistogram().record_all(values)
    exact = sorted(values)[max(math.ceil(q * len(values)), 1) - 1]
    assert h.percentile(q) == pytest.approx(exact, rel=1 / 128, abs=0.5)
    assert h.percentile(q) <= max(values)


def test_summary_in_microseconds_and_merge():
    rng = random.Random(1)
    a = LatencyHistogram().record_all(int(rng.expovariate(1 / 20_000)) for _ in range(5000))
    b = LatencyHistogram().record_all([5_000_000] * 10)  # 10 probes of 5 ms
    s = LatencyHistogram().merge(a).merge(b).summary()
    assert s["count"] == 5010 and s["max"] == 5000.0
    assert 12 < s["p50"] < 16  # ln 2 x 20 us
    assert s["p50"] <= s["p90"] <= s["p99"] <= s["p99.9"] <= s["max"]
    assert s["p99.9"] == pytest.approx(5000, rel=0.01)  # the 5 ms tail shows at p99.9
    assert LatencyHistogram().summary() == {"count": 0}


def test_the_sinks_sparse_buckets_give_the_same_statistics():
    h = LatencyHistogram().record_all([100, 200, 300, 40_000, 41_000])
    sink = {"mode": "xdp", "latency_hist": [[i, n] for i, n in sorted(h.counts.items())],
            "latency_us": {"count": 5, "min": 0.1, "max": 41.0, "mean": h.sum_ns / 5 / 1e3}}
    g = from_sink(sink)
    assert g is not None and g.summary() == pytest.approx(h.summary())
    assert latency_of(sink) == pytest.approx(h.summary())
    assert latency_source(sink) == "softirq" and latency_source({"mode": "socket"}) == "socket"
    assert latency_of({"latency_us": {"p50": 3.0}}) == {"p50": 3.0}  # a sink without buckets
    with pytest.raises(ValueError):
        LatencyHistogram.from_buckets([[BUCKETS, 1]])


def test_latency_at_10_50_90_percent_of_the_ndr():
    gen = FakeGenerator(400_000, 600_000)
    rows = latency_at_shares(gen, 400_000, 64, 1.0, ramp_s=None)
    assert [r["rate_pps"] for r in rows] == [40_000, 200_000, 360_000]
    assert [t.offered_pps for t in gen.trials] == [40_000, 200_000, 360_000]
    p50 = [r["latency_us"]["p50"] for r in rows]
    assert p50 == sorted(p50)  # the fake's queue grows with the load
    m = latency_metrics(rows)
    assert m["ndr90pct_latency_p99_us"] == rows[2]["latency_us"]["p99"]
    assert m["ndr10pct_latency_p99_9_us"] == rows[0]["latency_us"]["p99.9"]


def test_latency_at_a_share_is_rerun_when_limited():
    gen = FakeGenerator(400_000, 600_000, receiver_ceiling_pps=300_000)
    rows = latency_at_shares(gen, 400_000, 64, 1.0, ramp_s=None)
    assert [r["measurement_limited"] is False for r in rows] == [True, True, False]
    assert len(gen.trials) == 2 + 3  # the 90 % trial and its two re-runs
