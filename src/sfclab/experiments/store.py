"""The results store: one SQLite file holding experiments, their runs and what each run measured.

Tables::

    experiments  id, name, spec_hash, spec (JSON), seed, source, created
                 -- one row per (name, spec_hash): editing the file makes a new experiment
    runs         id, experiment_id, key, params (JSON), repetition, ord, status, error,
                 started, ended (unix seconds), lab_hash, lab (JSON), measure (JSON)
                 -- status: pending | running | done | failed; key unique per experiment
    metrics      run_id, name, value                      -- the run's numbers
    environment  id, experiment_id, run_id (NULL: host-wide, per invocation), data (JSON)
    raw          run_id, name, text                       -- tool outputs, verbatim

Every write is one transaction (``BEGIN IMMEDIATE`` … ``COMMIT``) in WAL mode, so a writer
killed at any instant leaves the file consistent: a run is either ``done`` with all its metrics,
raw outputs and environment, or not done and with none of them.  A run left ``running`` by a
crash is put back to ``pending`` by :meth:`Store.requeue_running` when the experiment resumes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError

SCHEMA_VERSION = 1
STATUSES = ("pending", "running", "done", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS experiments (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    spec      TEXT NOT NULL,
    seed      INTEGER NOT NULL,
    source    TEXT,
    created   REAL NOT NULL,
    UNIQUE (name, spec_hash)
);
CREATE TABLE IF NOT EXISTS runs (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    key           TEXT NOT NULL,
    params        TEXT NOT NULL,
    repetition    INTEGER NOT NULL,
    ord           INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'running', 'done', 'failed')),
    error         TEXT,
    started       REAL,
    ended         REAL,
    lab_hash      TEXT NOT NULL,
    lab           TEXT NOT NULL,
    measure       TEXT NOT NULL,
    UNIQUE (experiment_id, key)
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (experiment_id, status, ord);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    value  REAL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS environment (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    run_id        INTEGER REFERENCES runs(id) ON DELETE CASCADE,
    recorded      REAL NOT NULL,
    data          TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS raw (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    text   TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""


@dataclass
class ExperimentRow:
    id: int
    name: str
    spec_hash: str
    spec: dict[str, Any]
    seed: int
    source: str | None
    created: float


@dataclass
class RunRow:
    id: int
    experiment_id: int
    key: str
    params: dict[str, Any]
    repetition: int
    order: int
    status: str
    error: str | None
    started: float | None
    ended: float | None
    lab_hash: str
    lab: dict[str, Any]
    measure: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def duration(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    def to_dict(self) -> dict[str, Any]:
        """The JSON export shape of one run."""
        return {"id": self.id, "experiment_id": self.experiment_id, "key": self.key,
                "params": self.params, "repetition": self.repetition, "order": self.order,
                "status": self.status, "error": self.error, "started": self.started,
                "ended": self.ended, "duration": self.duration, "lab_hash": self.lab_hash,
                "metrics": self.metrics}


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def _loads(text: Any, what: str, path: str) -> Any:
    """A JSON field of a row, or a located error if the database was damaged."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise SpecError(f"expected JSON in {what}, got a damaged value ({e})", file=path) \
            from None


class Store:
    """An open results database.  ``Store(path)`` makes it if missing; ``create=False`` refuses
    a missing one (a :class:`SpecError`); ``readonly=True`` (for commands that only read) opens
    it read-only and refuses a missing file or one that is not an sfclab database, writing
    nothing to it.  Use as a context manager or ``close()``."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False):
        self.path = os.fspath(path)
        if readonly:
            self._open_readonly()
            return
        if not create and not os.path.isfile(self.path):
            raise SpecError("no results database here (run an experiment first, or pass --db)",
                            file=self.path)
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SpecError(f"written by a newer sfclab (schema {version})", file=self.path)
            with self.transaction() as c:
                # statement by statement: executescript() would commit on its own
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            raise SpecError(f"not an sfclab results database ({e})", file=self.path) from None

    def _open_readonly(self) -> None:
        if not os.path.isfile(self.path):
            raise SpecError("no results database here (run an experiment first, or pass --db)",
                            file=self.path)
        try:
            uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
            self._conn.row_factory = sqlite3.Row
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as e:
            raise SpecError(f"expected an sfclab results database, got a file SQLite cannot "
                            f"read ({e})", file=self.path) from None
        if version > SCHEMA_VERSION:
            raise SpecError(f"written by a newer sfclab (schema {version})", file=self.path)
        if version < 1 or not {"experiments", "runs"} <= tables:
            self._conn.close()
            raise SpecError("expected an sfclab results database, got another SQLite database "
                            "(left as it is)", file=self.path)

    # ----------------------------------------------------------------- plumbing

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any exception
        (KeyboardInterrupt included)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def integrity_ok(self) -> bool:
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # ----------------------------------------------------------------- experiments

    def register_experiment(self, name: str, spec_hash: str, spec: Mapping[str, Any], seed: int,
                            source: str | None = None) -> int:
        """The id of the experiment (name, spec_hash), made if new."""
        with self.transaction() as c:
            row = c.execute("SELECT id FROM experiments WHERE name = ? AND spec_hash = ?",
                            (name, spec_hash)).fetchone()
            if row:
                return int(row[0])
            cur = c.execute("INSERT INTO experiments (name, spec_hash, spec, seed, source, created)"
                            " VALUES (?, ?, ?, ?, ?, ?)",
                            (name, spec_hash, _json(dict(spec)), seed, source, time.time()))
            assert cur.lastrowid is not None  # an INSERT always sets it
            return cur.lastrowid

    def experiments(self) -> list[ExperimentRow]:
        rows = self._conn.execute("SELECT * FROM experiments ORDER BY id").fetchall()
        return [self._experiment(r) for r in rows]

    def experiment(self, ref: int | str) -> ExperimentRow:
        """By id, or by name (the newest experiment of that name)."""
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            row = self._conn.execute("SELECT * FROM experiments WHERE id = ?",
                                     (int(ref),)).fetchone()
        else:
            row = self._conn.execute("SELECT * FROM experiments WHERE name = ? ORDER BY id DESC",
                                     (ref,)).fetchone()
        if row is None:
            raise SpecError(f"no experiment '{ref}' in this database", file=self.path)
        return self._experiment(row)

    def _experiment(self, r: sqlite3.Row) -> ExperimentRow:
        return ExperimentRow(id=r["id"], name=r["name"], spec_hash=r["spec_hash"],
                             spec=_loads(r["spec"], f"the spec of experiment {r['id']}",
                                         self.path),
                             seed=r["seed"], source=r["source"], created=r["created"])

    def counts(self, experiment_id: int) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for status, n in self._conn.execute(
                "SELECT status, COUNT(*) FROM runs WHERE experiment_id = ? GROUP BY status",
                (experiment_id,)):
            out[status] = n
        return out

    # ----------------------------------------------------------------- runs

    def add_runs(self, experiment_id: int, points: Iterable[Any]) -> int:
        """Register run points (objects with key, params, repetition, lab, measure, lab_hash)
        in trial order; points already known keep their row and order.  Returns how many
        were new."""
        with self.transaction() as c:
            start = c.execute("SELECT COALESCE(MAX(ord) + 1, 0) FROM runs WHERE experiment_id = ?",
                              (experiment_id,)).fetchone()[0]
            added = 0
            for p in points:
                cur = c.execute(
                    "INSERT OR IGNORE INTO runs (experiment_id, key, params, repetition, ord,"
                    " lab_hash, lab, measure) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (experiment_id, p.key, _json(p.params), p.repetition, start + added,
                     p.lab_hash, _json(p.lab), _json(p.measure)))
                added += cur.rowcount
            return added

    def requeue_running(self, experiment_id: int) -> int:
        """Runs left ``running`` (their writer died) go back to ``pending``."""
        with self.transaction() as c:
            return c.execute("UPDATE runs SET status = 'pending', started = NULL WHERE"
                             " experiment_id = ? AND status = 'running'",
                             (experiment_id,)).rowcount

    def runs(self, experiment_id: int | None = None, status: str | Iterable[str] | None = None,
             *, with_metrics: bool = False) -> list[RunRow]:
        """Runs in trial order, optionally of one experiment and with given statuses."""
        sql, args = "SELECT * FROM runs WHERE 1", list[Any]()
        if experiment_id is not None:
            sql += " AND experiment_id = ?"
            args.append(experiment_id)
        if status is not None:
            wanted = [status] if isinstance(status, str) else list(status)
            sql += f" AND status IN ({', '.join('?' * len(wanted))})"
            args += wanted
        rows = [self._run(r) for r in self._conn.execute(sql + " ORDER BY experiment_id, ord",
                                                         args)]
        if with_metrics and rows:
            by_id = {r.id: r for r in rows}
            q = "SELECT run_id, name, value FROM metrics"
            if experiment_id is not None:
                q += " WHERE run_id IN (SELECT id FROM runs WHERE experiment_id = ?)"
            for run_id, name, value in self._conn.execute(
                    q, (experiment_id,) if experiment_id is not None else ()):
                if run_id in by_id:
                    by_id[run_id].metrics[name] = math.nan if value is None else value
        return rows

    def run(self, run_id: int) -> RunRow:
        row = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise SpecError(f"no run {run_id} in this database", file=self.path)
        r = self._run(row)
        r.metrics = self.metrics(run_id)
        return r

    def _run(self, r: sqlite3.Row) -> RunRow:
        def field_(name: str) -> Any:
            return _loads(r[name], f"the {name} of run {r['id']}", self.path)
        return RunRow(id=r["id"], experiment_id=r["experiment_id"], key=r["key"],
                      params=field_("params"), repetition=r["repetition"], order=r["ord"],
                      status=r["status"], error=r["error"], started=r["started"],
                      ended=r["ended"], lab_hash=r["lab_hash"], lab=field_("lab"),
                      measure=field_("measure"))

    def mark_running(self, run_id: int, started: float | None = None) -> None:
        with self.transaction() as c:
            c.execute("UPDATE runs SET status = 'running', started = ?, ended = NULL, error = NULL"
                      " WHERE id = ?", (time.time() if started is None else started, run_id))

    def mark_pending(self, run_id: int) -> None:
        """Undo :meth:`mark_running` (the run was interrupted and will be redone)."""
        with self.transaction() as c:
            c.execute("UPDATE runs SET status = 'pending', started = NULL, ended = NULL"
                      " WHERE id = ?", (run_id,))

    def mark_failed(self, run_id: int, error: str, *, ended: float | None = None,
                    raw: Mapping[str, Any] | None = None) -> None:
        with self.transaction() as c:
            self._replace_details(c, run_id, {}, raw or {}, None, None)
            c.execute("UPDATE runs SET status = 'failed', error = ?, ended = ? WHERE id = ?",
                      (error, time.time() if ended is None else ended, run_id))

    def finish_run(self, run_id: int, metrics: Mapping[str, float],
                   raw: Mapping[str, Any] | None = None,
                   environment: Mapping[str, Any] | None = None,
                   *, ended: float | None = None) -> None:
        """Record a finished run and everything it measured, all in one transaction."""
        with self.transaction() as c:
            exp_id = c.execute("SELECT experiment_id FROM runs WHERE id = ?",
                               (run_id,)).fetchone()[0]
            self._replace_details(c, run_id, metrics, raw or {}, environment, exp_id)
            c.execute("UPDATE runs SET status = 'done', error = NULL, ended = ? WHERE id = ?",
                      (time.time() if ended is None else ended, run_id))

    def _replace_details(self, c: sqlite3.Connection, run_id: int, metrics: Mapping[str, float],
                         raw: Mapping[str, Any], environment: Mapping[str, Any] | None,
                         exp_id: int | None) -> None:
        c.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
        c.execute("DELETE FROM raw WHERE run_id = ?", (run_id,))
        c.execute("DELETE FROM environment WHERE run_id = ?", (run_id,))
        self._write_metrics(c, run_id, metrics)
        self._write_raw(c, run_id, raw)
        if environment:
            c.execute("INSERT INTO environment (experiment_id, run_id, recorded, data)"
                      " VALUES (?, ?, ?, ?)", (exp_id, run_id, time.time(), _json(environment)))

    @staticmethod
    def _write_metrics(c: sqlite3.Connection, run_id: int, metrics: Mapping[str, float]) -> None:
        c.executemany("INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)",
                      [(run_id, k, None if v is None or math.isnan(v) else float(v))
                       for k, v in metrics.items()])

    @staticmethod
    def _write_raw(c: sqlite3.Connection, run_id: int, raw: Mapping[str, Any]) -> None:
        c.executemany("INSERT INTO raw (run_id, name, text) VALUES (?, ?, ?)",
                      [(run_id, k, v if isinstance(v, str) else _json(v)) for k, v in raw.items()])

    def metrics(self, run_id: int) -> dict[str, float]:
        return {n: (math.nan if v is None else v) for n, v in self._conn.execute(
            "SELECT name, value FROM metrics WHERE run_id = ? ORDER BY name", (run_id,))}

    def raw(self, run_id: int) -> dict[str, str]:
        return dict(self._conn.execute("SELECT name, text FROM raw WHERE run_id = ? ORDER BY name",
                                       (run_id,)).fetchall())

    # ----------------------------------------------------------------- environment

    def add_environment(self, experiment_id: int, data: Mapping[str, Any]) -> None:
        """Record the host environment of one invocation of an experiment."""
        with self.transaction() as c:
            c.execute("INSERT INTO environment (experiment_id, run_id, recorded, data)"
                      " VALUES (?, NULL, ?, ?)", (experiment_id, time.time(), _json(dict(data))))

    def environments(self, experiment_id: int) -> list[dict[str, Any]]:
        """Host environments recorded for the experiment, oldest first."""
        return [_loads(d, f"an environment of experiment {experiment_id}", self.path)
                for (d,) in self._conn.execute(
            "SELECT data FROM environment WHERE experiment_id = ? AND run_id IS NULL ORDER BY id",
            (experiment_id,))]

    def environments_recorded(self, experiment_id: int) -> list[tuple[float, dict[str, Any]]]:
        """(recorded, data) of each host environment of the experiment, oldest first."""
        return [(t, _loads(d, f"an environment of experiment {experiment_id}", self.path))
                for t, d in self._conn.execute(
            "SELECT recorded, data FROM environment WHERE experiment_id = ? AND run_id IS NULL"
            " ORDER BY id", (experiment_id,))]

    def run_environment(self, run_id: int) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT data FROM environment WHERE run_id = ?",
                                 (run_id,)).fetchone()
        return _loads(row[0], f"the environment of run {run_id}", self.path) if row else None

    # ----------------------------------------------------------------- export

    def export(self, format: str = "json", experiment: int | str | None = None) -> str:
        """All runs (or one experiment's) as JSON (a list of runs, each with ``params``,
        ``metrics``, ``status``) or CSV (one row per run, a column per parameter and metric)."""
        exp_ids: dict[int, str] = {e.id: e.name for e in self.experiments()}
        exp_id = self.experiment(experiment).id if experiment is not None else None
        runs = self.runs(exp_id, with_metrics=True)
        if format == "json":
            out = []
            for r in runs:
                d = r.to_dict()
                d["experiment"] = exp_ids.get(r.experiment_id)
                d["metrics"] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                                for k, v in d["metrics"].items()}
                out.append(d)
            return json.dumps(out, indent=2, sort_keys=True) + "\n"
        if format == "csv":
            params = sorted({k for r in runs for k in r.params})
            metrics = sorted({k for r in runs for k in r.metrics})
            fixed = ["experiment", "run", "key", "repetition", "status", "error", "started",
                     "ended", "lab_hash"]
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(fixed + params + metrics)
            for r in runs:
                w.writerow([exp_ids.get(r.experiment_id), r.id, r.key, r.repetition, r.status,
                            r.error or "", _num(r.started), _num(r.ended), r.lab_hash]
                           + [_cell(r.params.get(p)) for p in params]
                           + [_num(r.metrics.get(m)) for m in metrics])
            return buf.getvalue()
        raise SpecError(f"expected format csv or json (got {format!r})", place="--format")


def _num(v: float | None) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(v)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v)
