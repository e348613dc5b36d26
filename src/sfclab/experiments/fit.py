"""The power law of throughput against chain length, and where it stops holding.

Model (Livi et al., "Container-based service chaining: a performance perspective")::

    t(n) = (1 - l)^(n - 2) · t(2)

where n is the chain length (namespaces on the path), t(2) the throughput of the shortest
chain and l the loss of throughput per additional hop (≈ 11 % for veth and TCP in the paper).
Taking logarithms makes it a straight line, ``log t = log t(2) + (n − 2) · log(1 − l)``, fitted
by ordinary least squares on every repetition (not on means).  The 95 % intervals of the slope
and the intercept (Student t, N − 2 degrees of freedom) map to intervals of l and t(2) through
the monotone transforms ``l = 1 − e^b`` and ``t(2) = e^a``.  R² is that of the log-linear fit.

*Where it holds* (:func:`analyze_chain`): the paper saw the per-hop loss flatten for long
chains.  Starting from the two shortest lengths, each next length is predicted from the fit on
the shorter ones; if its mean log throughput falls outside the 95 % prediction interval (and
off by more than ``tolerance``, so noiseless data is judged sanely), the law holds up to the
previous length, and the direction says whether the chain lost less than predicted
(``flattens``) or more (``steepens``).  The local per-hop loss between successive lengths,
``1 − (t̄(n₂)/t̄(n₁))^(1/(n₂ − n₁))``, shows the same thing point by point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as _st


@dataclass
class Residual:
    n: int
    observed: float  # mean throughput at n
    predicted: float
    relative: float  # observed / predicted - 1


@dataclass
class PowerLawFit:
    loss: float  # l, per hop, as a fraction
    loss_ci: tuple[float, float]
    t2: float  # fitted throughput at n = 2
    t2_ci: tuple[float, float]
    r2: float
    n_obs: int
    lengths: list[int]
    residuals: list[Residual] = field(default_factory=list)
    slope: float = math.nan  # log(1 - l)
    slope_se: float = math.nan

    def predict(self, n: float | np.ndarray) -> float | np.ndarray:
        return self.t2 * (1 - self.loss) ** (np.asarray(n, dtype=float) - 2)


@dataclass
class ChainAnalysis:
    fit: PowerLawFit  # on every length
    holding: PowerLawFit | None  # on the lengths where the law holds (None: fewer than 2)
    holds_up_to: int | None  # the longest length the law still predicts; None: undecided
    breaks_at: int | None  # the first length it does not predict
    trend: str | None  # "flattens" | "steepens" | None
    local_losses: list[tuple[int, int, float]]  # (n1, n2, per-hop loss between them)

    def describe(self, fmt: Callable[[float], str] = lambda v: f"{v:.4g}") -> str:
        """One sentence; ``fmt`` writes a throughput (e.g. in Gbit/s)."""
        f = self.fit
        text = (f"per-hop loss l = {100 * f.loss:.1f} % (95 % CI {100 * f.loss_ci[0]:.1f} to "
                f"{100 * f.loss_ci[1]:.1f} %), t(2) = {fmt(f.t2)}, R² = {f.r2:.3f} over "
                f"n = {min(f.lengths)}…{max(f.lengths)} ({f.n_obs} runs)")
        if self.breaks_at is not None:
            h = self.holding
            text += (f"; the law holds up to n = {self.holds_up_to}"
                     + (f" (l = {100 * h.loss:.1f} % there)" if h else "")
                     + f" and {self.trend} from n = {self.breaks_at}")
        elif self.holds_up_to is not None:
            text += f"; the law holds over every length measured (up to n = {self.holds_up_to})"
        return text


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float, int]:
    """Intercept a, slope b, their standard errors, residual standard deviation, dof."""
    n = len(x)
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    b = float(((x - xm) * (y - ym)).sum() / sxx)
    a = float(ym - b * xm)
    dof = n - 2
    ss = float(((y - a - b * x) ** 2).sum())
    s = math.sqrt(ss / dof) if dof > 0 else math.nan
    se_b = s / math.sqrt(sxx) if dof > 0 else math.nan
    se_a = s * math.sqrt(1 / n + xm * xm / sxx) if dof > 0 else math.nan
    return a, b, se_a, se_b, s, dof


def fit_power_law(lengths: Sequence[float], throughputs: Sequence[float],
                  confidence: float = 0.95) -> PowerLawFit:
    """Fit ``t(n) = (1 − l)^(n − 2) · t(2)`` to observations (one per run).

    Needs at least two distinct lengths and positive throughputs (ValueError otherwise)."""
    n = np.asarray(lengths, dtype=float)
    t = np.asarray(throughputs, dtype=float)
    keep = ~np.isnan(t)
    n, t = n[keep], t[keep]
    if len(n) != len(t) or len(np.unique(n)) < 2:
        raise ValueError("the power law needs throughput at two chain lengths or more")
    if (t <= 0).any():
        raise ValueError("the power law needs positive throughputs")
    x, y = n - 2, np.log(t)
    a, b, se_a, se_b, _s, dof = _ols(x, y)
    q = float(_st.t.ppf(0.5 + confidence / 2, dof)) if dof > 0 else math.nan
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - a - b * x) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    loss = 1 - math.exp(b)
    loss_ci = (1 - math.exp(b + q * se_b), 1 - math.exp(b - q * se_b))
    t2 = math.exp(a)
    t2_ci = (math.exp(a - q * se_a), math.exp(a + q * se_a))
    fit = PowerLawFit(loss=loss, loss_ci=loss_ci, t2=t2, t2_ci=t2_ci, r2=r2, n_obs=len(t),
                      lengths=sorted(int(v) for v in np.unique(n)), slope=b, slope_se=se_b)
    for length in fit.lengths:
        obs = float(t[n == length].mean())
        pred = float(fit.predict(length))
        fit.residuals.append(Residual(length, obs, pred, obs / pred - 1))
    return fit


def local_losses(lengths: Sequence[float], throughputs: Sequence[float]
                 ) -> list[tuple[int, int, float]]:
    """Per-hop loss between each pair of successive lengths, from mean throughputs."""
    n = np.asarray(lengths, dtype=float)
    t = np.asarray(throughputs, dtype=float)
    ls = sorted(int(v) for v in np.unique(n))
    means = {v: float(t[n == v].mean()) for v in ls}
    return [(n1, n2, 1 - (means[n2] / means[n1]) ** (1 / (n2 - n1)))
            for n1, n2 in zip(ls, ls[1:])]


def analyze_chain(lengths: Sequence[float], throughputs: Sequence[float], *,
                  confidence: float = 0.95, tolerance: float = 0.02) -> ChainAnalysis:
    """The fit on every length, plus how far the law holds (see the module docstring).

    ``tolerance`` is the smallest relative miss (2 %) that counts as the law breaking."""
    n = np.asarray(lengths, dtype=float)
    t = np.asarray(throughputs, dtype=float)
    keep = ~np.isnan(t)
    n, t = n[keep], t[keep]
    whole = fit_power_law(n, t, confidence)
    ls = whole.lengths
    holds_up_to: int | None = None
    breaks_at: int | None = None
    trend: str | None = None
    k = 2
    if len(ls) >= 3:
        while k < len(ls):
            inside = np.isin(n, ls[:k])
            x, y = n[inside] - 2, np.log(t[inside])
            a, b, _sa, _sb, s, dof = _ols(x, y)
            x0 = ls[k] - 2
            here = n == ls[k]
            m = int(here.sum())
            obs = float(np.log(t[here]).mean())
            pred = a + b * x0
            if dof > 0 and not math.isnan(s):
                sxx = float(((x - x.mean()) ** 2).sum())
                se = s * math.sqrt(1 / m + 1 / len(x) + (x0 - x.mean()) ** 2 / sxx)
                half = float(_st.t.ppf(0.5 + confidence / 2, dof)) * se
            else:
                half = 0.0
            miss = obs - pred
            if abs(miss) > max(half, math.log1p(tolerance)):
                breaks_at = ls[k]
                trend = "flattens" if miss > 0 else "steepens"
                break
            k += 1
        holds_up_to = ls[k - 1]
    holding = fit_power_law(n[np.isin(n, ls[:k])], t[np.isin(n, ls[:k])], confidence) \
        if breaks_at is not None else whole
    return ChainAnalysis(fit=whole, holding=holding, holds_up_to=holds_up_to,
                         breaks_at=breaks_at, trend=trend, local_losses=local_losses(n, t))
