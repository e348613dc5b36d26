"""``sfclab run``, ``sfclab results ls|show|export`` and ``sfclab report``: parsing and printing."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..errors import SpecError
from .status import ExitStatus


def cmd_run(a: argparse.Namespace) -> int:
    from ..experiments import live
    from ..experiments.commands import run_experiment
    from ..experiments.runner import NullProgress
    from ..realize.kinds import load_lab_dict

    s = run_experiment(a.file, a.db, live.lab_up, live.measure,
                       progress=NullProgress() if a.json else None, validate_lab=load_lab_dict,
                       retry_failed=a.retry_failed, repetitions=a.repetitions,
                       calibrate=live.calibration)
    d = {"experiment": s.experiment_id, "total": s.total, "ran": s.ran, "done": s.done,
         "failed": s.failed, "pending": s.pending, "db": a.db}
    if a.json:
        print(json.dumps(d, indent=2))
    else:
        print(f"experiment {d['experiment']}: {d['done']}/{d['total']} runs done, {d['failed']} "
              f"failed, {d['pending']} pending ({d['ran']} run now) -> {a.db}")
    return ExitStatus.FAILURE if s.failed else ExitStatus.OK


def cmd_results(a: argparse.Namespace) -> int:
    from ..experiments import commands

    if a.action == "ls":
        print(commands.results_ls(a.db))
    elif a.action == "show":
        print(commands.results_show(a.db, a.experiment, a.run))
    else:
        fmt = "json" if a.json else a.format
        print(commands.results_export(a.db, fmt, a.experiment), end="")
    return ExitStatus.OK


def cmd_report(a: argparse.Namespace) -> int:
    from ..experiments.commands import write_report

    if a.compare:
        return _compare(a)
    if a.out is None:
        raise SpecError("expected --out DIR (where the report goes) or --compare RUN RUN ...",
                        place="--out")
    path = write_report(a.db, a.out)
    if a.json:
        print(json.dumps({"report": str(path), "html": str(path.with_suffix(".html"))}))
    else:
        print(f"report written: {path} (and {path.with_suffix('.html')})")
    return ExitStatus.OK


def _compare(a: argparse.Namespace) -> int:
    from ..experiments.compare import clean, compare
    from ..experiments.comparetext import render
    from ..experiments.store import Store

    with Store(a.db, readonly=True) as st:
        c = compare(st, a.compare, metrics=a.metric, findings=a.findings)
    if a.json:
        print(json.dumps(clean(c), indent=2, default=str))
    else:
        print(render(c))
    return ExitStatus.OK


def register(sub: Any, add: Callable) -> None:
    from ..experiments import DEFAULT_DB

    sp = add("run", cmd_run, "run an experiment file (sweeps, repetitions) into SQLite; resumes",
             "sfclab run scenarios/demo-chain-length.yaml --db results.db")
    sp.add_argument("file")
    sp.add_argument("--db", default=DEFAULT_DB, help="results database (default %(default)s)")
    sp.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    sp.add_argument("--repetitions", type=int, metavar="N",
                    help="repetitions per point instead of the file's (more: runs are added to "
                         "the same experiment, those done are kept)")

    sp = add("results", cmd_results, "list, show or export stored results",
             "sfclab results export --db results.db --format csv > runs.csv")
    sp.add_argument("action", choices=["ls", "show", "export"])
    sp.add_argument("--db", default=DEFAULT_DB)
    sp.add_argument("--experiment", help="experiment id or name")
    sp.add_argument("--run", type=int, help="with show: one run in full")
    sp.add_argument("--format", choices=["csv", "json"], default="json")

    sp = add("report", cmd_report, "write report.md and report.html with tables, plots and fits",
             "sfclab report --db results.db --out report/")
    sp.add_argument("--db", default=DEFAULT_DB)
    sp.add_argument("--out", metavar="DIR", help="where report.md, report.html and plots/ go")
    sp.add_argument("--compare", nargs="+", metavar="RUN",
                    help="instead: compare these side by side (the first is the baseline): "
                         "experiments by id or name, or EXPERIMENT:RUNS (run ids, 12-20,25)")
    sp.add_argument("--metric", action="append", help="with --compare: only this metric "
                    "(repeatable; default: every metric all sides measured)")
    sp.add_argument("--findings", metavar="FILE", help="with --compare: the published findings "
                    "(default: scenarios/findings.yaml of this source tree)")
