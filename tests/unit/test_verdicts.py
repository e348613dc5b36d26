"""The verdict rule (sfclab.experiments.verdicts) on synthetic intervals and samples: every
class and its edges, and Fieller's interval of a ratio against known values."""

from __future__ import annotations

import math

import pytest

from sfclab.experiments.stats import Summary, summarize
from sfclab.experiments.verdicts import (HOLDS, INCONCLUSIVE, NOT, UNTESTABLE, Claim, Interval,
                                         judge, judge_samples, ratio_interval, welch_df)

RANGE = Claim("range", expect=(1.7, 2.5), tolerance=0.1)  # widened: 1.53-2.75
MORE, LESS = Claim("more"), Claim("less")
EQUIV = Claim("equivalent", margins=(0.85, 1.15))


def iv(lo: float, hi: float) -> Interval:
    return Interval((lo + hi) / 2, lo, hi)


@pytest.mark.parametrize("claim, lo, hi, want", [
    (RANGE, 1.8, 2.4, HOLDS),                 # inside the published range
    (RANGE, 1.53, 2.75, HOLDS),               # touching both ends of the widened range
    (RANGE, 1.6, 2.0, HOLDS),                 # inside only thanks to the tolerance
    (RANGE, 1.5, 2.0, INCONCLUSIVE),          # reaches below the widened range
    (RANGE, 0.61, 1.57, INCONCLUSIVE),        # the page's P1 case: reaches into the range
    (RANGE, 1.0, 1.53, INCONCLUSIVE),         # touching the widened range's low end
    (RANGE, 1.0, 1.52, NOT),                  # wholly below
    (RANGE, 2.76, 4.0, NOT),                  # wholly above
    (RANGE, 1.0, 5.0, INCONCLUSIVE),          # wider than the range on both sides
    (MORE, 1.01, 3.0, HOLDS),
    (MORE, 1.0, 3.0, INCONCLUSIVE),           # touching no effect has not excluded it
    (MORE, 0.5, 3.0, INCONCLUSIVE),
    (MORE, 0.5, 0.9, NOT),                    # the wrong direction
    (LESS, 0.5, 0.9, HOLDS),
    (LESS, 1.1, 1.3, NOT),                    # the wrong direction
    (LESS, 0.9, 1.0, INCONCLUSIVE),
])
def test_rule_on_95_intervals(claim, lo, hi, want):
    assert judge(claim, iv(lo, hi)).verdict == want


@pytest.mark.parametrize("ci95, ci90, want", [
    ((0.88, 1.12), (0.9, 1.1), HOLDS),          # 90 % interval inside the margins
    ((0.8, 1.16), (0.85, 1.15), HOLDS),         # 90 % touching both margins
    ((0.8, 1.2), (0.84, 1.1), INCONCLUSIVE),    # 90 % reaches past the low margin
    ((1.2, 1.9), (1.25, 1.8), NOT),             # 95 % wholly above: the labels do matter
    ((0.5, 0.84), (0.55, 0.8), NOT),            # wholly below
    ((0.5, 0.85), (0.55, 0.8), INCONCLUSIVE),   # 95 % touching the margin
])
def test_equivalence_by_two_one_sided_tests(ci95, ci90, want):
    assert judge(EQUIV, iv(*ci95), iv(*ci90)).verdict == want


def test_not_testable_is_reported_and_never_scored():
    c = Claim("range", expect=(0.9, 1.05), not_testable="userspace OVS for kernel OVS")
    v = judge(c, iv(0.5, 0.55))  # wholly outside: would be "does not hold"
    assert v.verdict == UNTESTABLE and "userspace OVS" in v.reason
    assert judge(c, iv(0.95, 1.0)).verdict == UNTESTABLE


@pytest.mark.parametrize("ci", [Interval(2.0, math.nan, math.nan),
                                Interval(2.0, -math.inf, math.inf),
                                Interval(2.0, 0.5, math.inf)])
def test_no_interval_is_inconclusive_for_every_kind(ci):
    for claim in (RANGE, MORE, LESS, EQUIV):
        assert judge(claim, ci, ci).verdict == INCONCLUSIVE


def test_n_1_is_inconclusive_even_far_outside_the_range():
    # O5/O6 on the old page: one repetition each, ratio 0.07 against 0.8-1.25
    a, b = summarize([5.16]), summarize([74.9])
    v, ci = judge_samples(Claim("equivalent", margins=(0.8, 1.25)), a, b)
    assert v.verdict == INCONCLUSIVE and not ci.defined
    assert ci.estimate == pytest.approx(5.16 / 74.9)
    v, _ = judge_samples(RANGE, summarize([2.0]), summarize([1.0, 1.01, 0.99]))
    assert v.verdict == INCONCLUSIVE


def test_n_2_gives_a_wide_but_usable_interval():
    a, b = summarize([20.0, 23.0]), summarize([10.0, 10.6])
    ci = ratio_interval(a, b)
    assert ci.defined and ci.low < 2.09 < ci.high
    assert ci.high - ci.low > 2  # t with about 1 degree of freedom is large
    assert judge_samples(RANGE, a, b)[0].verdict == INCONCLUSIVE
    # the same means from 8 repetitions each decide it
    a8 = summarize([20.0, 23.0] * 4)
    b8 = summarize([10.0, 10.6] * 4)
    assert judge_samples(RANGE, a8, b8)[0].verdict == HOLDS


def test_zero_variance_on_both_sides_is_inconclusive():
    # O1: both sides at the top offered rate in every repetition: no spread, a ceiling
    a, b = summarize([400.0] * 3), summarize([400.0] * 3)
    v, ci = judge_samples(Claim("range", expect=(0.5, 0.9)), a, b)
    assert v.verdict == INCONCLUSIVE and not ci.defined and ci.estimate == 1.0


def test_zero_variance_on_one_side_uses_the_other_sides_degrees_of_freedom():
    a, b = summarize([300.0, 310.0, 290.0]), summarize([400.0] * 3)
    assert welch_df(a, b, 0.75) == pytest.approx(2.0)
    ci = ratio_interval(a, b)
    half = 4.302653 * 10.0 / math.sqrt(3) / 400.0  # t(0.975, 2) · s / √n / mean(b)
    assert ci.low == pytest.approx(0.75 - half, rel=1e-5)
    assert ci.high == pytest.approx(0.75 + half, rel=1e-5)


def test_b_mean_zero_has_no_interval():
    v, ci = judge_samples(MORE, summarize([1.0, 2.0]), summarize([0.0, 0.0]))
    assert v.verdict == INCONCLUSIVE and math.isnan(ci.estimate)


def test_b_interval_reaching_zero_gives_an_unbounded_interval():
    # b's mean is not distinguishable from 0: the ratio can be arbitrarily large
    a, b = summarize([100.0, 101.0, 99.0]), summarize([0.0, 1300.0, 20.0])
    ci = ratio_interval(a, b)
    assert math.isinf(ci.high) and not ci.defined
    assert judge_samples(MORE, a, b)[0].verdict == INCONCLUSIVE


def test_fieller_against_a_hand_computed_case():
    # ā = 10, b̄ = 5, s²/n = 0.25 each, df = 10 (fixed here through Summary directly)
    a = Summary(n=4, mean=10.0, std=1.0, ci_low=math.nan, ci_high=math.nan)
    b = Summary(n=4, mean=5.0, std=1.0, ci_low=math.nan, ci_high=math.nan)
    df = welch_df(a, b, 2.0)
    # va = 0.25, vb = 4 · 0.25 = 1 -> (1.25)² / (0.25²/3 + 1/3)
    assert df == pytest.approx(1.5625 / ((0.0625 + 1) / 3))
    ci = ratio_interval(a, b)
    from scipy import stats
    t = stats.t.ppf(0.975, df)
    for rho in (ci.low, ci.high):  # the ends solve (ā − ρ b̄)² = t² (va + ρ² vb)
        assert (10 - 5 * rho) ** 2 == pytest.approx(t * t * (0.25 + rho * rho * 0.25))
    assert ci.low < 2.0 < ci.high
    assert (ci.high - 2.0) > (2.0 - ci.low)  # skewed upwards, as a ratio's should be


def test_fieller_covers_the_true_ratio_about_95_percent():
    import random
    rng = random.Random(7)
    hits = trials = 0
    for _ in range(2000):
        a = summarize([rng.gauss(20.0, 2.0) for _ in range(5)])
        b = summarize([rng.gauss(10.0, 3.0) for _ in range(4)])
        ci = ratio_interval(a, b)
        if ci.defined:
            trials += 1
            hits += ci.low <= 2.0 <= ci.high
    assert trials > 1900
    assert 0.93 <= hits / trials <= 0.975
