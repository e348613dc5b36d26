"""Running an experiment: every run point, in shuffled order, each in a lab of its own.

One *run* is: mark it ``running``; bring its lab variant up (``lab_up(lab_dict)``, a context
manager yielding a lab handle); sleep ``warmup``; ``measure(handle, measure_dict)``; tear the lab
down (leaving the ``with``); record the result in one transaction; sleep ``cooldown``.

The runner only sees injected callables, so it runs against fakes in the unit tests:

- ``lab_up(lab: dict) -> ContextManager[handle]``
- ``calibrate(measures: list[dict]) -> dict | None`` (optional): called once per invocation,
  before the first run, with every run point's measurement; what it returns (the generator's
  calibration, :mod:`sfclab.traffic.calibrate`) is kept in the invocation's environment record
  as ``calibration`` (a failure as ``{"error": ...}``: the runs go on, unflagged)
- ``measure(handle, measure: dict) -> dict`` returning ``{"type", "params", "metrics": {name:
  float}, "environment": {...}, "cpu": {...}, "raw": ...}`` plus any extra keys (the shape of
  :meth:`sfclab.traffic.result.Measurement.to_dict`); see :func:`split_result` for what is
  stored where (numeric leaves of ``cpu`` become metrics ``cpu.<path>``).

Resume: the experiment is identified in the store by name and spec hash and its points by key,
so running the same file again skips ``done`` runs, and ``failed`` ones unless
``retry_failed=True``; runs left ``running`` by a crash are redone.  A failing run is recorded
``failed`` with its error and the experiment goes on.  Ctrl-C (KeyboardInterrupt) leaves the
``with`` (tearing the lab down), puts the run back to ``pending`` and re-raises.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ContextManager, TextIO

from ..errors import SfclabError
from ..spec.experiment import Experiment, LabValidator, RunPoint, expand, trial_order
from .provenance import recorded_environment as host_environment
from ..traffic.result import Measurement, ResultError
from .store import Store
from .units import point_words

LabUp = Callable[[dict[str, Any]], ContextManager[Any]]
Measure = Callable[[Any, dict[str, Any]], "Measurement | Mapping[str, Any]"]
Calibrate = Callable[[list[dict[str, Any]]], "Mapping[str, Any] | None"]


class Progress(abc.ABC):
    """What the runner reports while it works."""

    @abc.abstractmethod
    def start(self, name: str, total: int, finished: int) -> None:
        """``total`` runs, ``finished`` of them already done (or failed) before this session."""

    @abc.abstractmethod
    def begin(self, label: str) -> None:
        """A run starts."""

    @abc.abstractmethod
    def end(self, ok: bool, seconds: float, error: str | None = None) -> None:
        """The run just begun is over."""

    def finish(self) -> None:
        """The session is over (normally or not)."""


class NullProgress(Progress):
    def start(self, name: str, total: int, finished: int) -> None:
        pass

    def begin(self, label: str) -> None:
        pass

    def end(self, ok: bool, seconds: float, error: str | None = None) -> None:
        pass


class TextProgress(Progress):
    """A bar with the ETA on a terminal; one plain line per run otherwise (logs, CI).

    The ETA is the wall time of this session per run finished in it (so warm-up and cool-down
    are included) times the runs left."""

    WIDTH = 24

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.total = self.finished = self.failed = self.session = 0
        self.t0 = clock()
        self.label = ""

    def eta(self) -> float | None:
        if not self.session:
            return None
        return (self.clock() - self.t0) / self.session * (self.total - self.finished)

    def _line(self, head: str) -> str:
        eta = self.eta()
        left = "ETA --" if eta is None else f"ETA {format_seconds(eta)}"
        fail = f", {self.failed} failed" if self.failed else ""
        return f"{head}[{self.finished}/{self.total}{fail}] {left} {self.label}"

    def start(self, name: str, total: int, finished: int) -> None:
        self.total, self.finished = total, finished
        self.t0, self.session = self.clock(), 0
        self.stream.write(f"{name}: {total} runs, {finished} already finished, "
                          f"{total - finished} to go\n")
        self.stream.flush()

    def begin(self, label: str) -> None:
        self.label = label
        if self.tty:
            done = self.finished / self.total if self.total else 1.0
            fill = int(round(done * self.WIDTH))
            bar = "#" * fill + "-" * (self.WIDTH - fill)
            self.stream.write("\r\x1b[K" + self._line(f"|{bar}| "))
        else:
            self.stream.write(self._line("") + " ...\n")
        self.stream.flush()

    def end(self, ok: bool, seconds: float, error: str | None = None) -> None:
        self.finished += 1
        self.failed += 0 if ok else 1
        self.session += 1
        if not ok:
            prefix = "\r\x1b[K" if self.tty else ""
            self.stream.write(f"{prefix}failed: {self.label}: {error}\n")
        elif not self.tty:
            self.stream.write(f"done: {self.label} in {format_seconds(seconds)}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(f"{self.finished}/{self.total} runs finished"
                          f"{f', {self.failed} failed' if self.failed else ''}\n")
        self.stream.flush()


def format_seconds(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class RunSummary:
    """What one invocation did."""

    experiment_id: int
    total: int  # runs of the experiment
    ran: int  # runs attempted in this invocation
    done: int  # runs done in the store afterwards
    failed: int  # runs failed in the store afterwards
    pending: int  # runs still to do afterwards


MeasurementResultError = ResultError  # the name the runner's callers know


def flatten_numbers(d: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """Numeric leaves of a nested mapping as ``prefix.a.b`` -> float."""
    out: dict[str, float] = {}
    for k, v in d.items():
        name = f"{prefix}.{k}"
        if isinstance(v, Mapping):
            out.update(flatten_numbers(v, name))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[name] = float(v)
    return out


def pair_metrics(points: Any) -> dict[str, float]:
    """Per-pair figures of a rate curve whose points carry ``pairs`` (several senders at once,
    e.g. one per tenant), named ``pair.<from>:<to>.<figure>``:

    - ``max_received_pps``: the pair's highest received rate over the curve;
    - ``top_loss_ratio``: the pair's loss at the curve's highest offered rate (does the pair
      still get through when every pair offers the most?).
    """
    if not isinstance(points, list):
        return {}
    best: dict[str, float] = {}
    top: dict[str, tuple[float, float]] = {}
    for point in points:
        if not isinstance(point, Mapping) or not isinstance(point.get("pairs"), list):
            continue
        offered = float(point.get("offered_pps") or 0.0)
        for p in point["pairs"]:
            name = p.get("pair") if isinstance(p, Mapping) else None
            if not name:
                continue
            best[name] = max(best.get(name, 0.0), float(p.get("received_pps") or 0.0))
            if name not in top or offered >= top[name][0]:
                top[name] = (offered, float(p.get("loss_ratio") or 0.0))
    out: dict[str, float] = {}
    for name in best:
        out[f"pair.{name}.max_received_pps"] = best[name]
        out[f"pair.{name}.top_loss_ratio"] = top[name][1]
    return out


def split_result(result: Measurement | Mapping[str, Any]) -> tuple[
        dict[str, float], dict[str, Any], dict[str, Any]]:
    """A measurement result -> (metrics, raw outputs, run environment).

    A mapping is first made a :class:`~sfclab.traffic.result.Measurement`, which validates it
    (metrics must be finite numbers; booleans count as 0/1, None means not measured and is
    dropped).  Numeric leaves of ``cpu`` are added as ``cpu.…`` metrics; ``raw`` is split by
    key when it is a mapping (else kept whole as ``raw``); the extra keys (per-flow lists, the
    points of a rate curve, ...) are kept as raw entries of their own name.  A rate curve of
    several pairs (tenants) also gets per-pair metrics (:func:`pair_metrics`)."""
    m = result if isinstance(result, Measurement) else Measurement.from_dict(result)
    metrics = dict(m.metrics)
    for name, value in pair_metrics(m.extra.get("points")).items():
        metrics.setdefault(name, value)
    if isinstance(m.cpu, Mapping):
        for name, value in flatten_numbers(m.cpu, "cpu").items():
            metrics.setdefault(name, value)
    raw: dict[str, Any] = dict(m.raw) if isinstance(m.raw, Mapping) else (
        {} if m.raw is None else {"raw": m.raw})
    for k, v in m.extra.items():
        raw[k if k not in raw else f"extra.{k}"] = v
    raw.setdefault("measurement", {"type": m.type, "params": m.params})
    if m.cpu:
        raw.setdefault("cpu", m.cpu)
    return metrics, raw, dict(m.environment or {})


class Runner:
    """Runs experiments into a :class:`Store` (see the module docstring)."""

    def __init__(self, store: Store, lab_up: LabUp, measure: Measure, *,
                 progress: Progress | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time,
                 environment: Callable[[], Mapping[str, Any]] | None = host_environment,
                 validate_lab: LabValidator | None = None,
                 calibrate: Calibrate | None = None):
        self.store = store
        self.calibrate = calibrate
        self.lab_up = lab_up
        self.measure = measure
        self.progress = progress or NullProgress()
        self.sleep = sleep
        self.clock = clock
        self.environment = environment
        self.validate_lab = validate_lab

    def prepare(self, exp: Experiment) -> tuple[int, list[RunPoint]]:
        """Validate every point, register the experiment and its runs (in trial order) and
        requeue runs a crash left ``running``.  Nothing is built yet."""
        points = trial_order(expand(exp, self.validate_lab), exp.seed)
        exp_id = self.store.register_experiment(exp.name, exp.spec_hash(),
                                                exp.model_dump(), exp.seed, exp.source)
        self.store.add_runs(exp_id, points)
        self.store.requeue_running(exp_id)
        return exp_id, points

    def run(self, exp: Experiment, *, retry_failed: bool = False) -> RunSummary:
        exp_id, points = self.prepare(exp)
        by_key = {p.key: p for p in points}
        statuses = ("pending", "failed") if retry_failed else ("pending",)
        todo = [r for r in self.store.runs(exp_id, statuses) if r.key in by_key]
        total = len(self.store.runs(exp_id))
        if todo and self.environment is not None:
            env = dict(self.environment())
            cal = self._calibration([by_key[r.key].measure for r in todo])
            if cal is not None:
                env["calibration"] = cal
            self.store.add_environment(exp_id, env)
        self.progress.start(exp.name, total, total - len(todo))
        ran = 0
        try:
            for i, row in enumerate(todo):
                self._one(exp, row.id, by_key[row.key])
                ran += 1
                if exp.cooldown and i < len(todo) - 1:
                    self.sleep(exp.cooldown)
        finally:
            self.progress.finish()
        counts = self.store.counts(exp_id)
        return RunSummary(experiment_id=exp_id, total=total, ran=ran, done=counts["done"],
                          failed=counts["failed"], pending=counts["pending"] + counts["running"])

    def _calibration(self, measures: list[dict[str, Any]]) -> dict[str, Any] | None:
        if self.calibrate is None:
            return None
        try:
            cal = self.calibrate([_copy(m) for m in measures])
        except SfclabError as e:  # the runs go on; their trials are just not flagged
            return {"error": str(e)}
        return dict(cal) if cal is not None else None

    def _one(self, exp: Experiment, run_id: int, point: RunPoint) -> None:
        self.progress.begin(f"{point_words(point.params)}, repetition {point.repetition}"
                            if point.params else f"repetition {point.repetition}")
        t0 = time.monotonic()
        self.store.mark_running(run_id, self.clock())
        try:
            with self.lab_up(_copy(point.lab)) as lab:
                if exp.warmup:
                    self.sleep(exp.warmup)
                result = self.measure(lab, _copy(point.measure))
            metrics, raw, env = split_result(result)
            env.setdefault("lab_hash", point.lab_hash)
            self.store.finish_run(run_id, metrics, raw, env, ended=self.clock())
        except KeyboardInterrupt:
            # the with statement has already torn the lab down
            with contextlib.suppress(Exception):
                self.store.mark_pending(run_id)
            self.progress.end(False, time.monotonic() - t0, "interrupted")
            raise
        except Exception as e:  # noqa: BLE001 - a failed run is data, the experiment goes on
            error = f"{type(e).__name__}: {e}"
            self.store.mark_failed(run_id, error, ended=self.clock())
            self.progress.end(False, time.monotonic() - t0, error)
            return
        self.progress.end(True, time.monotonic() - t0)


def _copy(d: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(d)
