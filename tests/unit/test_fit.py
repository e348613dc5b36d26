"""The power-law fit recovers a synthetic per-hop loss and finds where the law stops holding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sfclab.experiments.fit import analyze_chain, fit_power_law, local_losses

L, T2 = 0.11, 155.0


def law(n, loss=L, t2=T2):
    return t2 * (1 - loss) ** (np.asarray(n, dtype=float) - 2)


def test_noiseless_data_is_recovered_exactly():
    ns = [2, 3, 4, 5, 6, 8, 10]
    f = fit_power_law(ns, law(ns))
    assert f.loss == pytest.approx(L, abs=1e-12)
    assert f.t2 == pytest.approx(T2, rel=1e-12)
    assert f.r2 == pytest.approx(1.0)
    assert all(abs(r.relative) < 1e-12 for r in f.residuals)
    assert f.lengths == ns
    a = analyze_chain(ns, law(ns))
    assert a.holds_up_to == 10 and a.breaks_at is None and a.trend is None
    assert "holds over every length" in a.describe()


def test_noisy_data_interval_contains_the_truth():
    rng = np.random.default_rng(3)
    ns = np.repeat([2, 3, 4, 5, 6], 5)
    ts = law(ns) * rng.lognormal(0, 0.03, size=len(ns))
    f = fit_power_law(ns, ts)
    assert f.loss_ci[0] < L < f.loss_ci[1]
    assert f.t2_ci[0] < T2 < f.t2_ci[1]
    assert abs(f.loss - L) < 0.02
    assert 0.9 < f.r2 < 1.0
    assert f.n_obs == 25


def test_interval_coverage_over_many_experiments():
    rng = np.random.default_rng(11)
    ns = np.repeat([2, 3, 4, 5], 3)
    hits = 0
    trials = 400
    for _ in range(trials):
        f = fit_power_law(ns, law(ns) * rng.lognormal(0, 0.05, size=len(ns)))
        hits += f.loss_ci[0] <= L <= f.loss_ci[1]
    assert 0.91 <= hits / trials <= 0.99


def test_more_repetitions_narrow_the_interval():
    rng = np.random.default_rng(1)
    widths = []
    for reps in (3, 30):
        ns = np.repeat([2, 3, 4, 5], reps)
        f = fit_power_law(ns, law(ns) * rng.lognormal(0, 0.03, size=len(ns)))
        widths.append(f.loss_ci[1] - f.loss_ci[0])
    assert widths[1] < widths[0] / 2


def test_flattening_for_long_chains_is_found():
    # 11 % per hop up to n = 5, then 2 % per hop (what the paper saw for long chains)
    def flat(n):
        n = np.asarray(n, dtype=float)
        return T2 * (1 - L) ** (np.minimum(n, 5) - 2) * 0.98 ** np.maximum(n - 5, 0)

    rng = np.random.default_rng(7)
    ns = np.repeat([2, 3, 4, 5, 8, 12, 16, 20], 4)
    ts = flat(ns) * rng.lognormal(0, 0.01, size=len(ns))
    a = analyze_chain(ns, ts)
    assert a.holds_up_to == 5 and a.breaks_at == 8 and a.trend == "flattens"
    assert a.holding.loss == pytest.approx(L, abs=0.01)
    assert a.fit.loss < 0.08  # the fit over everything is dragged down
    assert a.fit.r2 < a.holding.r2
    assert "flattens from n = 8" in a.describe()


def test_steepening_is_found():
    ns = [2, 3, 4, 5, 6]
    ts = list(law([2, 3, 4])) + [law(4) * 0.6, law(4) * 0.6 * 0.6]
    a = analyze_chain(ns, ts)
    assert a.breaks_at == 5 and a.trend == "steepens" and a.holds_up_to == 4


def test_two_lengths_fit_but_cannot_judge():
    a = analyze_chain([2, 2, 3, 3], [100, 102, 89, 90])
    assert a.holds_up_to is None and a.breaks_at is None
    # least squares in log space: the ratio of geometric means
    assert a.fit.loss == pytest.approx(1 - math.sqrt(89 * 90) / math.sqrt(100 * 102))


def test_local_losses():
    ll = local_losses([2, 3, 5], [100.0, 90.0, 72.9])
    assert ll[0] == (2, 3, pytest.approx(0.10))
    assert ll[1][:2] == (3, 5) and ll[1][2] == pytest.approx(0.10)


def test_refuses_bad_input():
    with pytest.raises(ValueError):
        fit_power_law([3, 3, 3], [1, 2, 3])
    with pytest.raises(ValueError):
        fit_power_law([2, 3], [10, 0])
    f = fit_power_law([2, 3, 4], [100, math.nan, 81])  # NaN is left out
    assert f.n_obs == 2 and f.loss == pytest.approx(0.1)
