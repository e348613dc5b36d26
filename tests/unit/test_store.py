"""The SQLite results store: round trip, export, transactions and crash safety."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.store import Store


@dataclass
class Point:
    key: str
    params: dict
    repetition: int = 0
    lab: dict = field(default_factory=lambda: {"name": "l"})
    measure: dict = field(default_factory=lambda: {"type": "iperf"})
    lab_hash: str = "h"


def points(n: int) -> list[Point]:
    return [Point(key=f"k{i}", params={"lab.chain.length": 2 + i % 3, "measure.flows": i},
                  repetition=i % 2) for i in range(n)]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r.db")
    yield s
    s.close()


def test_round_trip(store, tmp_path):
    e = store.register_experiment("exp", "hash1", {"name": "exp", "x": [1, 2]}, seed=7,
                                  source="e.yaml")
    assert store.register_experiment("exp", "hash1", {}, seed=7) == e
    assert store.register_experiment("exp", "hash2", {}, seed=7) != e
    assert store.add_runs(e, points(4)) == 4
    assert store.add_runs(e, points(5)) == 1  # only the new one
    runs = store.runs(e)
    assert [r.key for r in runs] == ["k0", "k1", "k2", "k3", "k4"]
    assert [r.order for r in runs] == [0, 1, 2, 3, 4]
    assert all(r.status == "pending" for r in runs)

    r0 = runs[0]
    store.mark_running(r0.id, started=100.0)
    store.finish_run(r0.id, {"throughput_bps": 1.5e9, "lost": 0}, {"iperf3": "out", "j": [1]},
                     {"lab_hash": "h"}, ended=112.5)
    back = store.run(r0.id)
    assert back.status == "done" and back.duration == 12.5
    assert back.metrics == {"lost": 0.0, "throughput_bps": 1.5e9}
    assert back.params == {"lab.chain.length": 2, "measure.flows": 0}
    assert store.raw(r0.id) == {"iperf3": "out", "j": "[1]"}
    assert store.run_environment(r0.id) == {"lab_hash": "h"}

    store.mark_running(runs[1].id)
    store.mark_failed(runs[1].id, "ToolError: iperf3 died")
    assert store.run(runs[1].id).error == "ToolError: iperf3 died"
    assert store.counts(e) == {"pending": 3, "running": 0, "done": 1, "failed": 1}

    store.add_environment(e, {"kernel": "6.18"})
    assert store.environments(e) == [{"kernel": "6.18"}]
    exp = store.experiment("exp")  # by name: the newest
    assert exp.name == "exp" and exp.id != e
    assert store.experiment(e).spec == {"name": "exp", "x": [1, 2]}
    assert store.experiment(e).seed == 7 and store.experiment(e).source == "e.yaml"

    # the data survive reopening
    store.close()
    again = Store(tmp_path / "r.db", create=False)
    assert again.run(r0.id).metrics["throughput_bps"] == 1.5e9
    assert again.integrity_ok()
    again.close()


def test_nan_metric_round_trips_as_nan(store):
    e = store.register_experiment("e", "h", {}, 1)
    store.add_runs(e, points(1))
    rid = store.runs(e)[0].id
    store.finish_run(rid, {"x": math.nan, "y": 2.0})
    m = store.run(rid).metrics
    assert math.isnan(m["x"]) and m["y"] == 2.0


def test_export_json_and_csv(store):
    e = store.register_experiment("e", "h", {}, 1)
    store.add_runs(e, points(3))
    runs = store.runs(e)
    store.finish_run(runs[0].id, {"bps": 10.0})
    store.finish_run(runs[2].id, {"bps": 30.0, "cpu.fw": 0.5})
    store.mark_failed(runs[1].id, "boom, it broke")

    data = json.loads(store.export("json"))
    assert [d["status"] for d in data] == ["done", "failed", "done"]
    assert data[0]["params"] == {"lab.chain.length": 2, "measure.flows": 0}
    assert data[2]["metrics"] == {"bps": 30.0, "cpu.fw": 0.5}
    assert data[1]["metrics"] == {} and data[1]["error"] == "boom, it broke"
    assert all(d["experiment"] == "e" for d in data)

    rows = list(csv.DictReader(io.StringIO(store.export("csv"))))
    assert len(rows) == 3
    assert rows[2]["bps"] == "30.0" and rows[2]["cpu.fw"] == "0.5" and rows[0]["cpu.fw"] == ""
    assert rows[1]["error"] == "boom, it broke" and rows[1]["lab.chain.length"] == "3"

    with pytest.raises(SpecError):
        store.export("xml")


def test_failed_write_rolls_back(store):
    e = store.register_experiment("e", "h", {}, 1)
    store.add_runs(e, points(1))
    rid = store.runs(e)[0].id
    store.mark_running(rid)
    with pytest.raises((TypeError, ValueError)):
        # the second metric cannot be stored: nothing of the run may be written
        store.finish_run(rid, {"ok": 1.0, "bad": "not a number"}, {"raw": "text"})
    r = store.run(rid)
    assert r.status == "running" and r.metrics == {} and store.raw(rid) == {}


def test_requeue_running(store):
    e = store.register_experiment("e", "h", {}, 1)
    store.add_runs(e, points(3))
    ids = [r.id for r in store.runs(e)]
    store.mark_running(ids[0])
    store.mark_running(ids[1])
    store.finish_run(ids[1], {"x": 1.0})
    assert store.requeue_running(e) == 1
    assert [r.status for r in store.runs(e)] == ["pending", "done", "pending"]
    assert store.run(ids[0]).started is None


def test_missing_or_foreign_database(tmp_path):
    with pytest.raises(SpecError) as ei:
        Store(tmp_path / "none.db", create=False)
    assert ei.value.exit_status == 2
    assert not (tmp_path / "none.db").exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(SpecError):
        Store(junk)


def test_wal_and_foreign_keys(store):
    c = store._conn
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        with store.transaction() as t:
            t.execute("INSERT INTO metrics (run_id, name, value) VALUES (999, 'x', 1)")


CHILD = textwrap.dedent("""
    import sys, time
    from sfclab.experiments.store import Store

    store = Store(sys.argv[1])
    rid = int(sys.argv[2])
    real = Store._write_raw

    def slow(c, run_id, raw):
        real(c, run_id, raw)          # metrics and raw are in the open transaction ...
        print("inside", flush=True)   # ... and the writer dies here
        time.sleep(60)

    Store._write_raw = staticmethod(slow)
    store.mark_running(rid)
    store.finish_run(rid, {"throughput_bps": 1e9, "lost": 3}, {"iperf3": "x" * 100000})
    print("committed", flush=True)
""")


def test_writer_killed_mid_transaction_leaves_consistent_db(tmp_path):
    db = tmp_path / "r.db"
    with Store(db) as s:
        e = s.register_experiment("e", "h", {}, 1)
        s.add_runs(e, points(2))
        first, second = [r.id for r in s.runs(e)]
        s.finish_run(first, {"throughput_bps": 5.0})
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(second)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "inside"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    with Store(db, create=False) as s:
        assert s.integrity_ok()
        r = s.run(second)
        assert r.status == "running"  # marked before the crash, never finished
        assert r.metrics == {} and s.raw(second) == {}
        assert s.run(first).metrics == {"throughput_bps": 5.0}
        # no run is done without its metrics
        for run in s.runs():
            if run.status == "done":
                assert s.metrics(run.id)
        assert s.requeue_running(r.experiment_id) == 1
        assert s.run(second).status == "pending"
