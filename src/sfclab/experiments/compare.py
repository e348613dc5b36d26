"""Results side by side: two or more *sides* of one results database on one plot.

A *side* is what a person picks to compare: a whole experiment (``7`` or ``chains``, its done
runs), or some of its runs (``7:12-20,25``: before and after a change made between two
invocations).  :func:`compare` lines the sides up against one swept parameter ``x`` (the first
side's main parameter, :func:`.report.main_parameter`; none when nothing was swept) and, per
metric all sides measured, gives

- each side's series (mean and 95 % Student-t interval per point, :func:`.stats.series`), in the
  one unit the metric takes across all sides (:mod:`.units`), the interval cut at 0 where the
  metric cannot be negative;
- the *ratio* of each later side to the first (the baseline) at every x both have, with its
  95 % Fieller interval (:func:`.verdicts.ratio_interval`, the interval the findings use),
  cut at 0 for a metric that cannot be negative (:func:`.units.nonnegative`: rates, times,
  shares, counts): Fieller's set reaches below 0 when the later side's own interval does (too
  few repetitions to tell its mean from 0), and no ratio of two rates is negative; an unbounded
  set (the baseline's interval reaches 0) has ``high`` None;
- the *environment differences*: every key of the stored environment records (kernel, commit,
  load, tool versions, calibration ...) whose value is not the same on every side;
- where each side ran: its lab's name and experiment file, and whether that lab is up now;
- the *published figures*: each finding of ``scenarios/findings.yaml`` whose database is one
  side's experiment, with its published range (the band) and our ratio beside it.

The result is one JSON-ready mapping (field names as keys, people's words in every label),
shared by ``sfclab compare`` and ``GET /api/results/compare``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..realize.state import LabState
from .findings import Finding, load_findings
from .findings import compare as compare_finding
from .report import MAX_PLOTTED_METRICS, flatten, main_parameter, ordered_metrics
from .stats import Series, Summary, floored, metric_names, series, summarize
from .store import ExperimentRow, RunRow, Store
from .units import (axis_label, env_value, env_words, nonnegative, param_words, point_words,
                    scale, title)
from .verdicts import ratio_interval

#: sides one comparison may hold, and the length of one side's reference
MAX_SIDES = 8
MAX_REF = 200
#: the published findings of the reproduced studies, beside the package's source tree
FINDINGS = Path(__file__).resolve().parents[3] / "scenarios" / "findings.yaml"

_REF = re.compile(r"^(?P<exp>[A-Za-z0-9][A-Za-z0-9._-]{0,127})"
                  r"(?::(?P<runs>\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*))?$")


@dataclass
class Side:
    """One side of a comparison: an experiment's done runs, or the chosen ones."""

    ref: str
    label: str
    experiment: ExperimentRow
    runs: list[RunRow]
    environment: dict[str, Any]


def clean(v: Any) -> Any:
    """``v`` with every NaN or infinity replaced by None (JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


def _run_ids(text: str, ref: str) -> set[int]:
    ids: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b < a or b - a > 100_000:
            raise SpecError(f"expected a run range low-high with low <= high in {ref!r}, got "
                            f"{part!r}", place="RUN")
        ids.update(range(a, b + 1))
    return ids


def side(store: Store, ref: str) -> Side:
    """The side ``ref`` names: ``EXPERIMENT`` (id or name) or ``EXPERIMENT:RUNS`` (run ids and
    ranges of that experiment, ``12-20,25``)."""
    m = _REF.match(ref) if len(ref) <= MAX_REF else None
    if m is None:
        raise SpecError("expected an experiment (id or name) or EXPERIMENT:RUNS (run ids such "
                        f"as 12-20,25), got {ref[:80]!r}", place="RUN")
    exp = store.experiment(m["exp"])
    runs = store.runs(exp.id, "done", with_metrics=True)
    label = f"{exp.name} (id {exp.id})"
    if m["runs"]:
        wanted = _run_ids(m["runs"], ref)
        runs = [r for r in runs if r.id in wanted]
        label = f"{exp.name} runs {m['runs']}"
    if not runs:
        raise SpecError(f"{ref!r} holds no finished run of experiment '{exp.name}' "
                        f"(id {exp.id})", place="RUN")
    return Side(ref, label, exp, runs, _environment(store, exp, runs))


def _environment(store: Store, exp: ExperimentRow, runs: Sequence[RunRow]) -> dict[str, Any]:
    """The environment of the invocation that made the side's first run: the last record
    made before it started (records are per invocation, oldest first)."""
    envs = store.environments_recorded(exp.id)
    first = min((r.started for r in runs if r.started is not None), default=None)
    chosen = [d for t, d in envs if first is None or t <= first + 1e-6]
    return (chosen or [d for _, d in envs] or [{}])[-1]


def environment_differences(envs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The keys (flattened, ``kernel.release``) whose values differ between the records,
    each with its value on every side (None where a side did not record it), and both in
    people's words (``label``: ``load average (1, 5, 15 min)``; ``shown``: ``12.9, 13.5,
    11.5``)."""
    flat = [flatten(e) for e in envs]
    keys: list[str] = []
    for f in flat:
        keys += [k for k in f if k not in keys]
    return [{"key": k, "label": env_words(k), "values": [f.get(k) for f in flat],
             "shown": [env_value(k, f.get(k)) for f in flat]} for k in keys
            if len({repr(f.get(k)) for f in flat}) > 1]


def ratio(a: Summary, b: Summary, *, nonnegative: bool = True) -> dict[str, float]:
    """mean(a) / mean(b) with its 95 % Fieller interval (NaN ends when there is none), cut at
    0 when both are means of a quantity that cannot be negative."""
    iv = ratio_interval(a, b)
    return {"ratio": iv.estimate, "low": _cut(iv.low, nonnegative), "high": iv.high}


def _cut(low: float, nonnegative: bool) -> float:
    """An interval's low end cut at 0 for a ratio that cannot be negative."""
    return max(low, 0.0) if nonnegative and not math.isnan(low) else low


def _side_series(s: Side, metric: str, x: str | None) -> list[Series]:
    if x is not None and all(x in r.params for r in s.runs):
        return series(s.runs, metric, x)
    one = Series(metric=metric, x=x or "", label={})
    one.xs.append("all runs")
    one.points.append(summarize(r.metrics.get(metric, math.nan) for r in s.runs))
    return [one]


def _match(base: list[Series], other: Series) -> Series | None:
    for b in base:
        if b.label == other.label:
            return b
    return base[0] if len(base) == 1 else None


def _metric(sides: Sequence[Side], metric: str, x: str | None) -> dict[str, Any]:
    per_side = [_side_series(s, metric, x) for s in sides]
    floor = 0.0 if nonnegative(metric) else None
    sc = scale(metric, [p.mean for ss in per_side for se in ss for p in se.points])
    drawn = []
    for i, (s, ss) in enumerate(zip(sides, per_side)):
        for se in ss:
            drawn.append({"side": i, "name": s.label + (f", {point_words(se.label)}"
                                                        if se.label else ""),
                          "x": se.xs, "mean": [sc(p.mean) for p in se.points],
                          "ci_low": [sc(floored(p, floor).ci_low) for p in se.points],
                          "ci_high": [sc(p.ci_high) for p in se.points],
                          "n": [p.n for p in se.points]})
    ratios = []
    for i in range(1, len(sides)):
        for se in per_side[i]:
            b = _match(per_side[0], se)
            if b is None:
                continue
            xs = [v for v in se.xs if v in b.xs]
            rs = [ratio(se.points[se.xs.index(v)], b.points[b.xs.index(v)],
                        nonnegative=floor is not None) for v in xs]
            ratios.append({"side": i, "name": f"{sides[i].label} / {sides[0].label}"
                           + (f", {point_words(se.label)}" if se.label else ""),
                           "x": xs, "ratio": [r["ratio"] for r in rs],
                           "low": [r["low"] for r in rs], "high": [r["high"] for r in rs]})
    return {"metric": metric, "unit": sc.unit, "y_label": axis_label(metric, sc),
            "title": title(metric, x), "series": drawn, "ratios": ratios}


def where_it_ran(exp: ExperimentRow, runs: Sequence[RunRow]) -> dict[str, Any]:
    """The lab runs ran on: its name, the experiment file, and whether it is up now."""
    names = sorted({str(r.lab.get("name")) for r in runs if r.lab.get("name")})
    up = []
    for n in names:
        try:
            up.append(LabState(n).meta().get("status") == "up")
        except (OSError, ValueError, SpecError):
            up.append(False)
    return {"labs": [{"name": n, "up": u} for n, u in zip(names, up)],
            "experiment_file": exp.source}


def _band(f: Finding) -> list[float] | None:
    c = f.claim_rule
    if c.kind == "range":
        return list(c.widened)
    if c.kind == "equivalent":
        return list(c.margins)
    return None


def published(store: Store, sides: Sequence[Side], path: str | Path | None) -> list[dict[str, Any]]:
    """Each finding whose points are one side's experiment (its database's name, or the
    experiment its a or b names in a group's database): the published range as a band (a
    range claim widened by its tolerance; an equivalence's margins) and our ratio of its a to
    its b with the 95 % interval (cut at 0 where the metric cannot be negative, as the
    comparison's own), or why there is none."""
    path = Path(path) if path is not None else FINDINGS
    if not path.is_file():
        return []
    names = {s.experiment.name for s in sides}
    out = []
    for f in load_findings(path).findings:
        wanted = {str(f.a.get("experiment", f.db)), str(f.b.get("experiment", f.db))}
        if not wanted & names or (f.b_db and f.b_db != f.db):
            continue
        row: dict[str, Any] = {"id": f.id, "claim": f.claim, "published": f.published,
                               "a_name": f.a_name, "b_name": f.b_name,
                               "experiment": f.db, "rule": f.rule_text(), "band": _band(f)}
        # the database may hold other experiments too: the finding's points are this one's
        mine = replace(f, a={"experiment": f.db, **f.a}, b={"experiment": f.db, **f.b})
        try:
            c = compare_finding(store, mine)
            iv = c.interval
            row.update(ratio=c.ratio, low=_cut(iv.low, nonnegative(f.metric)), high=iv.high,
                       verdict=c.verdict)
        except SpecError as e:
            row.update(ratio=None, low=None, high=None, verdict=None, note=e.message)
        out.append(row)
    return out


def compare(store: Store, refs: Sequence[str], *, metrics: Sequence[str] | None = None,
            findings: str | Path | None = None) -> dict[str, Any]:
    """The comparison of the sides ``refs`` name (the first is the baseline of the ratios)."""
    if not 2 <= len(refs) <= MAX_SIDES:
        raise SpecError(f"expected 2 to {MAX_SIDES} experiments or run sets to compare, got "
                        f"{len(refs)}", place="RUN")
    sides = [side(store, r) for r in refs]
    x = next((p for s in sides if (p := main_parameter(s.runs)) is not None), None)
    shared = set.intersection(*(set(metric_names(s.runs)) for s in sides))
    shown, _cpu = ordered_metrics(sorted(shared))
    if metrics:
        unknown = [m for m in metrics if m not in shared]
        if unknown:
            raise SpecError(f"expected a metric every side measured ({', '.join(shown)}), got "
                            f"{', '.join(unknown)}", place="--metric")
        shown = list(metrics)
    return {"db": store.path, "x": x, "x_label": param_words(x) if x else None,
            "sides": [{"ref": s.ref, "label": s.label, "experiment": s.experiment.id,
                       "name": s.experiment.name, "runs": [r.id for r in s.runs],
                       "ran_on": where_it_ran(s.experiment, s.runs)} for s in sides],
            "metrics": [_metric(sides, m, x) for m in shown[:MAX_PLOTTED_METRICS]],
            "environment": environment_differences([s.environment for s in sides]),
            "published": published(store, sides, findings)}
