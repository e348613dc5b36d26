"""Filling docs/reproduction.md from a run of scripts/reproduce.sh.

Generated parts of the page sit between markers; everything outside them is hand-written and
kept as it is::

    <!-- repro:begin table p-fig1 -->      a table of scenarios/findings.yaml (``tables``)
    <!-- repro:begin finding P1 -->        one finding's numbers and computed verdict
    <!-- repro:begin findings -->          all findings: verdict, separated or not
    <!-- repro:begin environment -->       machine, tool versions, loads, wall times
    ... generated ...
    <!-- repro:end -->

A block whose database is not in the run's directory (its group was not run this time) keeps
its previous text, so running a subset of the script refreshes only what it measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .findings import (UNITS, Comparison, Finding, Findings, TableSpec, compare, done_runs,
                       point, scaled)
from .stats import Summary, summarize
from .store import Store

_BLOCK = re.compile(r"(<!-- repro:begin (?P<what>[a-z]+)(?: (?P<id>[\w.:-]+))? -->\n)"
                    r"(?P<body>.*?)(<!-- repro:end -->)", re.S)


def fmt(s: Summary, digits: int = 3) -> str:
    """``mean ± half`` with † when the interval is wider than half the mean."""
    if s.n == 0 or math.isnan(s.mean):
        return "–"
    if math.isnan(s.half_width):
        return f"{s.mean:.{digits}g} (n = 1)"
    wide = " †" if s.mean and s.half_width > abs(s.mean) / 2 else ""
    return f"{s.mean:.{digits}g} ± {s.half_width:.2g}{wide}"


def _label(v: Any) -> str:
    if isinstance(v, list):
        return f"{len(v)}"
    return str(v)


def render_table(store: Store, t: TableSpec) -> str:
    runs, names, _ = done_runs(store)
    runs = [r for r in runs if all(
        (names.get(r.experiment_id) == v) if k == "experiment" else
        (k in r.params and r.params[k] == v) for k, v in t.where.items())]
    rows: dict[str, Any] = {}
    cols: dict[str, Any] = {}
    cells: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        params = {**r.params, "experiment": names.get(r.experiment_id)}
        metric = t.metric if t.metric in r.metrics else t.or_metric
        if metric not in r.metrics or t.rows not in params:
            continue
        rv = params[t.rows]
        cv = params.get(t.cols) if t.cols else t.metric
        rk, ck = repr(rv), repr(cv)
        rows.setdefault(rk, rv)
        cols.setdefault(ck, cv)
        cells.setdefault((rk, ck), []).append(r.metrics[metric] * UNITS[t.unit])
    if not rows:
        return f"(no done runs of {t.metric} in {t.db})\n"

    def order(d: dict[str, Any]) -> list[str]:
        return sorted(d, key=lambda k: (0, d[k], "") if isinstance(d[k], (int, float))
                      else (1, 0, _label(d[k])))
    rks, cks = order(rows), order(cols)
    head = t.rows.split(".")[-1] + (f" \\ {t.cols.split('.')[-1]}" if t.cols else "")
    unit = f" ({t.unit})" if t.unit else ""
    out = [f"| {head}{unit} | " + " | ".join(_label(cols[c]) if t.cols else t.metric
                                            for c in cks) + " |",
           "|---|" + "---|" * len(cks)]
    ns: set[int] = set()
    for rk in rks:
        line = []
        for ck in cks:
            s = summarize(cells.get((rk, ck), []))
            ns.add(s.n)
            line.append(fmt(s))
        out.append(f"| {_label(rows[rk])} | " + " | ".join(line) + " |")
    n = "/".join(str(x) for x in sorted(ns))
    out.append("")
    out.append(f"(mean ± 95 % interval, n = {n}; † interval wider than half the mean; "
               f"generated from `{t.db}.db`)")
    return "\n".join(out) + "\n"


def render_comparison(c: Comparison) -> str:
    f = c.finding
    a, b = scaled(c.a, f.unit), scaled(c.b, f.unit)
    sep = "separated" if c.separated else "**NOT separated**"
    u = f" {f.unit}" if f.unit else ""
    def n(x: Summary) -> str:
        return "" if x.n == 1 else f" (n = {x.n})"
    return (f"{f.a_name} {fmt(a)}{u}{n(a)} against {f.b_name} {fmt(b)}{u}{n(b)}: "
            f"ratio {c.ratio:.3g} (published {f.published or _range(f.expect)}, "
            f"rule {_range(f.expect)}), {sep} -> verdict **{c.verdict}**")


def _range(e: tuple[float, float]) -> str:
    return f"{e[0]:g}–{e[1]:g}×"


def render_findings(comps: Mapping[str, Comparison | None], findings: list[Finding]) -> str:
    out = ["| # | published finding | ours | ratio (rule) | intervals | verdict |",
           "|---|---|---|---|---|---|"]
    for f in findings:
        c = comps.get(f.id)
        if c is None:
            out.append(f"| {f.id} | {f.claim} | not run | – | – | – |")
            continue
        a, b = scaled(c.a, f.unit), scaled(c.b, f.unit)
        out.append(f"| {f.id} | {f.claim} | {f.a_name} {fmt(a)} vs {f.b_name} {fmt(b)} "
                   f"{f.unit} | {c.ratio:.3g} ({_range(f.expect)}) | "
                   f"{'separated' if c.separated else 'NOT separated'} | {c.verdict} |")
    return "\n".join(out) + "\n"


def comparisons(findings: Findings, out_dir: Path) -> dict[str, Comparison | None]:
    """Each finding's comparison, None where its database was not produced by this run."""
    res: dict[str, Comparison | None] = {}
    for f in findings.findings:
        db = out_dir / f"{f.db}.db"
        if not db.is_file():
            res[f.id] = None
            continue
        with Store(db, readonly=True) as store:
            res[f.id] = compare(store, f)
    return res


def fill(page: str, findings: Findings, out_dir: Path,
         environment: Callable[[], str] | None = None) -> str:
    """The page with every marked block regenerated from the databases in ``out_dir``."""
    comps = comparisons(findings, out_dir)
    by_id = {f.id: f for f in findings.findings}
    tables = {t.id: t for t in findings.tables}

    def block(m: re.Match[str]) -> str:
        what, ident, body = m.group("what"), m.group("id"), m.group("body")
        new: str | None
        if what == "findings":
            new = render_findings(comps, findings.findings)
        elif what == "finding":
            if ident not in by_id:
                raise SpecError(f"the page names finding '{ident}', not in the findings file")
            c = comps[ident]
            new = render_comparison(c) + "\n" if c else None
        elif what == "table":
            if ident not in tables:
                raise SpecError(f"the page names table '{ident}', not in the findings file")
            db = out_dir / f"{tables[ident].db}.db"
            if db.is_file():
                with Store(db, readonly=True) as store:
                    new = render_table(store, tables[ident])
            else:
                new = None
        elif what == "environment":
            new = environment() if environment else None
        else:
            raise SpecError(f"unknown block 'repro:begin {what}' in the page")
        return m.group(1) + (body if new is None else new) + m.group(5)

    return _BLOCK.sub(block, page)


def unseparated(findings: Findings, out_dir: Path) -> list[Comparison]:
    """Comparisons whose verdict more repetitions could still decide: intervals that overlap
    where a difference is expected, or where none is expected but the ratio is outside the
    range (separated, it would not hold; or it may come back into range), and comparisons with
    a side of fewer than 2 repetitions (no interval at all).  A finding that expects no
    difference and whose ratio is in range needs no separation."""
    def undecided(c: Comparison) -> bool:
        lo, hi = c.finding.expect
        if c.separated:
            return False
        return (not lo <= 1.0 <= hi or not lo <= c.ratio <= hi
                or min(c.a.n, c.b.n) < 2)
    return [c for c in comparisons(findings, out_dir).values()
            if c is not None and undecided(c)]


__all__ = ["fill", "render_table", "render_findings", "render_comparison", "unseparated",
           "point"]
