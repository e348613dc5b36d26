"""Statistics of repeated runs: per-point summaries and series.

A *summary* is the mean, the sample standard deviation (n − 1) and the two-sided confidence
interval of the mean from Student's t with n − 1 degrees of freedom (95 % by default) of the
repetitions at one point.  A *series* is the summaries of one metric against one swept parameter
``x`` (e.g. ``lab.chain.length``) with every other swept parameter held at one value (the
series' label, e.g. ``{"measure.flows": 8}``, named ``flows 8``).  Only ``done`` runs count; a missing metric (NaN)
is left out of its point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy import stats as _st

from .units import point_words


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float  # sample standard deviation; NaN when n < 2
    ci_low: float  # NaN when n < 2
    ci_high: float
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def format(self, digits: int = 4) -> str:
        """``mean ± half-width`` (or just the mean when there is no interval)."""
        if math.isnan(self.mean):
            return "–"
        if math.isnan(self.half_width):
            return f"{self.mean:.{digits}g}"
        return f"{self.mean:.{digits}g} ± {self.half_width:.2g}"


def floored(p: Summary, floor: float | None = 0.0) -> Summary:
    """``p`` with its interval cut at ``floor`` (a mean of rates or times is never below 0:
    an interval reaching below says only that the mean is not known to be above it); None
    leaves it as it is."""
    if floor is None or math.isnan(p.ci_low) or p.ci_low >= floor:
        return p
    return Summary(p.n, p.mean, p.std, floor, p.ci_high, p.confidence)


def summarize(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Mean, standard deviation and Student-t confidence interval of ``values`` (NaN ignored)."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n = len(xs)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan, confidence)
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, math.nan, math.nan, math.nan, confidence)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half, confidence)


@dataclass
class Series:
    """One metric against ``x``, the other swept parameters fixed at ``label``."""

    metric: str
    x: str
    label: dict[str, Any]
    xs: list[Any] = field(default_factory=list)
    points: list[Summary] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The series in people's words: ``flows 4`` (``all runs`` when nothing else varies)."""
        return point_words(self.label)

    def values(self) -> tuple[list[Any], list[float], list[float]]:
        """x values, means and CI half-widths (NaN where undefined)."""
        return list(self.xs), [p.mean for p in self.points], [p.half_width for p in self.points]


def short(param: str) -> str:
    """``lab.chain.length`` -> ``chain.length`` for labels; ``measure.flows`` stays."""
    return param[4:] if param.startswith("lab.") else param


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _sort_key(v: Any) -> tuple[int, Any]:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v)
    return (1, _key(v))


def _done(runs: Iterable[Any]) -> list[Any]:
    return [r for r in runs if getattr(r, "status", "done") == "done"]


def swept_params(runs: Iterable[Any]) -> list[str]:
    """Parameters taking more than one value among ``runs``, in first-seen order."""
    seen: dict[str, set[str]] = {}
    for r in runs:
        for k, v in r.params.items():
            seen.setdefault(k, set()).add(_key(v))
    return [k for k, vs in seen.items() if len(vs) > 1]


def metric_names(runs: Iterable[Any]) -> list[str]:
    names: dict[str, None] = {}
    for r in _done(runs):
        names.update(dict.fromkeys(r.metrics))
    return sorted(names)


def series(runs: Iterable[Any], metric: str, x: str, by: Sequence[str] | None = None,
           confidence: float = 0.95) -> list[Series]:
    """Group done ``runs`` (objects with ``params``, ``metrics``, ``status``) into series of
    ``metric`` against parameter ``x``, one series per combination of ``by`` (default: every
    other parameter in the runs' params)."""
    runs = _done(runs)
    if by is None:
        by = sorted({k for r in runs for k in r.params if k != x})
    groups: dict[str, tuple[dict[str, Any], dict[str, tuple[Any, list[float]]]]] = {}
    for r in runs:
        if x not in r.params or metric not in r.metrics:
            continue
        label = {k: r.params.get(k) for k in by}
        g = groups.setdefault(_key(label), (label, {}))
        xv = r.params[x]
        g[1].setdefault(_key(xv), (xv, []))[1].append(r.metrics[metric])
    out = []
    for label, points in groups.values():
        s = Series(metric=metric, x=x, label=label)
        for xv, vals in sorted(points.values(), key=lambda p: _sort_key(p[0])):
            s.xs.append(xv)
            s.points.append(summarize(vals, confidence))
        out.append(s)
    out.sort(key=lambda s: [_sort_key(v) for v in s.label.values()])
    return out


def relative_to_baseline(s: Series, baseline: Any | None = None) -> Series:
    """The series divided by its mean at ``baseline`` (default: its first x).

    The interval of a ratio of means is approximated to first order (delta method): relative
    half-widths add in quadrature.  The baseline point itself gets its own relative width."""
    xs = s.xs
    if not xs:
        return Series(s.metric, s.x, dict(s.label))
    i = 0 if baseline is None else [_key(v) for v in xs].index(_key(baseline))
    base = s.points[i]
    out = Series(metric=s.metric, x=s.x, label=dict(s.label))
    for xv, p in zip(xs, s.points):
        ratio = p.mean / base.mean if base.mean else math.nan
        rel = [h / m for h, m in ((p.half_width, p.mean), (base.half_width, base.mean))
               if m and not math.isnan(h)]
        if p is base:
            rel = rel[:1]
        half = ratio * math.sqrt(sum(r * r for r in rel)) if rel else math.nan
        out.xs.append(xv)
        out.points.append(Summary(p.n, ratio, math.nan, ratio - half, ratio + half,
                                  p.confidence))
    return out
