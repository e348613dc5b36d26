"""The "ours" tables of docs/reproduction.md, one renderer per table kind.

A table (``tables:`` in scenarios/findings.yaml, :class:`.findings.TableSpec`) is read from the
done runs of one database; the kinds:

- ``means``: the mean ± 95 % interval of a metric, a row per value of ``rows``, a column per
  combination of ``cols`` (``per_s`` turns a count into a rate over the trial; ``point.FIELD``
  takes a field of the run's stored points, e.g. ``point.sent_pps``, what the sender reached);
- ``fit``: the power law t(n) = (1 − l)^(n − 2) · t(2) of :mod:`.fit` over ``rows`` (the chain
  length), fitted on every run as the report does, one row per combination of ``cols``;
- ``rates``: the received rate at each offered rate of the runs' stored offered-vs-received
  points (raw ``points``), a row per combination of ``rows`` (``pair``: one sender's own
  curve), as ``scripts/rate_table.py`` prints them.

The benches the script runs write JSON (``OUT/p4sfc-classifier.json``,
``OUT/trellis-hosts.json``); each has its renderer in :data:`BENCHES`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .findings import (UNITS, TableSpec, at_grid_top, censored_value, done_runs, run_params,
                       run_value)
from .stats import Summary, summarize
from .store import RunRow, Store


def fmt(s: Summary, digits: int = 3) -> str:
    """``mean ± half`` with † when the interval is wider than half the mean."""
    if s.n == 0 or math.isnan(s.mean):
        return "–"
    if math.isnan(s.half_width):
        return f"{s.mean:.{digits}g} (n = 1)"
    wide = " †" if s.mean and s.half_width > abs(s.mean) / 2 else ""
    return f"{s.mean:.{digits}g} ± {s.half_width:.2g}{wide}"


def label(v: Any) -> str:
    if isinstance(v, list):
        return f"{len(v)}"
    if isinstance(v, dict):
        return f"{len(v)} nodes"
    return str(v)


def _short(k: str) -> str:
    return k.split(".")[-1]


def _combo(keys: Sequence[str], values: Sequence[Any]) -> str:
    """A column or row heading: the value alone for one key, ``key=value, ...`` for several."""
    if len(keys) == 1:
        return label(values[0])
    return ", ".join(f"{_short(k)}={label(v)}" for k, v in zip(keys, values))


def _order(d: Mapping[str, tuple[Any, ...]]) -> list[str]:
    def key(k: str) -> tuple[Any, ...]:
        return tuple((0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool)
                     else (1, 0, label(v)) for v in d[k])
    return sorted(d, key=key)


def _selected(store: Store, t: TableSpec) -> tuple[list[RunRow], dict[int, str]]:
    runs, names, _ = done_runs(store)
    out = []
    for r in runs:
        p = run_params(r, names)
        if all(k in p and json.dumps(p[k], sort_keys=True, default=str)
               == json.dumps(v, sort_keys=True, default=str) for k, v in t.where.items()):
            out.append(r)
    return out, names


#: why runs that are done store no figure, for the page's "measured, no figure" blocks
NO_FIGURE_WHY = "a search that ended without a rate: each trial's reasons are in the bundle's trials"


def no_figure(t: TableSpec, done: int) -> str:
    """A table whose runs are done and stored none of its metric: said and stamped, where no
    data at all is a group not run (None)."""
    return (f"measured, no figure: {done} run{'s' if done != 1 else ''} done, none stored "
            f"`{t.metric}` ({NO_FIGURE_WHY})\n")


def _note(t: TableSpec, ns: Iterable[int], what: str = "mean ± 95 % interval") -> str:
    n = "/".join(str(x) for x in sorted(set(ns)))
    return (f"({what}, n = {n}; † interval wider than half the mean; generated from "
            f"`{t.db}.db`)")


#: ``metric: point.FIELD`` in a means table: FIELD of the run's stored points (e.g. what the
#: sender reached, ``point.sent_pps``), the highest over the run's points
POINT = "point."


def point_value(points: Sequence[Mapping[str, Any]], name: str) -> float | None:
    vals = [float(p[name]) for p in points if isinstance(p.get(name), (int, float))]
    return max(vals) if vals else None


def render_means(store: Store, t: TableSpec) -> str | None:
    runs, names = _selected(store, t)
    rows: dict[str, tuple[Any, ...]] = {}
    cols: dict[str, tuple[Any, ...]] = {}
    cells: dict[tuple[str, str], list[float]] = {}
    censored: set[tuple[str, str]] = set()  # cells holding a search's lower bound
    for r in runs:
        params = run_params(r, names)
        bound = False
        if t.metric.startswith(POINT):
            v = point_value(_points(store, r), t.metric[len(POINT):])
        else:
            v = run_value(r, t.metric, t.per_s)
        if v is None and not t.per_s and (v := censored_value(r, t.metric)) is not None:
            bound = True
        elif v is not None and not t.per_s and at_grid_top(r, t.metric, v):
            bound = True
        if v is None and t.or_metric:
            v = run_value(r, t.or_metric, t.per_s)
        if v is None or not all(k in params for k in t.row_keys + t.col_keys):
            continue
        rv = tuple(params[k] for k in t.row_keys)
        cv = tuple(params[k] for k in t.col_keys) if t.col_keys else (t.metric,)
        rk, ck = repr(rv), repr(cv)
        rows.setdefault(rk, rv)
        cols.setdefault(ck, cv)
        cells.setdefault((rk, ck), []).append(v * UNITS[t.unit])
        if bound:
            censored.add((rk, ck))
    if not rows:
        return no_figure(t, len(runs)) if runs else None
    rks, cks = _order(rows), _order(cols)
    head = ", ".join(map(_short, t.row_keys)) + (
        f" \\ {', '.join(map(_short, t.col_keys))}" if t.col_keys else "")
    unit = f" ({t.unit}{' from ' + t.metric if t.per_s else ''})" if t.unit else ""
    out = [f"| {head}{unit} | " + " | ".join(_combo(t.col_keys, cols[c]) if t.col_keys
                                            else t.metric for c in cks) + " |",
           "|---|" + "---|" * len(cks)]
    ref = repr((t.relative_to,)) if t.relative_to is not None else None
    if ref is not None and ref in rows:
        out[0] += "".join(f" {_combo(t.col_keys, cols[c]) + ': ' if t.col_keys else ''}"
                          f"/ {label(t.relative_to)} |" for c in cks)
        out[1] += "---|" * len(cks)
    ns: list[int] = []
    for rk in rks:
        line = []
        for ck in cks:
            s = summarize(cells.get((rk, ck), []))
            ns.append(s.n)
            line.append(("≥ " if (rk, ck) in censored else "") + fmt(s))
        if ref is not None and ref in rows:
            for ck in cks:
                a, b = summarize(cells.get((rk, ck), [])), summarize(cells.get((ref, ck), []))
                line.append(f"{a.mean / b.mean:.2f}" if a.n and b.n and b.mean else "–")
        out.append(f"| {_combo(t.row_keys, rows[rk])} | " + " | ".join(line) + " |")
    note = _note(t, ns)
    if censored:
        note = note[:-1] + ("; ≥ censored: a search in the cell reached the top of its range, "
                            "the generator's most through the setup, or a peak the top of its "
                            "offered grid, so it counts at that lower bound)")
    return "\n".join(out) + "\n\n" + note + "\n"


def _pct(v: float) -> str:
    return "–" if math.isnan(v) else f"{100 * v:.1f} %"


def render_fit(store: Store, t: TableSpec) -> str | None:
    """The power law per series, as the report fits it (every run, not the means)."""
    from .fit import analyze_chain  # light start-up: numpy and scipy only for a fit

    runs, names = _selected(store, t)
    x = t.row_keys[0]
    groups: dict[str, tuple[tuple[Any, ...], list[float], list[float]]] = {}
    for r in runs:
        params = run_params(r, names)
        v = run_value(r, t.metric, t.per_s)
        n = params.get(x)
        if v is None or math.isnan(v) or not isinstance(n, (int, float)) \
                or not all(k in params for k in t.col_keys):
            continue
        key = tuple(params[k] for k in t.col_keys)
        g = groups.setdefault(repr(key), (key, [], []))
        g[1].append(float(n))
        g[2].append(v)
    if not groups:
        return None
    u = f", {t.unit}" if t.unit else ""
    out = [f"| series | per-hop loss l | 95 % CI of l | t(2){u} | R² | law holds up to n | "
           f"then |", "|---|---|---|---|---|---|---|"]
    notes: list[str] = []
    for k in _order({k: g[0] for k, g in groups.items()}):
        key, ns, ts = groups[k]
        name = ", ".join(f"{kk.removeprefix('lab.')}={label(v)}"
                         for kk, v in zip(t.col_keys, key)) or "all runs"
        try:
            a = analyze_chain(ns, ts)
        except ValueError as e:
            notes.append(f"{name}: no fit ({e}).")
            continue
        f = a.fit
        out.append(f"| {name} | {_pct(f.loss)} | {_pct(f.loss_ci[0])} … {_pct(f.loss_ci[1])} | "
                   f"{f.t2 * UNITS[t.unit]:.3g} | {f.r2:.3f} | "
                   f"{'–' if a.holds_up_to is None else a.holds_up_to} | "
                   f"{f'{a.trend} from n = {a.breaks_at}' if a.trend else '–'} |")
    text = "\n".join(out) + "\n\n" + "".join(n + "\n" for n in notes)
    return text + (f"(log-linear least squares over every run, n = "
                   f"{min(min(g[1]) for g in groups.values()):g}…"
                   f"{max(max(g[1]) for g in groups.values()):g} namespaces; generated from "
                   f"`{t.db}.db`)\n")


def _points(store: Store, run: RunRow) -> list[dict[str, Any]]:
    text = store.raw(run.id).get("points")
    if not text:
        return []
    try:
        pts = json.loads(text)
    except ValueError:
        return []
    return [p for p in pts if isinstance(p, dict)] if isinstance(pts, list) else []


def received_at(points: Sequence[Mapping[str, Any]], pair: str = "", sender: str = ""
                ) -> list[tuple[float, float]]:
    """(offered pps, received pps) of a run's stored points; with ``pair`` (``vm1``), that
    sender's own figure from each point's ``pairs``; a point without ``pairs`` is a one-pair
    run's, taken whole when that run's one ``sender`` is ``pair`` (e.g. T1 alone)."""
    out = []
    for p in points:
        if "offered_pps" not in p:
            continue
        if not pair:
            if "received_pps" in p:
                out.append((float(p["offered_pps"]), float(p["received_pps"])))
            continue
        pairs = p.get("pairs")
        if not pairs:  # a one-pair run: the point is its sender's own
            if sender == pair and "received_pps" in p:
                out.append((float(p["offered_pps"]), float(p["received_pps"])))
            continue
        mine = [q for q in pairs if str(q.get("pair", "")).split(":")[0] == pair]
        if mine and "received_pps" in mine[0]:
            out.append((float(p["offered_pps"]), float(mine[0]["received_pps"])))
    return out


def rate_cell(got: Sequence[float]) -> str:
    """Mean received kpps, with the repetitions' range when they differ by more than 5 %."""
    cell = f"{statistics.mean(got) / 1e3:.1f}"
    if len(got) > 1 and max(got) - min(got) > 0.05 * max(got):
        cell += f" ({min(got) / 1e3:.0f}–{max(got) / 1e3:.0f})"
    return cell


def _sender(measure: Mapping[str, Any]) -> str:
    """The one sender of a measurement (``pairs`` of one, or ``from``); "" with several."""
    pairs = measure.get("pairs") or []
    if len(pairs) > 1:
        return ""
    if pairs:
        p = pairs[0]
        return str(p.get("from", "")) if isinstance(p, dict) else str(p).split(":")[0]
    return str(measure.get("from", ""))


def render_rates(store: Store, t: TableSpec) -> str | None:
    runs, names = _selected(store, t)
    rows: dict[str, tuple[Any, ...]] = {}
    cells: dict[str, dict[float, list[float]]] = {}
    reps: list[int] = []
    for r in runs:
        params = run_params(r, names)
        if not all(k in params for k in t.row_keys):
            continue
        curve = received_at(_points(store, r), t.pair, _sender(r.measure))
        if not curve:
            continue
        rv = tuple(params[k] for k in t.row_keys)
        rows.setdefault(repr(rv), rv)
        c = cells.setdefault(repr(rv), {})
        for at, got in curve:
            c.setdefault(at, []).append(got)
    if not rows:
        return None
    offered = sorted({o for cs in cells.values() for o in cs})
    who = f"{t.pair}'s own received kpps" if t.pair else "received kpps"
    out = [f"| {', '.join(map(_short, t.row_keys))} \\ offered | "
           + " | ".join(f"{o / 1e3:g}k" for o in offered) + " |",
           "|---|" + "---|" * len(offered)]
    for rk in _order(rows):
        c = cells[rk]
        reps += [len(v) for v in c.values()]
        out.append(f"| {_combo(t.row_keys, rows[rk])} | "
                   + " | ".join(rate_cell(c[o]) if o in c else "" for o in offered) + " |")
    n = "/".join(str(x) for x in sorted(set(reps)))
    return "\n".join(out) + (f"\n\n({who} at each offered rate, mean of n = {n} with the "
                             f"repetitions' range where they differ by more than 5 %; generated "
                             f"from `{t.db}.db`)\n")


#: kind -> renderer; None when the database has no done run to show (the block keeps its text)
RENDERERS: dict[str, Callable[[Store, TableSpec], str | None]] = {
    "means": render_means, "fit": render_fit, "rates": render_rates}


def render_table(store: Store, t: TableSpec) -> str | None:
    return RENDERERS[t.kind](store, t)


def render_classifier(path: Path) -> str:
    """The classifier bench's figures (bench/bench_sfc_classifier.py --json)."""
    try:
        d = json.loads(path.read_text())
        load, pps, ratio = d["load_100k_s"], d["pps"], d["ratio_to_1"]
        cpu = d.get("load_100k_cpu_s", {})
        sizes = sorted(pps, key=int)
        lines = ["| 100,000 entries loaded from | `sfclab chain classify`, wall s | CPU s |",
                 "|---|---|---|"]
        lines += [f"| {form} | {float(v):.2f} | "
                  f"{'–' if form not in cpu else f'{float(cpu[form]):.2f}'} |"
                  for form, v in load.items()]
        lines += ["", "| classifier entries | datagrams/s through the classifier | of 1 entry |",
                  "|---|---|---|"]
        lines += [f"| {int(n):,} | {float(pps[n]):,.0f} | {100 * float(ratio[n]):.1f} % |"
                  for n in sizes]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SpecError(f"expected the JSON of bench/bench_sfc_classifier.py --json ({e})",
                        file=str(path)) from None
    return "\n".join(lines) + (f"\n\n(medians of the bench's repetitions; goals: load in at most "
                               f"{d.get('load_goal_s', 2.0):g} s, at least "
                               f"{100 * float(d.get('goal_ratio', 0.9)):.0f} % of the 1-entry "
                               f"rate; generated from `{path.name}`)\n")


def render_hosts(path: Path) -> str:
    """Trellis's attach methods on emulated hosts (bench/bench_hosts.py --json)."""
    try:
        d = json.loads(path.read_text())
        out: list[str] = []
        for size, x in d["sizes"].items():
            fig = x["figure"]
            setups = list(x["forwarded_pps"])
            out += [f"{int(size)}-byte frames, medians of {int(d['reps'])} trials of "
                    f"{float(d['duration_s']):g} s ({d['layout']} layout; the figure: "
                    f"`{fig}`):", "",
                    "| setup | forwarded kpps | capacity kpps | µs per frame on the node's "
                    "core (network softirq) | sent kpps |", "|---|---|---|---|---|"]
            out += [f"| {k} | {float(x['forwarded_pps'][k]) / 1e3:.0f} | "
                    f"{float(x['capacity_pps'][k]) / 1e3:.0f} | "
                    f"{float(x['us_per_frame'][k]):.2f} | {float(x['sent_pps'][k]) / 1e3:.0f} |"
                    for k in setups]
            out += ["", f"shortbridge / bridge **{float(x['shortbridge_over_bridge']):.2f}×**, "
                        f"shortbridge / direct {float(x['shortbridge_over_direct']):.2f}×, "
                        f"shortbridge-vxlandev / bridge {float(x['vxlandev_over_bridge']):.2f}× "
                        f"(on `{fig}`)", ""]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SpecError(f"expected the JSON of bench/bench_hosts.py --json ({e})",
                        file=str(path)) from None
    return "\n".join(out) + f"(generated from `{path.name}`)\n"


#: ``<!-- repro:begin bench NAME -->``: OUT/NAME.json, written by a bench the script runs
BENCHES: dict[str, Callable[[Path], str]] = {
    "p4sfc-classifier": render_classifier, "trellis-hosts": render_hosts}


__all__ = ["BENCHES", "render_hosts", "fmt", "render_table", "render_means", "render_fit", "render_rates",
           "render_classifier", "received_at", "rate_cell"]
