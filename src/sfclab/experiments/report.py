"""The report: ``DIR/report.md`` and a self-contained ``DIR/report.html`` from a results store.

The report is built once as a list of blocks (heading, paragraph, table, image) and rendered
twice, so the two files always say the same thing.  Plots go to ``DIR/plots/`` (PNG and SVG);
the Markdown links the PNG files, the HTML embeds them as data URIs so it can be mailed alone.

Per experiment (runs grouped by experiment): what was run (measurement, sweep, repetitions,
seed), how many runs are done / failed / pending, the host environment, then per metric a table
of mean ± 95 % CI (n) against the main swept parameter with one column per series and a plot;
for throughput metrics also the plot relative to the first point and, when the chain length is
swept, the power-law fit per series (:mod:`.fit`) with its residuals; offered-vs-received curves
for rate curves (a raw ``points`` list of trials with ``offered_pps`` and ``received_pps``); and
the failed runs with their errors.  Per-core CPU metrics (``cpu.….cores.…``) are left out.

The main parameter is ``lab.chain.length`` when swept, else the first swept parameter with
numeric values, else the first swept parameter.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fit import analyze_chain
from .plots import plot_fit, plot_offered_received, plot_relative, plot_series
from .stats import Series, Summary, metric_names, series, summarize, swept_params
from .store import ExperimentRow, RunRow, Store
from .units import (OPTION_WORDS, Scale, axis_label, env_value, env_words, metric_words,
                    option_words, param_words, point_words, scale, title)

CHAIN_LENGTH = "lab.chain.length"
THROUGHPUT_RE = re.compile(r"(throughput|bps|bits_per_second|pps|rate|goodput)", re.I)
NOT_THROUGHPUT_RE = re.compile(r"(^cpu\.|loss|lost|latency|jitter|retrans|delay|error)", re.I)
MAX_PLOTTED_METRICS = 16


def is_throughput(metric: str) -> bool:
    """Whether a metric name reads as a throughput (fitted and plotted relative)."""
    return bool(THROUGHPUT_RE.search(metric)) and not NOT_THROUGHPUT_RE.search(metric)


# --------------------------------------------------------------------------- blocks

@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    path: str  # relative to the report directory
    alt: str


Block = Heading | Para | Table | Image


def render_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Table):
            cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
            out.append("| " + " | ".join(cell(h) for h in b.header) + " |")
            out[-1] += "\n|" + "|".join("---" for _ in b.header) + "|"
            for r in b.rows:
                out[-1] += "\n| " + " | ".join(cell(c) for c in r) + " |"
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.path})")
        out.append("")
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;
padding:.25em .6em;text-align:left;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
img{max-width:100%}code{background:#f3f3f3;padding:0 .2em}"""


def _inline(text: str) -> str:
    """Escape, then render `code` spans (the only inline markup the report uses)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def render_html(blocks: Sequence[Block], base: Path, title: str = "sfclab report") -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in b.header)
                       + "</tr></thead><tbody>")
            for r in b.rows:
                out.append("<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in r) + "</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, Image):
            data = base64.b64encode((base / b.path).read_bytes()).decode()
            out.append(f'<figure><img alt="{html.escape(b.alt)}" '
                       f'src="data:image/png;base64,{data}"></figure>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- content

def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "x"


def _num(v: float, digits: int = 4) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:.{digits}g}"


def _pct(v: float) -> str:
    return "–" if math.isnan(v) else f"{100 * v:.1f} %"


def main_parameter(runs: Sequence[RunRow]) -> str | None:
    swept = swept_params(runs)
    if CHAIN_LENGTH in swept:
        return CHAIN_LENGTH
    for p in swept:
        vals = [r.params[p] for r in runs if p in r.params]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return p
    return swept[0] if swept else None


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record with dotted keys: ``{"kernel": {"release": r}}`` -> ``kernel.release``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


#: a point whose 95 % interval is wider than this share of its mean needs more repetitions
WIDE_INTERVAL = 0.5
WIDE_MARK = "†"
WIDE_NOTE = (f"{WIDE_MARK} too few repetitions: the 95 % interval is wider than half the mean; "
             "repeat the runs before reading a difference from it.")


def too_wide(p: Summary) -> bool:
    return (not math.isnan(p.half_width) and p.mean != 0
            and p.half_width > WIDE_INTERVAL * abs(p.mean))


def _cell(p: Summary, sc: Scale, *, with_n: bool = True) -> str:
    if math.isnan(p.mean):
        return "–"
    text = sc.format(p.mean)
    if not math.isnan(p.half_width):
        text = f"{sc(p.mean):.4g} ± {sc(p.half_width):.2g}" + (f" {sc.unit}" if sc.unit else "")
    return text + (f" (n={p.n})" if with_n else "") + (f" {WIDE_MARK}" if too_wide(p) else "")


def _series_table(all_series: list[Series]) -> tuple[Table, Scale, bool]:
    """The series side by side in one unit; also the unit and whether a point is too wide."""
    xs: list[Any] = []
    for s in all_series:
        xs += [x for x in s.xs if x not in xs]
    sc = scale(all_series[0].metric, [p.mean for s in all_series for p in s.points])
    header = [param_words(all_series[0].x)] + [s.name for s in all_series]
    rows = []
    wide = False
    for x in xs:
        row = [str(x)]
        for s in all_series:
            p = s.points[s.xs.index(x)] if x in s.xs else None
            row.append(_cell(p, sc) if p else "")
            wide = wide or (p is not None and too_wide(p))
        rows.append(row)
    return Table(header, rows), sc, wide


#: what a measurement measures, in the order a reader looks for it
PRIMARY = ("throughput_bps", "received_pps", "ndr_pps", "pdr_pps", "max_received_pps")


def ordered_metrics(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The metrics to show one by one (the measured quantity first, then the rest by name) and
    the CPU totals, shown together in one compact table (per-core figures stay in the store)."""
    cpu = [n for n in names if n.startswith("cpu.") and ".cores." not in n]
    rest = [n for n in names if not n.startswith("cpu.")]
    first = [n for p in PRIMARY for n in rest if n == p]
    first += [n for n in rest if n not in first and is_throughput(n)]
    return first + [n for n in rest if n not in first], cpu


def _curve_points(raw_text: str, *, limited: bool = False) -> list[tuple[float, float]]:
    """(offered, received) pairs from a rate curve's raw ``points`` (or ``curve``): a JSON list
    of trials with ``offered_pps`` and ``received_pps``; with ``limited``, only the trials
    marked ``measurement_limited``."""
    try:
        data = json.loads(raw_text)
    except ValueError:
        return []
    pts = []
    for t in data if isinstance(data, list) else []:
        if not isinstance(t, dict) or (limited and not t.get("measurement_limited")):
            continue
        off = t.get("offered_pps", t.get("offered"))
        rec = t.get("received_pps", t.get("received"))
        if isinstance(off, (int, float)) and isinstance(rec, (int, float)):
            pts.append((float(off), float(rec)))
    return pts


#: what a measurement type measures, in words
MEASUREMENT_WORDS = {"iperf": "iperf3 throughput", "rate": "rate curve",
                     "ndr": "NDR/PDR search", "latency": "latency"}


def measurement_words(m: Mapping[str, Any], swept: Sequence[str] = ()) -> str:
    """An experiment file's ``measure:`` in words: ``iperf3 throughput (flows (swept),
    duration 2 s, from src, to dst)``."""
    opts = ", ".join(f"{OPTION_WORDS.get(k, (param_words('measure.' + k),))[0]} (swept)"
                     if f"measure.{k}" in swept else option_words(k, v) or ""
                     for k, v in m.items()
                     if k != "type" and (f"measure.{k}" in swept or option_words(k, v)))
    kind = str(m.get("type"))
    return f"{MEASUREMENT_WORDS.get(kind, kind)} ({opts})"


def curve_name(r: RunRow) -> str:
    """A run's rate curve in words: ``chain length 2, repetition 1``."""
    return f"{point_words(r.params)}, repetition {r.repetition}"


def experiment_blocks(store: Store, exp: ExperimentRow, out_dir: Path,
                      fit_metrics: Sequence[str] | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(2, f"Experiment `{exp.name}` (id {exp.id})")]
    spec = exp.spec
    if spec.get("description"):
        blocks.append(Para(spec["description"]))
    counts = store.counts(exp.id)
    m = spec.get("measure", {})
    swept = spec.get("sweep", {})
    blocks.append(Para(f"Measurement: {measurement_words(m, swept)}; "
                       f"{spec.get('repetitions', 1)} "
                       f"repetitions in shuffled order (seed {exp.seed}); warm-up "
                       f"{spec.get('warmup', 0)} s, cool-down {spec.get('cooldown', 0)} s. "
                       f"Runs: {counts['done']} done, {counts['failed']} failed, "
                       f"{counts['pending'] + counts['running']} not run."
                       + (f" Source: `{exp.source}`." if exp.source else "")))
    if spec.get("sweep"):
        blocks.append(Table(["swept parameter", "values"],
                            [[param_words(p), ", ".join(map(str, v))]
                             for p, v in spec["sweep"].items()]))

    envs = store.environments(exp.id)
    if envs:
        blocks.append(Heading(3, "Environment"))
        rows = [[env_words(k), env_value(k, v)] for k, v in flatten(envs[-1]).items()]
        blocks.append(Table(["", "value"], rows))
        kernels = {json.dumps(e.get("kernel"), sort_keys=True) for e in envs} | \
            {str(e.get("hostname")) for e in envs}
        if len(envs) > 1 and len(kernels) > 2:
            blocks.append(Para("Note: the runs were made in sessions on different hosts or "
                               "kernels; the table shows the last one."))

    runs = store.runs(exp.id, with_metrics=True)
    done = [r for r in runs if r.status == "done"]
    if not done:
        blocks.append(Para("No finished runs yet."))
    else:
        blocks += _metric_blocks(exp, done, out_dir, fit_metrics)
        blocks += _curve_blocks(store, exp, done, out_dir)

    failed = [r for r in runs if r.status == "failed"]
    if failed:
        blocks.append(Heading(3, "Failed runs"))
        blocks.append(Table(["run", "parameters", "repetition", "error"],
                            [[str(r.id), point_words(r.params),
                              str(r.repetition), (r.error or "")[:300]] for r in failed]))
    return blocks


def _metric_blocks(exp: ExperimentRow, done: list[RunRow], out_dir: Path,
                   fit_metrics: Sequence[str] | None) -> list[Block]:
    blocks: list[Block] = []
    x = main_parameter(done)
    names = metric_names(done)
    if x is None:
        shown, cpu = ordered_metrics(names)
        rows = []
        for n in shown + cpu:
            s = summarize(r.metrics.get(n, math.nan) for r in done)
            sc = scale(n, [s.mean])
            rows.append([metric_words(n), _cell(s, sc, with_n=False), sc.format(s.std),
                         str(s.n)])
        blocks.append(Heading(3, "Metrics"))
        blocks.append(Table(["metric", "mean ± 95 % CI", "std", "n"], rows))
        if any(WIDE_MARK in r[1] for r in rows):
            blocks.append(Para(WIDE_NOTE))
        return blocks
    plotted = 0
    shown, cpu = ordered_metrics(names)
    for name in shown:
        all_series = series(done, name, x)
        if not all_series:
            continue
        table, sc, wide = _series_table(all_series)
        blocks.append(Heading(3, title(name, x)))
        blocks.append(table)
        if wide:
            blocks.append(Para(WIDE_NOTE))
        if plotted < MAX_PLOTTED_METRICS:
            stem = out_dir / "plots" / f"{exp.id}-{_slug(name)}"
            plot_series(all_series, stem, title=title(name, x, of=exp.name),
                        ylabel=axis_label(name, sc), yscale=sc.factor)
            blocks.append(Image(f"plots/{stem.name}.png", title(name, x)))
            plotted += 1
            numeric = all(isinstance(v, (int, float)) for s in all_series for v in s.xs)
            wanted = name in fit_metrics if fit_metrics is not None else is_throughput(name)
            if wanted and numeric:
                stem_r = out_dir / "plots" / f"{exp.id}-{_slug(name)}-relative"
                plot_relative(all_series, stem_r,
                              title=f"{exp.name}: {metric_words(name)}, relative")
                blocks.append(Image(f"plots/{stem_r.name}.png", f"{metric_words(name)} relative"))
            if wanted and x == CHAIN_LENGTH:
                blocks += _fit_blocks(exp, done, name, all_series, out_dir)
    if cpu:
        blocks += _cpu_blocks(done, cpu, x)
    return blocks


def _cpu_blocks(done: list[RunRow], cpu: list[str], x: str) -> list[Block]:
    """CPU and per-process figures in one table: one row per point, one column per figure
    (means over the repetitions)."""
    columns: dict[str, list[Series]] = {n: series(done, n, x) for n in cpu}
    rows: dict[str, list[str]] = {}
    header = [param_words(x)] + [metric_words(n) for n in cpu]
    for j, n in enumerate(cpu):
        sc = scale(n, [p.mean for s in columns[n] for p in s.points])
        for s in columns[n]:
            for xv, p in zip(s.xs, s.points):
                key = f"{xv}" + (f" ({s.name})" if s.label else "")
                rows.setdefault(key, [key] + [""] * len(cpu))[j + 1] = sc.format(p.mean, 3)
    return [Heading(3, f"CPU during the measurements, against {param_words(x)}"),
            Para("Means over the repetitions: shares of all cores in %, per-process CPU in "
                 "seconds."),
            Table(header, list(rows.values()))]


def _fit_blocks(exp: ExperimentRow, done: list[RunRow], name: str, all_series: list[Series],
                out_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading(4, "Power law t(n) = (1 − l)^(n − 2) · t(2) for "
                                      f"{metric_words(name)}")]
    rows: list[list[str]] = []
    notes: list[Block] = []
    sc = scale(name, [p.mean for s in all_series for p in s.points])
    for i, s in enumerate(all_series):
        mine = [r for r in done if all(r.params.get(k) == v for k, v in s.label.items())
                and name in r.metrics and not math.isnan(r.metrics[name])]
        ns = [float(r.params[CHAIN_LENGTH]) for r in mine]
        ts = [r.metrics[name] for r in mine]
        try:
            a = analyze_chain(ns, ts)
        except ValueError as e:
            notes.append(Para(f"{s.name}: no fit ({e})."))
            continue
        f = a.fit
        rows.append([s.name, _pct(f.loss), f"{_pct(f.loss_ci[0])} … {_pct(f.loss_ci[1])}",
                     sc.format(f.t2), f"{f.r2:.3f}",
                     "–" if a.holds_up_to is None else str(a.holds_up_to),
                     a.trend and f"{a.trend} from n = {a.breaks_at}" or "–",
                     ", ".join(f"{n1}→{n2}: {_pct(v)}" for n1, n2, v in a.local_losses)])
        notes.append(Para(f"{s.name}: {a.describe(sc.format)}. Residuals (observed/fitted − 1): "
                          + ", ".join(f"n={r.n}: {100 * r.relative:+.1f} %" for r in f.residuals)
                          + "."))
        stem = out_dir / "plots" / f"{exp.id}-{_slug(name)}-fit-{i}"
        plot_fit(ns, ts, a, stem, ylabel=axis_label(name, sc), yscale=sc.factor,
                 title=f"{exp.name}: {metric_words(name)}, {point_words(s.label)}")
        notes.append(Image(f"plots/{stem.name}.png", f"power-law fit, {s.name}"))
    if rows:
        blocks.append(Table(["series", "per-hop loss l", "95 % CI of l", "t(2)", "R²",
                             "holds up to n", "then", "local loss per hop"], rows))
    return blocks + notes


def _curve_blocks(store: Store, exp: ExperimentRow, done: list[RunRow],
                  out_dir: Path) -> list[Block]:
    curves: dict[str, list[tuple[float, float]]] = {}
    limited: list[tuple[float, float]] = []
    for r in done:
        raw = store.raw(r.id)
        text = raw.get("points") or raw.get("curve")
        if not text:
            continue
        curves.setdefault(curve_name(r), []).extend(_curve_points(text))
        limited += _curve_points(text, limited=True)
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return []
    stem = out_dir / "plots" / f"{exp.id}-offered-received"
    sc = scale("offered_pps", [o for pts in curves.values() for o, _ in pts])
    plot_offered_received(curves, stem, unit=sc.unit, scale=sc.factor,
                          title=f"{exp.name}: received rate against offered rate",
                          limited=limited)
    return [Heading(3, "Received rate against offered rate"),
            Image(f"plots/{stem.name}.png", "offered vs received")]


def build_report(store: Store, out_dir: str | Path, *,
                 experiments: Sequence[int | str] | None = None,
                 fit_metrics: Sequence[str] | None = None) -> Path:
    """Write ``out_dir/report.md``, ``out_dir/report.html`` and ``out_dir/plots/``; return the
    Markdown path.  ``fit_metrics`` overrides the throughput-by-name guess of what to fit."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exps = [store.experiment(e) for e in experiments] if experiments else store.experiments()
    blocks: list[Block] = [Heading(1, "sfclab report"),
                           Para(f"Results database `{store.path}`: {len(exps)} experiment(s). "
                                "Intervals are 95 % Student-t confidence intervals of the mean "
                                "over repetitions.")]
    for e in exps:
        blocks += experiment_blocks(store, e, out, fit_metrics)
    md = out / "report.md"
    md.write_text(render_markdown(blocks), encoding="utf-8")
    (out / "report.html").write_text(render_html(blocks, out), encoding="utf-8")
    return md
