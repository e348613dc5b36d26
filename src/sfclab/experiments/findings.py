"""Published findings as data, and their verdicts computed from a run's databases.

``scenarios/findings.yaml`` lists, per study, the *key comparisons* of docs/reproduction.md::

    findings:
      - id: P1                          # unique; the page's marker names it
        study: P                        # [P], [B], [S], [T], [O]
        claim: zerocopy raises TCP throughput 25-170 %
        published: "+25 to +170 %"      # the study's value, as text
        db: paper-calibration-tcp       # OUT/<db>.db of scripts/reproduce.sh
        metric: throughput_bps          # or total.M: M times the run's number of pairs
        unit: Gbit/s                    # optional: a key of UNITS
        a: {measure.zerocopy: true, measure.flows: 8}    # one point: params (and optionally
        b: {measure.zerocopy: false, measure.flows: 8}   #   ``experiment: NAME``, and
                                                         #   ``metric: M`` for this side only)
        test: range                     # range (default), more, less or equivalent
        expect: [1.25, 2.7]             # range: the published ratio mean(a) / mean(b)
        tolerance: 0.1                  # range: optional, the file's ``tolerance`` otherwise
        margins: [0.85, 1.15]           # equivalent: the ratios that "hardly matter"
        not_testable: "why"             # optional: reported, never scored
        b_db: paper-chain-veth-vs-ovs-udp   # optional: b's points come from another database

    tolerance: 0.1                      # the relative widening of every ``expect`` range
    planning: {power: 0.8, min_effect: 0.1, max_repetitions: 10}   # .samplesize's plan

    tables:                             # "ours" tables, rewritten from the run
      - id: p-fig1
        db: paper-calibration-tcp
        metric: throughput_bps
        unit: Gbit/s
        rows: measure.flows             # a parameter (or ``variant``, or ``experiment``, or a
                                        #   derived one: ``derived.rules``, ``derived.firewalls``)
        cols: measure.zerocopy          # optional; a list of parameters for combined columns
        where: {}                       # optional params filter (and ``experiment``)
        or_metric: max_received_pps     # optional: for runs that lack ``metric``
        per_s: false                    # optional: divide by the trial's duration (counts ->
                                        #   rates, e.g. udp_received_packets -> kpps)
        kind: means                     # means (above); fit: the power law of :mod:`.fit` over
                                        #   ``rows`` (the chain length), one series per ``cols``
                                        #   combination; rates: received kpps at each offered
                                        #   rate (the runs' stored points), a row per ``rows``
                                        #   combination (``pair: vm1``: that sender's own)
        relative_to: native             # means, one row parameter: a column of ratios of each
                                        #   mean to that row's

A finding with ``b_db`` compares two databases (e.g. the shaper chain against a firewall
chain); the planned repetitions (:mod:`.samplesize`) rerun the files of its own group.

A *comparison* summarizes the repetitions of ``a`` and of ``b`` (mean and 95 % Student-t
interval, :mod:`.stats`) and the 95 % (and 90 %) Fieller interval of the ratio
r = mean(a) / mean(b); its *verdict* is :func:`.verdicts.judge`'s: holds, does not hold,
inconclusive or not testable here, by the rule written out in :mod:`.verdicts`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError
from ..spec.reading import read_text, scan_yaml
from .stats import Summary, summarize
from .store import RunRow, Store
from .verdicts import KINDS, Claim, Interval, Verdict, censored_side, judge_samples

#: unit name -> factor that turns the stored (SI) value into it
UNITS: dict[str, float] = {"Gbit/s": 1e-9, "Mbit/s": 1e-6, "kpps": 1e-3, "pps": 1.0,
                           "": 1.0, "%": 100.0, "s": 1.0}

#: the widening of ``expect`` ranges when the file states none (it should state one)
DEFAULT_TOLERANCE = 0.0


@dataclass(frozen=True)
class Finding:
    id: str
    study: str
    claim: str
    published: str
    db: str
    metric: str
    a: dict[str, Any]
    b: dict[str, Any]
    claim_rule: Claim
    unit: str = ""
    a_name: str = "a"
    b_name: str = "b"
    b_db: str = ""  # b's database when it is not ``db``

    @property
    def dbs(self) -> tuple[str, ...]:
        return (self.db, self.b_db) if self.b_db and self.b_db != self.db else (self.db,)

    @property
    def expect(self) -> tuple[float, float]:
        return self.claim_rule.expect

    def rule_text(self) -> str:
        """The claim as the rule tests it, for the page: ``1.25–2.7× ± 10 %``, ``> 1``,
        ``within 0.85–1.15 (TOST)``."""
        c = self.claim_rule
        if c.kind == "range":
            lo, hi = c.expect
            tol = f" ± {c.tolerance * 100:g} %" if c.tolerance else ""
            return f"{lo:g}–{hi:g}×{tol}"
        if c.kind == "more":
            return "> 1"
        if c.kind == "less":
            return "< 1"
        return f"within {c.margins[0]:g}–{c.margins[1]:g} (TOST)"


@dataclass(frozen=True)
class TableSpec:
    id: str
    db: str
    metric: str
    rows: str | tuple[str, ...]
    cols: str | tuple[str, ...] | None = None
    unit: str = ""
    where: dict[str, Any] = field(default_factory=dict)
    or_metric: str = ""  # for runs without ``metric`` (a one-pair run has no pair.* metrics)
    per_s: bool = False  # divide by the run's ``measure.duration``
    kind: str = "means"  # a key of TABLE_KINDS
    pair: str = ""  # rates: one sender's curve (``vm1``)
    relative_to: Any = None  # means: a row value; adds each column's mean / that row's mean

    @property
    def row_keys(self) -> tuple[str, ...]:
        return (self.rows,) if isinstance(self.rows, str) else self.rows

    @property
    def col_keys(self) -> tuple[str, ...]:
        return () if self.cols is None else (self.cols,) if isinstance(self.cols, str) \
            else self.cols


@dataclass(frozen=True)
class Planning:
    """How :mod:`.samplesize` plans each finding's repetitions from the pilot."""

    power: float = 0.8
    min_effect: float = 0.1  # directional claims: the smallest effect of interest
    max_repetitions: int = 10


@dataclass(frozen=True)
class Findings:
    findings: list[Finding]
    tables: list[TableSpec]
    planning: Planning = field(default_factory=Planning)

    def dbs(self) -> list[str]:
        return sorted({d for f in self.findings for d in f.dbs} | {t.db for t in self.tables})


@dataclass(frozen=True)
class Comparison:
    finding: Finding
    a: Summary
    b: Summary
    sources: tuple[str, ...]  # experiment files the two points came from
    #: the censored sides ("a", "b", "ab" or ""): a repetition's figure is only a lower bound
    censored: str = ""
    #: the runs done at each side's point, with or without the metric (a side of no figure
    #: whose runs are done was measured and gave none: searches that ended unmeasurable)
    done: tuple[int, int] = (0, 0)

    @property
    def no_figure(self) -> str:
        """The sides ("a", "b" or "ab") whose runs are all done and hold no figure."""
        return "".join(s for s, x, d in self._sides() if x.n == 0 and d > 0)

    @property
    def pending(self) -> bool:
        """A side has neither a figure nor a done run: its group has not measured it yet."""
        return any(x.n == 0 and d == 0 for _, x, d in self._sides())

    def _sides(self) -> tuple[tuple[str, Summary, int], ...]:
        return (("a", self.a, self.done[0]), ("b", self.b, self.done[1]))

    @property
    def ratio(self) -> float:
        return self.a.mean / self.b.mean if self.b.mean else math.nan

    @property
    def judged(self) -> tuple[Verdict, Interval]:
        return judge_samples(self.finding.claim_rule, self.a, self.b, self.censored)

    @property
    def interval(self) -> Interval:
        """The 95 % Fieller interval of the ratio."""
        return self.judged[1]

    @property
    def verdict(self) -> str:
        return self.judged[0].verdict

    @property
    def reason(self) -> str:
        return self.judged[0].reason


# ----------------------------------------------------------------- the file

_FINDING_KEYS = {"id", "study", "claim", "published", "db", "metric", "unit", "a", "b", "expect",
                 "a_name", "b_name", "b_db", "test", "tolerance", "margins", "not_testable"}
_TABLE_KEYS = {"id", "db", "metric", "unit", "rows", "cols", "where", "or_metric", "per_s",
               "kind", "pair", "relative_to"}
#: table kinds (rendered by sfclab.experiments.pagetables)
TABLE_KINDS = ("means", "fit", "rates")


def _params(v: Any, path: str, place: str, *, optional: bool) -> str | tuple[str, ...] | None:
    """A parameter name or a non-empty list of them."""
    if v is None and optional:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise SpecError(f"expected a parameter name or a list of them, got {v!r}", file=path,
                    place=place)


def _need(d: Mapping[str, Any], key: str, typ: type | tuple[type, ...], path: str,
          place: str) -> Any:
    if key not in d:
        raise SpecError(f"expected '{key}'", file=path, place=place)
    v = d[key]
    if not isinstance(v, typ):
        raise SpecError(f"expected '{key}' to be {getattr(typ, '__name__', typ)}, got {v!r}",
                        file=path, place=f"{place}.{key}")
    return v


def _unknown(d: Mapping[str, Any], allowed: set[str], path: str, place: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise SpecError(f"unknown key '{extra[0]}' (expected one of {', '.join(sorted(allowed))})",
                        file=path, place=f"{place}.{extra[0]}")


def _unit(d: Mapping[str, Any], path: str, place: str) -> str:
    unit = d.get("unit", "")
    if unit not in UNITS:
        raise SpecError(f"expected a unit among {', '.join(repr(u) for u in UNITS)}, got "
                        f"{unit!r}", file=path, place=f"{place}.unit")
    return str(unit)


def _fraction(v: Any, path: str, place: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise SpecError(f"expected a fraction 0 <= t < 1, got {v!r}", file=path, place=place)
    return float(v)


def _pair(d: Mapping[str, Any], key: str, path: str, place: str) -> tuple[float, float]:
    v = _need(d, key, list, path, place)
    if (len(v) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                               and math.isfinite(x) for x in v) or not 0 <= v[0] <= v[1]):
        raise SpecError(f"expected [low, high] ratios with 0 <= low <= high, got {v!r}",
                        file=path, place=f"{place}.{key}")
    return float(v[0]), float(v[1])


def _claim(d: Mapping[str, Any], tolerance: float, path: str, place: str) -> Claim:
    """The finding's claim for :mod:`.verdicts`: its kind and the ranges it needs."""
    kind = d.get("test", "range")
    if kind not in KINDS:
        raise SpecError(f"expected a test among {', '.join(KINDS)}, got {kind!r}", file=path,
                        place=f"{place}.test")
    reason = d.get("not_testable", "")
    if not isinstance(reason, str):
        raise SpecError(f"expected the reason as text, got {reason!r}", file=path,
                        place=f"{place}.not_testable")
    expect = _pair(d, "expect", path, place) if kind == "range" or "expect" in d \
        else (0.0, math.inf)
    tol = _fraction(d.get("tolerance", tolerance), path, f"{place}.tolerance")
    margins = (1.0, 1.0)
    if kind == "equivalent":
        margins = _pair(d, "margins", path, place)
        if not margins[0] < 1.0 < margins[1]:
            raise SpecError(f"expected margins around 1 (low < 1 < high), got "
                            f"{list(margins)}", file=path, place=f"{place}.margins")
    elif "margins" in d:
        raise SpecError("margins belong to 'test: equivalent' findings", file=path,
                        place=f"{place}.margins")
    return Claim(kind=str(kind), expect=expect, tolerance=tol, margins=margins,
                 not_testable=reason)


def _planning(d: Any, path: str) -> Planning:
    if not isinstance(d, dict):
        raise SpecError(f"expected a mapping, got {d!r}", file=path, place="planning")
    _unknown(d, {"power", "min_effect", "max_repetitions"}, path, "planning")
    power = d.get("power", Planning.power)
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0.5 <= power < 1:
        raise SpecError(f"expected a power from 0.5 to below 1, got {power!r}", file=path,
                        place="planning.power")
    effect = _fraction(d.get("min_effect", Planning.min_effect), path, "planning.min_effect")
    if effect <= 0:
        raise SpecError("expected a smallest effect above 0", file=path,
                        place="planning.min_effect")
    cap = d.get("max_repetitions", Planning.max_repetitions)
    if isinstance(cap, bool) or not isinstance(cap, int) or not 2 <= cap <= 100:
        raise SpecError(f"expected 2 to 100 repetitions, got {cap!r}", file=path,
                        place="planning.max_repetitions")
    return Planning(float(power), effect, cap)


def load_findings(path: str | Path) -> Findings:
    """Read and check the findings file; a :class:`SpecError` names the file and the place."""
    p = str(path)
    text = read_text(p)  # bounded, like every input file
    scan_yaml(text, p)  # nesting and keys checked before PyYAML recurses
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(f"expected a readable YAML file ({e})", file=p) from None
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with 'findings' and 'tables'", file=p)
    _unknown(data, {"findings", "tables", "tolerance", "planning"}, p, "")
    tolerance = _fraction(data.get("tolerance", DEFAULT_TOLERANCE), p, "tolerance")
    planning = _planning(data.get("planning") or {}, p)
    out: list[Finding] = []
    seen: set[str] = set()
    for i, d in enumerate(data.get("findings") or []):
        place = f"findings[{i}]"
        if not isinstance(d, dict):
            raise SpecError("expected a mapping", file=p, place=place)
        _unknown(d, _FINDING_KEYS, p, place)
        fid = _need(d, "id", str, p, place)
        if fid in seen:
            raise SpecError(f"finding id '{fid}' given twice", file=p, place=f"{place}.id")
        seen.add(fid)
        claim = _claim(d, tolerance, p, place)
        out.append(Finding(
            id=fid, study=str(_need(d, "study", str, p, place)),
            claim=_need(d, "claim", str, p, place), published=str(d.get("published", "")),
            db=_need(d, "db", str, p, place), metric=_need(d, "metric", str, p, place),
            a=dict(_need(d, "a", dict, p, place)), b=dict(_need(d, "b", dict, p, place)),
            claim_rule=claim, unit=_unit(d, p, place),
            a_name=str(d.get("a_name", "a")), b_name=str(d.get("b_name", "b")),
            b_db=str(d.get("b_db", ""))))
    tables: list[TableSpec] = []
    for i, d in enumerate(data.get("tables") or []):
        place = f"tables[{i}]"
        if not isinstance(d, dict):
            raise SpecError("expected a mapping", file=p, place=place)
        _unknown(d, _TABLE_KEYS, p, place)
        tid = _need(d, "id", str, p, place)
        if tid in seen:
            raise SpecError(f"id '{tid}' given twice", file=p, place=f"{place}.id")
        seen.add(tid)
        if "rows" not in d:
            raise SpecError("expected 'rows'", file=p, place=place)
        rows = _params(d["rows"], p, f"{place}.rows", optional=False)
        cols = _params(d.get("cols"), p, f"{place}.cols", optional=True)
        kind = d.get("kind", "means")
        if kind not in TABLE_KINDS:
            raise SpecError(f"expected a kind among {', '.join(TABLE_KINDS)}, got {kind!r}",
                            file=p, place=f"{place}.kind")
        if not isinstance(d.get("per_s", False), bool):
            raise SpecError(f"expected true or false, got {d['per_s']!r}", file=p,
                            place=f"{place}.per_s")
        assert rows is not None
        tables.append(TableSpec(id=tid, db=_need(d, "db", str, p, place),
                                metric=_need(d, "metric", str, p, place),
                                rows=rows, cols=cols,
                                unit=_unit(d, p, place),
                                where=dict(d.get("where") or {}),
                                or_metric=str(d.get("or_metric", "")),
                                per_s=bool(d.get("per_s", False)), kind=str(kind),
                                pair=str(d.get("pair", "")),
                                relative_to=d.get("relative_to")))
    return Findings(out, tables, planning)


# ----------------------------------------------------------------- reading databases

def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _matches(run: RunRow, names: Mapping[int, str], where: Mapping[str, Any]) -> bool:
    for k, v in where.items():
        if k == "metric":
            continue
        if k == "experiment":
            if names.get(run.experiment_id) != v:
                return False
        elif k not in run.params or _key(run.params[k]) != _key(v):
            return False
    return True


def done_runs(store: Store) -> tuple[list[RunRow], dict[int, str], dict[int, str]]:
    """Every done run with its metrics; experiment names and sources by id."""
    exps = store.experiments()
    runs = [r for r in store.runs(status="done", with_metrics=True)]
    return runs, {e.id: e.name for e in exps}, {e.id: e.source or "" for e in exps}


#: a searched rate -> the metric a search stores instead when it reached the top of its range
#: (the chain kept up with all that could be sent: a lower bound, :mod:`sfclab.traffic.ndr`)
LOWER_BOUNDS = {"ndr_pps": "ndr_lower_bound_pps", "pdr_pps": "pdr_lower_bound_pps"}


#: ``total.M``: a per-pair figure ``M`` times the run's number of sender -> receiver pairs.  A
#: search with several pairs offers each the same rate and reports that rate (its loss goal
#: holds for every pair), so ``total.ndr_pps`` is what all the pairs carried together
TOTAL = "total."


def pairs_of(run: RunRow) -> int:
    """How many sender -> receiver pairs the run's measurement had (1 without ``pairs``)."""
    pairs = run.measure.get("pairs") if isinstance(run.measure, dict) else None
    return len(pairs) if isinstance(pairs, list) and pairs else 1


def metric_value(run: RunRow, metric: str) -> float | None:
    """The run's ``metric`` (``total.M``: ``M`` times :func:`pairs_of`), None when absent."""
    if metric.startswith(TOTAL):
        v = run.metrics.get(metric[len(TOTAL):])
        return None if v is None else v * pairs_of(run)
    return run.metrics.get(metric)


def censored_value(run: RunRow, metric: str) -> float | None:
    """The lower bound a run holds in place of ``metric`` (None: the metric is measured, or
    ``metric`` is not a searched rate)."""
    if metric.startswith(TOTAL):
        base = metric[len(TOTAL):]
        v = censored_value(run, base)
        return None if v is None else v * pairs_of(run)
    bound = LOWER_BOUNDS.get(metric)
    if bound is None or metric in run.metrics or bound not in run.metrics:
        return None
    return run.metrics[bound]


#: a peak read off an offered grid at or above this share of the grid's top offered rate is
#: censored: the setup passed all it was offered (the generator's own 98 % tolerance)
GRID_TOP_SHARE = 0.98


def at_grid_top(run: RunRow, metric: str, value: float) -> bool:
    """Whether a peak read off an offered grid (``max_received_pps``, or a pair's) reached
    the grid's top offered rate: a lower bound of the setup's peak, not the peak."""
    if not metric.endswith("max_received_pps") or not isinstance(run.measure, dict):
        return False
    rates = run.measure.get("rates")
    if not isinstance(rates, list) or not rates or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates):
        return False  # no grid, or a 'max' trial (the generator's most, not an offered top)
    return value >= GRID_TOP_SHARE * float(max(rates))


def point(runs: Sequence[RunRow], names: Mapping[int, str], where: Mapping[str, Any],
          metric: str, what: str) -> tuple[list[float], set[int], bool, int]:
    """The metric's values over the repetitions of the one point ``where`` selects, the
    experiment ids they came from, and whether the point is censored (a repetition whose
    search reached its top holds a lower bound: it is counted at that bound; a peak read off
    an offered grid that reached the grid's top, :func:`at_grid_top`).  Several points
    matching is an error naming ``what``.  Last, how many done runs the point has."""
    metric = str(where.get("metric", metric))
    chosen = [r for r in runs if _matches(r, names, where)]
    points = {(_key(r.params), r.experiment_id) for r in chosen}
    if len(points) > 1:
        raise SpecError(f"{what} selects {len(points)} points, expected one (add parameters "
                        f"or 'experiment' to {dict(where)})")
    measured = [(r, v) for r in chosen if (v := metric_value(r, metric)) is not None]
    bounds = [v for r in chosen if (v := censored_value(r, metric)) is not None]
    at_top = any(at_grid_top(r, metric, v) for r, v in measured)
    return [v for _, v in measured] + bounds, {r.experiment_id for r in chosen}, \
        bool(bounds) or at_top, len(chosen)


def compare(store: Store, f: Finding, b_store: Store | None = None) -> Comparison:
    """The finding's comparison; ``b_store`` holds b's points when the finding has ``b_db``."""
    runs, names, sources = done_runs(store)
    va, ea, ca, da = point(runs, names, f.a, f.metric, f"finding {f.id}: a")
    b_runs, b_names, b_sources = done_runs(b_store) if b_store is not None else \
        (runs, names, sources)
    vb, eb, cb, db = point(b_runs, b_names, f.b, f.metric, f"finding {f.id}: b")
    srcs = {sources[i] for i in ea if sources.get(i)} | {b_sources[i] for i in eb
                                                           if b_sources.get(i)}
    return Comparison(f, summarize(va), summarize(vb), tuple(sorted(srcs)),
                      censored_side(ca, cb), (da, db))


def derived(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters computed from others, for tables whose rows vary across files: the total of
    generated firewall rules over the lab's nodes, and how many nodes carry them (the three
    paper-firewall-spread files sweep the whole ``lab.nodes`` mapping, or one node's count)."""
    nodes: dict[str, Any] = {}
    whole = params.get("lab.nodes")
    if isinstance(whole, dict):
        nodes = {k: v for k, v in whole.items() if isinstance(v, dict)}
    counts = [n["generate"].get("count") for n in nodes.values()
              if isinstance(n.get("generate"), dict)]
    counts += [v for k, v in params.items()
               if k.startswith("lab.nodes.") and k.endswith(".generate.count")]
    counts = [c for c in counts if isinstance(c, int)]
    if not counts:
        return {}
    return {"derived.rules": sum(counts), "derived.firewalls": len(counts)}


def run_params(run: RunRow, names: Mapping[int, str]) -> dict[str, Any]:
    """A run's parameters with its experiment's name and the derived parameters."""
    return {**run.params, **derived(run.params), "experiment": names.get(run.experiment_id)}


def run_value(run: RunRow, metric: str, per_s: bool = False) -> float | None:
    """The run's ``metric``, per second of its trial when ``per_s``; None when absent."""
    v = metric_value(run, metric)
    if v is None:
        return None
    if per_s:
        d = run.measure.get("duration") if isinstance(run.measure, dict) else None
        if not isinstance(d, (int, float)) or d <= 0:
            return None
        v /= d
    return v


def scaled(s: Summary, unit: str) -> Summary:
    k = UNITS[unit]
    return Summary(s.n, s.mean * k, s.std * k, s.ci_low * k, s.ci_high * k, s.confidence)
