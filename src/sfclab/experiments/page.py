"""Filling docs/reproduction.md from a run of scripts/reproduce.sh.

Generated parts of the page sit between markers; everything outside them is hand-written and
kept as it is::

    <!-- repro:begin table p-fig1 run=ID -->   a table of scenarios/findings.yaml (``tables``)
    <!-- repro:begin finding P1 -->        one finding's numbers and computed verdict
    <!-- repro:begin findings -->          all findings: ratio, its interval, verdict, counts
    <!-- repro:begin environment -->       machine, tool versions, loads, wall times
    <!-- repro:begin bench p4sfc-classifier -->   a bench's OUT/NAME.json (pagetables.BENCHES)
    ... generated ...
    <!-- repro:end -->

Every block a bundle (:mod:`.bundle`) fills is stamped with the bundle's run id
(``run=ID``).  The page is rendered from one bundle: a block the bundle has no data for (its
group was not run, or is still running) is refused, naming the block, since keeping its old text
would mix runs on one page; ``partial=True`` (``repro_page.py render --partial``, for a run of
a few groups) keeps such blocks with their old text and old stamp, and ``check`` then reports
them.  :func:`check` re-renders the page from a bundle and names the first block whose stamp or
text differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import SpecError
from .findings import Comparison, Finding, Findings, compare, point, scaled
from .pagetables import BENCHES, NO_FIGURE_WHY, fmt, render_table
from .stats import Summary
from .store import Store
from .verdicts import HOLDS, INCONCLUSIVE, NOT, UNTESTABLE, VERDICTS

_BLOCK = re.compile(r"(<!-- repro:begin (?P<what>[a-z]+)(?: (?P<id>(?!run=)[\w.:-]+))?"
                    r"(?: run=(?P<run>[\w.:+-]+))? -->\n)"
                    r"(?P<body>.*?)(?P<end><!-- repro:end -->)", re.S)


def _name(m: re.Match[str]) -> str:
    return m.group("what") + (f" {m.group('id')}" if m.group("id") else "")


def render_no_figure(c: Comparison) -> str:
    """A finding whose runs were done and gave no figure on a side: said, not judged."""
    f = c.finding
    sides = [(f.a_name, c.a, c.done[0]), (f.b_name, c.b, c.done[1])]
    told = "; ".join(
        f"{name}: {done} run{'s' if done != 1 else ''} done, " +
        ("none with a figure" if x.n == 0 else f"{fmt(scaled(x, f.unit))} {f.unit}".rstrip())
        for name, x, done in sides)
    return (f"measured, no figure: {told}. No run of that side stored `{f.metric}` "
            f"({NO_FIGURE_WHY}); no ratio, no verdict (rule {f.rule_text()})")


def render_comparison(c: Comparison) -> str:
    f = c.finding
    a, b = scaled(c.a, f.unit), scaled(c.b, f.unit)
    u = f" {f.unit}" if f.unit else ""
    def n(x: Summary) -> str:
        return "" if x.n == 1 else f" (n = {x.n})"
    return (f"{f.a_name} {_bound(c, 'a')}{fmt(a)}{u}{n(a)} against {f.b_name} "
            f"{_bound(c, 'b')}{fmt(b)}{u}{n(b)}: "
            f"ratio {c.ratio:.3g}, {_interval(c)} (published "
            f"{f.published or f.rule_text()}, rule {f.rule_text()}) -> verdict "
            f"**{c.verdict}** ({c.reason})")


def _bound(c: Comparison, side: str) -> str:
    """"≥ " before a censored side's figure: its search reached the top of its range."""
    return "≥ " if side in c.censored else ""


def _interval(c: Comparison) -> str:
    i = c.interval
    return f"95 % interval {i.format()}" if i.defined or i.censored else "no 95 % interval"


def counts(comps: Mapping[str, Comparison | None], findings: list[Finding]) -> str:
    """One sentence: how many findings got each verdict (not testable ones are not scored)."""
    measured = [c for f in findings if (c := comps.get(f.id)) is not None]
    got = [c.verdict for c in measured if not c.no_figure]
    none = len(measured) - len(got)
    n = {v: got.count(v) for v in VERDICTS}
    scored = len(got) - n[UNTESTABLE]
    return (f"Of {len(findings)} findings, {len(measured)} were measured"
            f"{f' ({none} of them with no figure on a side)' if none else ''}; of the {scored} "
            f"scored, {n[HOLDS]} hold, {n[NOT]} do not hold and {n[INCONCLUSIVE]} are "
            f"inconclusive; {n[UNTESTABLE]} are not testable here (reported, not scored).\n")


def render_findings(comps: Mapping[str, Comparison | None], findings: list[Finding]) -> str:
    out = ["| # | published finding | ours | ratio [95 % interval] | rule | verdict |",
           "|---|---|---|---|---|---|"]
    for f in findings:
        c = comps.get(f.id)
        if c is None:
            out.append(f"| {f.id} | {f.claim} | not run | – | {f.rule_text()} | – |")
            continue
        if c.no_figure:
            names = " and ".join(n for s, n in (("a", f.a_name), ("b", f.b_name))
                                 if s in c.no_figure)
            out.append(f"| {f.id} | {f.claim} | no figure for {names} (runs done) | – | "
                       f"{f.rule_text()} | – |")
            continue
        a, b = scaled(c.a, f.unit), scaled(c.b, f.unit)
        out.append(f"| {f.id} | {f.claim} | {f.a_name} {_bound(c, 'a')}{fmt(a)} vs "
                   f"{f.b_name} {_bound(c, 'b')}{fmt(b)} "
                   f"{f.unit} | {c.ratio:.3g} [{c.interval.format()}] | {f.rule_text()} | "
                   f"{c.verdict} |")
    return "\n".join(out) + "\n\n" + counts(comps, findings)


def comparisons(findings: Findings, out_dir: Path) -> dict[str, Comparison | None]:
    """Each finding's comparison, None where a database of it was not produced by this run."""
    res: dict[str, Comparison | None] = {}
    for f in findings.findings:
        paths = [out_dir / f"{db}.db" for db in f.dbs]
        if not all(p.is_file() for p in paths):
            res[f.id] = None
            continue
        with Store(paths[0], readonly=True) as store:
            if len(paths) == 1:
                res[f.id] = compare(store, f)
                continue
            with Store(paths[1], readonly=True) as b_store:
                res[f.id] = compare(store, f, b_store)
    # a side not measured yet (still running) leaves the finding out; one whose runs are done
    # and gave no figure is kept, rendered so and not judged (Comparison.no_figure)
    return {k: None if c is None or c.pending else c for k, c in res.items()}


def fill(page: str, findings: Findings, out_dir: Path,
         environment: Callable[[], str] | None = None, *, run_id: str,
         partial: bool = False) -> str:
    """The page with every marked block regenerated from the databases in ``out_dir`` and
    stamped ``run=run_id`` (see the module docstring for ``partial``)."""
    comps = comparisons(findings, out_dir)
    by_id = {f.id: f for f in findings.findings}
    tables = {t.id: t for t in findings.tables}

    def block(m: re.Match[str]) -> str:
        what, ident = m.group("what"), m.group("id")
        new: str | None
        if what == "findings":
            new = render_findings(comps, findings.findings)
        elif what == "finding":
            if ident not in by_id:
                raise SpecError(f"the page names finding '{ident}', not in the findings file")
            c = comps[ident]
            new = None if c is None else \
                (render_no_figure(c) if c.no_figure else render_comparison(c)) + "\n"
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
        elif what == "bench":
            if ident not in BENCHES:
                raise SpecError(f"the page names bench '{ident}', expected one of "
                                f"{', '.join(BENCHES)}")
            path = out_dir / f"{ident}.json"
            new = BENCHES[ident](path) if path.is_file() else None
        else:
            raise SpecError(f"unknown block 'repro:begin {what}' in the page")
        if new is None:
            if not partial:
                raise SpecError(f"block '{_name(m)}' has no data in bundle {run_id}: the page "
                                f"would mix runs (render from a whole run, or --partial)")
            return m.group(0)
        return (f"<!-- repro:begin {_name(m)} run={run_id} -->\n" + new + m.group("end"))

    return _BLOCK.sub(block, page)


def check(page: str, findings: Findings, out_dir: Path,
          environment: Callable[[], str] | None = None, *, run_id: str) -> str | None:
    """None when every block of ``page`` is what bundle ``out_dir`` (run ``run_id``) renders,
    stamp included; else a line naming the first block that differs."""
    blocks = list(_BLOCK.finditer(page))
    if not blocks:
        return "the page has no repro:begin blocks"
    for m in blocks:
        if m.group("run") != run_id:
            return (f"block '{_name(m)}' is stamped run={m.group('run') or '(none)'}, the "
                    f"bundle is run {run_id}")
        try:
            want = fill(m.group(0), findings, out_dir, environment, run_id=run_id)
        except SpecError as e:
            return f"block '{_name(m)}': {e}"
        if want != m.group(0):
            return f"block '{_name(m)}' differs from what bundle {run_id} renders"
    return None


__all__ = ["fill", "check", "render_table", "render_findings", "render_comparison",
           "point"]
