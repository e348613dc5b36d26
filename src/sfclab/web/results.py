"""A results database shaped for the page: experiments, runs, plot data and the report's tables.

Everything is computed by the experiments layer, as the report computes it: series of mean and
95 % Student-t interval per point (:func:`sfclab.experiments.stats.series`) against the main
swept parameter (:func:`sfclab.experiments.report.main_parameter`), the power-law fit of
throughput against chain length (:func:`sfclab.experiments.fit.analyze_chain`) with its curve,
offered-vs-received curves from rate measurements' raw trials, and the report's own blocks
(:func:`sfclab.experiments.report.experiment_blocks`) with its tables and paragraphs; the
page only draws them (Plotly).  Values are in the unit the report picks for each metric
(:func:`sfclab.experiments.units.scale`).  The database is opened read-only; NaN becomes null.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..experiments.compare import clean, compare, where_it_ran
from ..experiments.report import (CHAIN_LENGTH, MAX_PLOTTED_METRICS, Heading, Para, Table,
                                  _curve_points, curve_name, experiment_blocks, is_throughput,
                                  main_parameter, ordered_metrics)
from ..experiments.stats import floored, metric_names, series
from ..experiments.store import ExperimentRow, RunRow, Store
from ..experiments.units import axis_label, nonnegative, param_words, scale, title
from .errors import NotFound

#: points on a drawn fit curve
FIT_POINTS = 50
#: report tables kept (per database version and experiment)
TABLES_KEPT = 16


#: a results database the API may name: a plain file name, never a path
DB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def beside(served: str, name: str) -> str:
    """The database ``name`` names, in the directory of the one ``serve --db`` serves: a
    request names a file there and never reaches any other file of the machine."""
    where = Path(served).resolve().parent
    if not DB_NAME.fullmatch(name):
        raise SpecError(f"expected the file name of a results database in {where} (the "
                        "directory of 'serve --db'): letters, digits, '.', '_' and '-', at "
                        f"most 128, no path; got {name[:80]!r}", place="db")
    return str(where / name)


def open_store(db: str) -> Store:
    """The database read-only; a missing file is 404, a foreign one bad input (422)."""
    if not os.path.isfile(db):
        raise NotFound(f"no results database at {db!r} (run an experiment first, or pass --db)")
    return Store(db, readonly=True)


def experiment(store: Store, ref: str) -> ExperimentRow:
    try:
        return store.experiment(ref)
    except SpecError as e:
        if e.message.startswith("no experiment"):
            raise NotFound(str(e)) from None
        raise


def run(store: Store, run_id: int) -> RunRow:
    try:
        return store.run(run_id)
    except SpecError as e:
        if e.message.startswith("no run"):
            raise NotFound(str(e)) from None
        raise


def describe(store: Store, e: ExperimentRow) -> dict[str, Any]:
    return {"id": e.id, "name": e.name, "created": e.created, "source": e.source,
            "seed": e.seed, "description": e.spec.get("description"),
            "measure": (e.spec.get("measure") or {}).get("type"),
            "sweep": e.spec.get("sweep") or {}, "counts": store.counts(e.id)}


def _fit(done: list[RunRow], metric: str, label: dict[str, Any], factor: float
         ) -> dict[str, Any] | None:
    mine = [r for r in done if all(r.params.get(k) == v for k, v in label.items())
            and metric in r.metrics and not math.isnan(r.metrics[metric])]
    ns = [float(r.params[CHAIN_LENGTH]) for r in mine]
    ts = [r.metrics[metric] for r in mine]
    import numpy as np  # light start-up: numpy and scipy (1 s of CPU) only for a fit

    from ..experiments.fit import analyze_chain

    try:
        a = analyze_chain(ns, ts)
    except ValueError as e:
        return {"error": str(e)}
    f = a.fit
    xs = np.linspace(min(ns), max(ns), FIT_POINTS)
    return {"loss": f.loss, "loss_ci": list(f.loss_ci), "t2": f.t2 * factor, "r2": f.r2,
            "holds_up_to": a.holds_up_to, "breaks_at": a.breaks_at, "trend": a.trend,
            "x": xs.tolist(), "y": (np.asarray(f.predict(xs)) * factor).tolist(),
            "describe": a.describe()}


def plots(store: Store, e: ExperimentRow) -> dict[str, Any]:
    """Plot data: per metric the series against the main parameter (with intervals, cut at 0
    where the metric cannot be negative, and, for throughput against chain length, fits), the
    offered-vs-received curves, and the lab the runs ran on (linked while it is up)."""
    done = store.runs(e.id, status="done", with_metrics=True)
    x = main_parameter(done)
    out: dict[str, Any] = {"experiment": e.id, "x": x, "x_label": param_words(x) if x else None,
                           "ran_on": where_it_ran(e, done), "metrics": [], "curves": []}
    if x is not None:
        shown, _cpu = ordered_metrics(metric_names(done))
        for name in shown[:MAX_PLOTTED_METRICS]:
            all_series = series(done, name, x)
            if not all_series:
                continue
            sc = scale(name, [p.mean for s in all_series for p in s.points])
            fitted = x == CHAIN_LENGTH and is_throughput(name)
            floor = 0.0 if nonnegative(name) else None
            out["metrics"].append({
                "metric": name, "unit": sc.unit, "y_label": axis_label(name, sc),
                "title": title(name, x),
                "throughput": is_throughput(name),
                "series": [{"name": s.name, "x": s.xs,
                            "mean": [sc(p.mean) for p in s.points],
                            "ci_low": [sc(floored(p, floor).ci_low) for p in s.points],
                            "ci_high": [sc(p.ci_high) for p in s.points],
                            "n": [p.n for p in s.points],
                            "fit": _fit(done, name, s.label, sc.factor) if fitted else None}
                           for s in all_series]})
    curves: dict[str, list[tuple[float, float]]] = {}
    for r in done:
        raw = store.raw(r.id)
        text = raw.get("points") or raw.get("curve")
        if text:
            curves.setdefault(curve_name(r), []).extend(_curve_points(text))
    pts = [o for c in curves.values() for o, _ in c]
    if pts:
        sc = scale("offered_pps", pts)
        out["curves_unit"] = sc.unit
        out["curves_title"] = title("received_pps", "offered_pps")
        out["curves_x_label"] = axis_label("offered_pps", sc)
        out["curves_y_label"] = axis_label("received_pps", sc)
        out["curves"] = [{"name": k, "offered": [sc(o) for o, _ in sorted(v)],
                          "received": [sc(r) for _, r in sorted(v)]}
                         for k, v in curves.items() if v]
    return clean(out)


_TABLES: dict[tuple[str, int, float, int], list[dict[str, Any]]] = {}
_TABLES_LOCK = threading.Lock()


def tables(store: Store, e: ExperimentRow) -> list[dict[str, Any]]:
    """The report's blocks of this experiment, its figures left out (the page draws its own):
    ``{"heading": level, "text"}``, ``{"para": text}``, ``{"header": [...], "rows": [[...]]}``.
    Cached per database file version (the report draws its figures to build them)."""
    st = os.stat(store.path)
    key = (os.path.abspath(store.path), e.id, st.st_mtime, st.st_size)
    with _TABLES_LOCK:
        if key in _TABLES:
            return _TABLES[key]
        with tempfile.TemporaryDirectory(prefix="sfclab-web-") as tmp:
            blocks = experiment_blocks(store, e, Path(tmp))
        out: list[dict[str, Any]] = []
        for b in blocks:
            if isinstance(b, Heading):
                out.append({"heading": b.level, "text": b.text})
            elif isinstance(b, Para):
                out.append({"para": b.text})
            elif isinstance(b, Table):
                out.append({"header": b.header, "rows": b.rows})
        # a heading whose content was only a figure goes too
        out = [b for i, b in enumerate(out)
               if "heading" not in b or (i + 1 < len(out) and (
                   "heading" not in out[i + 1] or out[i + 1]["heading"] > b["heading"]))]
        while len(_TABLES) >= TABLES_KEPT:  # a database being written changes its version
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = out
        return out


def comparison(store: Store, sides: list[str], metrics: list[str] | None) -> dict[str, Any]:
    """:func:`sfclab.experiments.compare.compare` for the page: an unknown experiment is 404,
    bad input (a malformed side, a metric not every side measured) 422."""
    try:
        return clean(compare(store, sides, metrics=metrics))
    except SpecError as e:
        if e.message.startswith("no experiment"):
            raise NotFound(str(e)) from None
        raise
