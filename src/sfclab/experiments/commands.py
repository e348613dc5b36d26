"""What the CLI calls for ``sfclab run``, ``sfclab results ls|show|export`` and ``sfclab report``.

Each function opens the store, does one thing and returns text (or a path, or a summary); none
prints or exits.  Errors are :class:`~sfclab.errors.SpecError` (bad file, unknown experiment,
missing database: exit 2) or whatever ``lab_up``/``measure`` raise outside a run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..spec.experiment import LabValidator, expand, load_experiment
from ..spec.limits import MAX_RUNS
from .provenance import recorded_environment as host_environment
from .report import build_report, flatten, measurement_words
from .runner import Calibrate, LabUp, Measure, Progress, Runner, RunSummary, TextProgress
from .store import Store
from .units import env_value, env_words, point_words, reading

from . import DEFAULT_DB  # noqa: E402  (re-exported for callers)


def run_experiment(path: str | os.PathLike[str], db: str | os.PathLike[str] | None,
                   lab_up: LabUp, measure: Measure, progress: Progress | None = None, *,
                   validate_lab: LabValidator | None = None, retry_failed: bool = False,
                   sleep: Callable[[float], None] = time.sleep,
                   environment: Callable[[], Mapping[str, Any]] | None = host_environment,
                   repetitions: int | None = None,
                   calibrate: Calibrate | None = None) -> RunSummary:
    """Load and validate the experiment file (every point, before building anything), then
    run what is not done yet into ``db``.  ``progress`` defaults to a :class:`TextProgress` on
    stderr.  ``repetitions`` overrides the file's (the same experiment: more repetitions
    add runs, the ones done are kept).  ``calibrate`` is called once before the runs (see
    :mod:`.runner`).  KeyboardInterrupt propagates after the current lab is
    torn down."""
    exp = load_experiment(path)
    if repetitions is not None:
        if not 1 <= repetitions <= MAX_RUNS // exp.points():
            raise SpecError(f"expected a number of repetitions from 1 to "
                            f"{MAX_RUNS // exp.points():,} (at most {MAX_RUNS:,} runs of "
                            f"{exp.points():,} run points), got {repetitions}",
                            place="--repetitions")
        exp = exp.model_copy(update={"repetitions": repetitions})
    expand(exp, validate_lab)  # every point valid before the results database is touched
    with Store(db or DEFAULT_DB) as store:
        runner = Runner(store, lab_up, measure, progress=progress or TextProgress(),
                        sleep=sleep, environment=environment, validate_lab=None,  # done above
                        calibrate=calibrate)
        return runner.run(exp, retry_failed=retry_failed)


def _when(t: float | None) -> str:
    if t is None:
        return "–"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in cells) + "\n"


def results_ls(db: str | os.PathLike[str] | None) -> str:
    """One line per experiment: id, name, created (UTC), runs done/failed/pending, source."""
    with Store(db or DEFAULT_DB, readonly=True) as store:
        rows = []
        for e in store.experiments():
            c = store.counts(e.id)
            rows.append([e.id, e.name, _when(e.created), c["done"], c["failed"],
                         c["pending"] + c["running"], e.source or "–"])
    return _table(["id", "name", "created", "done", "failed", "pending", "source"], rows)


def results_show(db: str | os.PathLike[str] | None, experiment: int | str | None = None,
                 run: int | None = None) -> str:
    """With ``run``: that run in full (parameters, metrics, environment, raw outputs).
    Otherwise the runs of ``experiment`` (id or name; default the newest) in trial order."""
    with Store(db or DEFAULT_DB, readonly=True) as store:
        if run is not None:
            r = store.run(run)
            e = store.experiment(r.experiment_id)
            out = [f"run {r.id} of experiment {e.name} (id {e.id}): {r.status}",
                   f"key {r.key}, repetition {r.repetition}, trial {r.order}, lab {r.lab_hash}",
                   f"started {_when(r.started)}, ended {_when(r.ended)}"]
            if r.error:
                out.append(f"error: {r.error}")
            out.append("parameters: " + (point_words(r.params) if r.params else "–"))
            out.append("measurement: " + measurement_words(r.measure))
            out.append("metrics:")
            out += [f"  {reading(k, v)}" for k, v in r.metrics.items()]
            env = store.run_environment(r.id)
            if env:
                out.append("environment:")
                out += [f"  {env_words(k)}: {env_value(k, v)}" for k, v in flatten(env).items()]
            for name, text in store.raw(r.id).items():
                out.append(f"--- raw: {name}")
                out.append(text.rstrip())
            return "\n".join(out) + "\n"
        exps = store.experiments()
        if not exps:
            return "no experiments\n"
        e = store.experiment(experiment) if experiment is not None else exps[-1]
        c = store.counts(e.id)
        head = (f"experiment {e.name} (id {e.id}), seed {e.seed}: {c['done']} done, "
                f"{c['failed']} failed, {c['pending'] + c['running']} pending\n")
        rows = []
        for r in store.runs(e.id, with_metrics=True):
            params = point_words(r.params) if r.params else ""
            metrics = ", ".join(reading(k, v) for k, v in sorted(r.metrics.items())
                                if not k.startswith("cpu."))
            rows.append([r.id, r.order, r.status, params or "–", r.repetition,
                         metrics if r.status != "failed" else (r.error or "")[:80]])
        return head + _table(["run", "trial", "status", "params", "rep", "metrics / error"], rows)


def results_export(db: str | os.PathLike[str] | None, format: str = "json",
                   experiment: int | str | None = None) -> str:
    """Every run (or one experiment's) as CSV or JSON (see :meth:`Store.export`)."""
    with Store(db or DEFAULT_DB, readonly=True) as store:
        return store.export(format, experiment)


def write_report(db: str | os.PathLike[str] | None, out_dir: str | os.PathLike[str],
                 experiments: Sequence[int | str] | None = None) -> Path:
    """Write ``out_dir/report.md`` and ``out_dir/report.html``; return the Markdown path.
    The database is only read; ``out_dir`` is made if missing (a file there is bad input)."""
    with Store(db or DEFAULT_DB, readonly=True) as store:
        out = _report_dir(out_dir)
        return build_report(store, out, experiments=experiments)


def _report_dir(out_dir: str | os.PathLike[str]) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SpecError(f"expected a directory for the report, got an existing file {str(out)!r}",
                        place="--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".sfclab-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise SpecError(f"expected a directory the report can be written to, got {str(out)!r} "
                        f"({e.strerror})", place="--out") from None
    return out
