"""The verdict rule: a published claim judged by the 95 % interval of our ratio.

A finding compares two setups, a and b, by the ratio of their means r = mean(a) / mean(b).
Its *claim* (:class:`Claim`, one entry of ``scenarios/findings.yaml``) is one of four kinds,
each a row of :data:`RULES`:

- ``range``: the published ratio lies in ``expect`` = [low, high].  The range is widened by the
  stated relative ``tolerance`` t to W = [low · (1 − t), high · (1 + t)].  **holds** when the
  95 % interval of r lies inside W (its ends may touch W's); **does not hold** when it lies
  wholly outside W (no point in common); **inconclusive** otherwise.
- ``more`` / ``less``: a directional claim (a is larger / smaller than b, by an unstated
  amount).  **holds** when the 95 % interval excludes no effect (r = 1) on the claimed side
  (its lower end above 1 for ``more``, its upper end below 1 for ``less``); **does not hold**
  when it excludes 1 on the other side; **inconclusive** when it contains 1 (an interval that
  only touches 1 has not excluded it).
- ``equivalent``: "hardly matters": r lies within the stated ``margins`` [m_low, m_high]
  (m_low < 1 < m_high).  Two one-sided tests at 5 % each (Schuirmann's TOST, in its interval
  form): **holds** when the 90 % interval lies inside the margins; **does not hold** when the
  95 % interval lies wholly outside them (the difference is shown to exceed a margin);
  **inconclusive** otherwise.

Before any of these: a finding marked ``not_testable`` (a component that differs by
construction, such as OVS's userspace datapath standing in for the kernel one, or a censored
design in which both sides reach the top offered rate) is **not testable here**: its figures
are reported, it is never scored.  A side with fewer than 2 repetitions, a side without spread
on both sides at once (identical repetitions: a ceiling, not a measurement of the spread), or
an interval that does not exist (b's mean not distinguishable from 0) gives **inconclusive**:
no verdict is ever drawn from a point estimate.

Censored sides.  A rate found by an NDR/PDR search that reached the top of its range (the
most the generator sends, the calibrated ceiling) is only a lower bound of the chain's rate
(``ndr_lower_bound_pps``, :mod:`sfclab.traffic.ndr`): the chain kept up with all that could be
measured.  A side with such a repetition is *censored*, and the interval says only what the
bound allows: with a censored, the true r is at least the measured one, so the interval is
[low, ∞); with b censored, at most, so it is [0, high]; with both censored nothing bounds r
and the finding is **not testable here** (a censored design).  The rules then apply to the
opened interval unchanged: it can still lie wholly outside a range, or exclude 1 on one side,
but it can never lie inside a bounded range or within equivalence margins.

The interval of the ratio is Fieller's (:func:`ratio_interval`), not the delta method on
log r: Fieller's interval is the set of ratios ρ that a t-test of mean(a) − ρ · mean(b) = 0
does not reject, so it needs no linearisation, stays correct when b's relative spread is large
(the intervals here come from 2–10 short repetitions), is asymmetric where it should be, and
says honestly that no bounded interval exists when b's own interval reaches 0 (the delta method
would report a finite, wrong one, and log r is undefined for a mean of 0).  The two sides are
independent samples with unequal variances: the degrees of freedom are Welch–Satterthwaite's
for the variance of a − r · b, evaluated at the point estimate r.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .stats import Summary

HOLDS, NOT, INCONCLUSIVE, UNTESTABLE = ("holds", "does not hold", "inconclusive",
                                        "not testable here")
#: every verdict, in the order the page counts them
VERDICTS = (HOLDS, NOT, INCONCLUSIVE, UNTESTABLE)
#: claim kinds (a row of :data:`RULES` each)
KINDS = ("range", "more", "less", "equivalent")


@dataclass(frozen=True)
class Claim:
    """What a finding claims about r = mean(a) / mean(b), with the stated allowances."""

    kind: str = "range"  # a key of RULES
    expect: tuple[float, float] = (0.0, math.inf)  # range: the published ratio
    tolerance: float = 0.0  # range: relative widening of ``expect``
    margins: tuple[float, float] = (1.0, 1.0)  # equivalent: the ratios that "hardly matter"
    not_testable: str = ""  # the reason, when the finding cannot be tested here

    @property
    def widened(self) -> tuple[float, float]:
        lo, hi = self.expect
        return lo * (1 - self.tolerance), hi * (1 + self.tolerance)


@dataclass(frozen=True)
class Interval:
    """An interval of r: ``low``/``high`` may be ±inf (unbounded) or NaN (none exists)."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    #: "a" (high opened to ∞) or "b" (low opened to 0) when that side is censored
    censored: str = ""

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high)
                    or math.isinf(self.low) or math.isinf(self.high))

    def opened(self, censored: str) -> Interval:
        """The interval a censored side leaves: a's censoring opens ``high`` to ∞ (r is at
        least what was measured), b's opens ``low`` to 0 (r is at most that)."""
        if censored == "a":
            return Interval(self.estimate, self.low, math.inf, self.confidence, "a")
        if censored == "b":
            return Interval(self.estimate, 0.0, self.high, self.confidence, "b")
        return self

    def format(self) -> str:
        if self.censored == "a" and not math.isnan(self.low):
            return f"≥ {self.low:.3g} (a censored)"
        if self.censored == "b" and not math.isnan(self.high):
            return f"≤ {self.high:.3g} (b censored)"
        if not self.defined:
            return "no interval"
        return f"{self.low:.3g}–{self.high:.3g}"


UNDEFINED = Interval(math.nan, math.nan, math.nan)


def welch_df(a: Summary, b: Summary, r: float) -> float:
    """Welch–Satterthwaite degrees of freedom of the variance of mean(a) − r · mean(b)."""
    va, vb = a.std ** 2 / a.n, (r * r) * b.std ** 2 / b.n
    den = (va * va / (a.n - 1) if va else 0.0) + (vb * vb / (b.n - 1) if vb else 0.0)
    return (va + vb) ** 2 / den if den else math.nan


def ratio_interval(a: Summary, b: Summary, confidence: float = 0.95) -> Interval:
    """Fieller's ``confidence`` interval of mean(a) / mean(b) from two independent samples.

    The ratios ρ with (ā − ρ b̄)² ≤ t² (s_a²/n_a + ρ² s_b²/n_b) form the interval; it is bounded
    when b̄² > t² s_b²/n_b (b's mean differs from 0 at this confidence), else unbounded or
    the whole line (returned as infinite ends).  NaN ends when a side has n < 2, when neither
    side has spread, or when b's mean is 0."""
    if min(a.n, b.n) < 2 or math.isnan(a.std) or math.isnan(b.std) or not b.mean:
        return Interval(a.mean / b.mean if b.mean else math.nan, math.nan, math.nan, confidence)
    r = a.mean / b.mean
    if a.std == 0 and b.std == 0:
        return Interval(r, math.nan, math.nan, confidence)
    df = welch_df(a, b, r)
    from scipy import stats as _st  # light start-up: scipy (0.5 s of CPU) only to compute

    t = float(_st.t.ppf(0.5 + confidence / 2, df))
    va, vb = a.std ** 2 / a.n, b.std ** 2 / b.n
    qa = b.mean ** 2 - t * t * vb
    qb = -2 * a.mean * b.mean
    qc = a.mean ** 2 - t * t * va
    disc = qb * qb - 4 * qa * qc
    if qa <= 0:  # b's interval reaches 0: no bounded interval
        return Interval(r, -math.inf, math.inf, confidence)
    root = math.sqrt(max(disc, 0.0))
    return Interval(r, (-qb - root) / (2 * qa), (-qb + root) / (2 * qa), confidence)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str  # one line: what decided it


def _range(c: Claim, ci: Interval, ci90: Interval) -> Verdict:
    lo, hi = c.widened
    w = f"{lo:.3g}–{hi:.3g}"
    if lo <= ci.low and ci.high <= hi:
        return Verdict(HOLDS, f"interval {ci.format()} inside {w}")
    if ci.high < lo or ci.low > hi:
        return Verdict(NOT, f"interval {ci.format()} outside {w}")
    return Verdict(INCONCLUSIVE, f"interval {ci.format()} overlaps the edge of {w}")


def _directional(more: bool) -> Callable[[Claim, Interval, Interval], Verdict]:
    def rule(c: Claim, ci: Interval, ci90: Interval) -> Verdict:
        above, below = ci.low > 1.0, ci.high < 1.0
        if above or below:
            right = above if more else below
            side = "above" if above else "below"
            return Verdict(HOLDS if right else NOT, f"interval {ci.format()} {side} 1")
        return Verdict(INCONCLUSIVE, f"interval {ci.format()} contains 1")
    return rule


def _equivalent(c: Claim, ci: Interval, ci90: Interval) -> Verdict:
    lo, hi = c.margins
    m = f"{lo:.3g}–{hi:.3g}"
    if lo <= ci90.low and ci90.high <= hi:
        return Verdict(HOLDS, f"90 % interval {ci90.format()} inside the margins {m}")
    if ci.high < lo or ci.low > hi:
        return Verdict(NOT, f"interval {ci.format()} outside the margins {m}")
    return Verdict(INCONCLUSIVE, f"90 % interval {ci90.format()} not inside the margins {m}")


#: claim kind -> its rule over the 95 % and the 90 % interval (both defined)
RULES: dict[str, Callable[[Claim, Interval, Interval], Verdict]] = {
    "range": _range,
    "more": _directional(True),
    "less": _directional(False),
    "equivalent": _equivalent,
}
assert tuple(RULES) == KINDS


#: the reason given for a finding whose two sides are both censored
BOTH_CENSORED = ("censored design: both sides reached the top of their search range (a lower "
                 "bound each), so nothing bounds the ratio")


def censored_side(a: bool, b: bool) -> str:
    """"a", "b", "ab" or "" from whether each side is censored."""
    return ("a" if a else "") + ("b" if b else "")


def judge(claim: Claim, ci: Interval, ci90: Interval | None = None,
          censored: str = "") -> Verdict:
    """The verdict of the module docstring from the 95 % interval ``ci`` (and the 90 % one,
    used by equivalence claims); ``censored`` names the censored sides ("a", "b", "ab")."""
    if claim.not_testable:
        return Verdict(UNTESTABLE, claim.not_testable)
    if censored == "ab":
        return Verdict(UNTESTABLE, BOTH_CENSORED)
    if not ci.defined or (ci90 is not None and not ci90.defined):
        return Verdict(INCONCLUSIVE, "no interval (n < 2, no spread, or b's interval "
                                     "reaches 0)")
    ci90 = ci90 if ci90 is not None else ci
    return RULES[claim.kind](claim, ci.opened(censored), ci90.opened(censored))


def judge_samples(claim: Claim, a: Summary, b: Summary,
                  censored: str = "") -> tuple[Verdict, Interval]:
    """The verdict on two summaries, and the 95 % interval of the ratio (opened on a
    censored side's end)."""
    ci = ratio_interval(a, b, 0.95)
    return (judge(claim, ci, ratio_interval(a, b, 0.90), censored),
            ci.opened(censored) if censored in ("a", "b") else ci)
