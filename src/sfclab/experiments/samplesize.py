"""Repetitions fixed in advance per finding, from a pilot's variance (no optional stopping).

A reproduction runs each experiment file once with the repetitions it states: that is the
*pilot*.  From the pilot's two sides a and b of a finding, :func:`plan` computes once the
repetitions per side the finding needs, and the script brings the files up to that number in
one step.  The number never depends on whether the intervals already separate, and it is not
recomputed from later data, so the 95 % intervals keep their coverage (the internal-pilot
design: re-estimating only the variance, not the effect, leaves the error rates essentially
unchanged).

The model (for planning only; the verdict itself uses Fieller's interval, :mod:`.verdicts`):
on the log scale the ratio's estimate ln(ā) − ln(b̄) has, with n repetitions per side, the
standard error σ/√n where σ² = cv_a² + cv_b² (each side's coefficient of variation from the
pilot, the delta method).  With Student-t quantiles on 2n − 2 degrees of freedom, n is the
least number with

- ``range``: (t(1 − α/2) + t(1 − β/2)) · σ/√n ≤ d, d = half the log-width of the widened range:
  power 1 − β that the interval lies inside the range when the true ratio is at the range's
  geometric centre;
- ``more``/``less``: (t(1 − α/2) + t(1 − β)) · σ/√n ≤ ln(1 + e): power 1 − β that the interval
  excludes 1 on the claimed side when the true effect is the smallest effect of interest e;
- ``equivalent``: (t(1 − α) + t(1 − β/2)) · σ/√n ≤ d, d = the nearer margin's log-distance
  from 1: power 1 − β for the two one-sided tests when the true ratio is 1;

with α = 0.05 and 1 − β = ``power`` (default 0.8), at least the pilot's repetitions and at
most ``cap``.  Where the cap binds, the power reached at the cap is reported.  A pilot with a
side of fewer than 2 repetitions has no variance: the plan is the cap.  A pilot without spread
on both sides (every repetition identical: a ceiling) gains nothing from repetitions: the plan
is the pilot.  A finding marked not testable needs no repetitions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .stats import Summary
from .verdicts import Claim

ALPHA = 0.05
#: the power every plan aims at, unless the findings file says otherwise
POWER = 0.8
#: the smallest effect of interest of a directional claim (10 %)
MIN_EFFECT = 0.1
#: the most repetitions per side a plan asks for
CAP = 10


@dataclass(frozen=True)
class Plan:
    repetitions: int  # per side
    power: float  # the power reached with ``repetitions`` (NaN where not computable)
    sigma: float  # the pilot's σ of the log ratio per repetition (NaN without one)
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"repetitions": self.repetitions,
                "power": None if math.isnan(self.power) else round(self.power, 3),
                "sigma": None if math.isnan(self.sigma) else round(self.sigma, 4),
                "reason": self.reason}


def log_sigma(a: Summary, b: Summary) -> float:
    """σ of ln(ā/b̄) per repetition: √(cv_a² + cv_b²); NaN without a variance or a mean."""
    if min(a.n, b.n) < 2 or not a.mean or not b.mean or math.isnan(a.std + b.std):
        return math.nan
    return math.sqrt((a.std / a.mean) ** 2 + (b.std / b.mean) ** 2)


def _distance(claim: Claim, min_effect: float) -> tuple[float, float, float]:
    """(d, the tail of α used, the tail of β used) for the claim's kind."""
    if claim.kind == "range":
        lo, hi = claim.widened
        lo = max(lo, 1e-9)
        return (math.log(hi) - math.log(lo)) / 2, ALPHA / 2, 0.5
    if claim.kind in ("more", "less"):
        return math.log(1 + min_effect), ALPHA / 2, 1.0
    lo, hi = claim.margins
    return min(math.log(hi), -math.log(lo)), ALPHA, 0.5


def power_at(n: int, sigma: float, claim: Claim, min_effect: float = MIN_EFFECT) -> float:
    """The power of the module docstring's model with ``n`` repetitions per side."""
    if n < 2 or math.isnan(sigma):
        return math.nan
    if sigma == 0:
        return 1.0
    d, a_tail, b_share = _distance(claim, min_effect)
    if math.isinf(d):
        return 1.0
    from scipy import stats as _st  # light start-up: scipy (0.5 s of CPU) only to compute

    df = 2 * n - 2
    z = d * math.sqrt(n) / sigma - float(_st.t.ppf(1 - a_tail, df))
    # z = t(1 - β · share): β = (1 - cdf(z)) / share
    beta = (1 - float(_st.t.cdf(z, df))) / b_share
    return max(0.0, 1 - beta)


def plan(claim: Claim, a: Summary, b: Summary, *, power: float = POWER,
         min_effect: float = MIN_EFFECT, cap: int = CAP) -> Plan:
    """The repetitions per side the finding needs, from the pilot ``a`` and ``b``."""
    pilot = min(a.n, b.n)
    if claim.not_testable:
        return Plan(pilot, math.nan, math.nan, "not testable here: no repetitions added")
    sigma = log_sigma(a, b)
    if math.isnan(sigma):
        return Plan(max(pilot, cap), math.nan, sigma,
                    "pilot without a variance (a side with n < 2 or a mean of 0): the cap")
    if sigma == 0:
        return Plan(pilot, math.nan, sigma, "pilot without spread (a ceiling): no more")
    start = max(2, pilot)
    for n in range(start, max(start, cap) + 1):
        p = power_at(n, sigma, claim, min_effect)
        if p >= power:
            return Plan(n, p, sigma, f"power {p:.2f} ≥ {power:g}")
    n = max(start, cap)
    p = power_at(n, sigma, claim, min_effect)
    return Plan(n, p, sigma, f"the cap: power {p:.2f} < {power:g} with {n} per side")
