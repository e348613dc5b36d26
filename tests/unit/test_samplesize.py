"""Repetitions planned from a pilot's variance (sfclab.experiments.samplesize): the formula,
its edges, and by simulation that the planned number gives the rule of
sfclab.experiments.verdicts about the stated power."""

from __future__ import annotations

import math
import random

import pytest

from sfclab.experiments.samplesize import log_sigma, plan, power_at
from sfclab.experiments.stats import Summary, summarize
from sfclab.experiments.verdicts import HOLDS, Claim, judge_samples

MORE = Claim("more")
EQUIV = Claim("equivalent", margins=(0.8, 1.25))
RANGE = Claim("range", expect=(1.5, 3.0), tolerance=0.1)


def side(mean: float, cv: float, n: int) -> Summary:
    return Summary(n, mean, mean * cv, math.nan, math.nan)


def test_sigma_of_the_log_ratio_from_the_coefficients_of_variation():
    assert log_sigma(side(10, 0.3, 3), side(5, 0.4, 3)) == pytest.approx(0.5)
    assert math.isnan(log_sigma(summarize([1.0]), side(5, 0.4, 3)))
    assert math.isnan(log_sigma(side(10, 0.3, 3), Summary(3, 0.0, 1.0, 0, 0)))


def test_directional_plan_is_the_least_n_reaching_the_power():
    a, b = side(11, 0.1, 3), side(10, 0.1, 3)
    p = plan(MORE, a, b, cap=100)
    sigma = math.sqrt(0.02)
    assert p.sigma == pytest.approx(sigma)
    assert p.power >= 0.8 > power_at(p.repetitions - 1, sigma, MORE)
    # the normal approximation ((z.975 + z.8) σ / ln 1.1)² = 17.3: t needs a little more
    assert 18 <= p.repetitions <= 20


def test_more_spread_or_a_narrower_claim_needs_more_repetitions():
    ns = [plan(MORE, side(11, cv, 3), side(10, cv, 3), cap=100).repetitions
          for cv in (0.05, 0.1, 0.2)]
    assert ns[0] < ns[1] < ns[2]
    narrow = Claim("equivalent", margins=(0.95, 1.05))
    a, b = side(10, 0.05, 3), side(10, 0.05, 3)
    assert plan(EQUIV, a, b, cap=100).repetitions < plan(narrow, a, b, cap=100).repetitions
    wide = Claim("range", expect=(1.0, 10.0))
    a, b = side(20, 0.2, 2), side(10, 0.2, 2)
    assert plan(wide, a, b).repetitions < plan(RANGE, a, b, cap=100).repetitions


def test_the_cap_binds_and_says_what_power_it_leaves():
    p = plan(MORE, side(11, 0.3, 2), side(10, 0.3, 2), cap=10)
    assert p.repetitions == 10 and p.power < 0.8 and p.reason.startswith("the cap")
    assert p.power == pytest.approx(power_at(10, p.sigma, MORE))


def test_edges_of_the_pilot():
    # n = 1 on a side: no variance, take the cap
    p = plan(MORE, summarize([5.0]), side(10, 0.1, 3), cap=8)
    assert p.repetitions == 8 and "without a variance" in p.reason
    # no spread on both sides (a ceiling): repetitions cannot help, keep the pilot
    p = plan(RANGE, summarize([400.0] * 3), summarize([400.0] * 3))
    assert p.repetitions == 3 and "without spread" in p.reason
    # not testable: nothing added
    p = plan(Claim("range", expect=(0.9, 1.1), not_testable="userspace OVS"),
             side(10, 0.5, 2), side(10, 0.5, 2))
    assert p.repetitions == 2
    # never fewer than the pilot already has
    assert plan(Claim("range", expect=(0.1, 100.0)), side(10, 0.01, 5),
                side(10, 0.01, 5)).repetitions == 5


@pytest.mark.parametrize("claim, true_ratio, cv", [(MORE, 1.1, 0.08), (EQUIV, 1.0, 0.15)])
def test_the_planned_repetitions_give_the_rule_about_the_stated_power(claim, true_ratio, cv):
    """Simulated experiments at the planned n: the fraction the rule calls "holds" is near
    the planned power (the plan's model is first order, the rule uses Fieller's interval)."""
    rng = random.Random(26)
    p = plan(claim, side(10 * true_ratio, cv, 3), side(10, cv, 3), cap=100)
    n = p.repetitions
    trials, held = 600, 0
    for _ in range(trials):
        a = summarize([rng.gauss(10 * true_ratio, 10 * true_ratio * cv) for _ in range(n)])
        b = summarize([rng.gauss(10, 10 * cv) for _ in range(n)])
        held += judge_samples(claim, a, b)[0].verdict == HOLDS
    assert 0.72 <= held / trials <= 0.95, (n, held / trials)
    # and with a third of the repetitions the power is clearly lower
    small, held_small = max(2, n // 3), 0
    for _ in range(trials):
        a = summarize([rng.gauss(10 * true_ratio, 10 * true_ratio * cv) for _ in range(small)])
        b = summarize([rng.gauss(10, 10 * cv) for _ in range(small)])
        held_small += judge_samples(claim, a, b)[0].verdict == HOLDS
    assert held_small < held - trials * 0.15
