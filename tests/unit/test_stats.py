"""Summaries and series against values computed by hand (t quantiles from the printed table)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from sfclab.experiments.stats import (metric_names, relative_to_baseline, series, summarize,
                                      swept_params)

T_975 = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262}  # Student t, two-sided 95 %


def test_summary_known_values():
    s = summarize([1, 2, 3, 4, 5])
    assert s.n == 5 and s.mean == 3
    assert s.std == pytest.approx(math.sqrt(2.5))
    half = T_975[4] * math.sqrt(2.5) / math.sqrt(5)
    assert s.ci_low == pytest.approx(3 - half, abs=1e-3)
    assert s.ci_high == pytest.approx(3 + half, abs=1e-3)
    assert s.half_width == pytest.approx(half, abs=1e-3)


def test_summary_two_values_and_constant():
    s = summarize([10.0, 12.0])
    assert s.std == pytest.approx(math.sqrt(2))
    assert s.half_width == pytest.approx(T_975[1] * math.sqrt(2) / math.sqrt(2), abs=1e-2)
    c = summarize([7.0, 7.0, 7.0])
    assert c.std == 0 and c.ci_low == c.ci_high == 7.0


def test_summary_small_and_nan():
    one = summarize([4.0])
    assert one.n == 1 and one.mean == 4.0 and math.isnan(one.std) and math.isnan(one.ci_low)
    assert math.isnan(summarize([]).mean)
    s = summarize([1.0, float("nan"), 3.0])
    assert s.n == 2 and s.mean == 2.0
    assert summarize([1.0, 2.0, 3.0]).format(3).startswith("2 ± ")
    assert one.format() == "4"


def test_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = random.Random(5)
    hits = 0
    trials = 2000
    for _ in range(trials):
        s = summarize([rng.gauss(100.0, 15.0) for _ in range(5)])
        hits += s.ci_low <= 100.0 <= s.ci_high
    assert 0.93 <= hits / trials <= 0.97


def runs():
    out = []
    for n in (5, 2, 3):
        for f in (1, 8):
            for rep, noise in enumerate((-1.0, 0.0, 1.0)):
                out.append(SimpleNamespace(params={"lab.chain.length": n, "measure.flows": f},
                                           metrics={"bps": 100.0 * f / n + noise, "cpu.x": 1.0},
                                           status="done", repetition=rep))
    out.append(SimpleNamespace(params={"lab.chain.length": 2, "measure.flows": 1},
                               metrics={}, status="failed"))
    return out


def test_series_groups_by_the_other_parameters():
    ss = series(runs(), "bps", "lab.chain.length")
    assert [s.label for s in ss] == [{"measure.flows": 1}, {"measure.flows": 8}]
    assert ss[0].name == "flows 1"
    xs, means, halves = ss[1].values()
    assert xs == [2, 3, 5]
    assert means == pytest.approx([400.0, 800 / 3, 160.0])
    assert [p.n for p in ss[1].points] == [3, 3, 3]  # the failed run is left out
    assert halves[0] == pytest.approx(T_975[2] * 1.0 / math.sqrt(3), abs=1e-3)


def test_series_without_other_parameters():
    ss = series(runs(), "bps", "measure.flows", by=[])
    assert len(ss) == 1 and ss[0].name == "all runs" and ss[0].xs == [1, 8]
    assert ss[0].points[0].n == 9


def test_swept_params_and_metric_names():
    assert swept_params(runs()) == ["lab.chain.length", "measure.flows"]
    assert metric_names(runs()) == ["bps", "cpu.x"]


def test_relative_to_baseline():
    s = series(runs(), "bps", "lab.chain.length")[0]
    r = relative_to_baseline(s)
    assert r.xs == s.xs
    assert r.points[0].mean == 1.0
    assert r.points[2].mean == pytest.approx((100 / 5) / (100 / 2))
    # relative widths add in quadrature
    b, p = s.points[0], s.points[2]
    want = r.points[2].mean * math.hypot(b.half_width / b.mean, p.half_width / p.mean)
    assert r.points[2].half_width == pytest.approx(want)
    r3 = relative_to_baseline(s, baseline=3)
    assert r3.points[1].mean == 1.0
