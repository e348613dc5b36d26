"""One small real experiment end to end: sweep, real labs, real iperf3, SQLite, report."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.integration.labtools import nothing_left

from sfclab.cli import main

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def experiment(tmp_path, lab: str, reps: int = 2) -> str:
    f = tmp_path / "exp.yaml"
    f.write_text(f"""
name: e2e
lab: {{name: {lab}, chain: {{length: 2}}}}
measure: {{type: iperf, flows: 2, duration: 1}}
sweep:
  lab.chain.length: [2, 4]
repetitions: {reps}
""")
    return str(f)


def test_small_experiment_runs_stores_and_reports(tmp_path, capsys, lab_name):
    f = experiment(tmp_path, lab_name)
    db = str(tmp_path / "r.db")
    assert main(["run", f, "--db", db, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["done"] == summary["total"] == 4
    assert nothing_left(lab_name)

    assert main(["results", "export", "--db", db, "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 4 and all(r["status"] == "done" for r in runs)
    assert {r["params"]["lab.chain.length"] for r in runs} == {2, 4}
    assert all(r["metrics"]["throughput_bps"] > 1e6 for r in runs)

    # running again redoes nothing
    assert main(["run", f, "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ran"] == 0

    out = tmp_path / "report"
    assert main(["report", "--db", db, "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "throughput against chain length" in text and "per-hop loss" in text.lower()
    assert (out / "report.html").exists()
    pngs = list((out / "plots").glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_interrupted_run_leaves_no_lab_and_resumes(tmp_path, lab_name):
    f = experiment(tmp_path, lab_name, reps=3)
    db = str(tmp_path / "r.db")
    p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "run", f, "--db", db],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # interrupt (Ctrl-C) once the first run is done and another is under way
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if os.path.exists(db):
            try:
                with sqlite3.connect(db) as c:
                    done = c.execute("select count(*) from runs where status='done'").fetchone()[0]
            except sqlite3.OperationalError:  # the runner is still creating its tables
                continue
            if done >= 1:
                break
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=60) == 130
    assert nothing_left(lab_name)
    with sqlite3.connect(db) as c:
        before = dict(c.execute("select status, count(*) from runs group by status").fetchall())
    assert before.get("done", 0) >= 1 and before.get("running", 0) == 0
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "run", f, "--db", db, "--json"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    s = json.loads(cp.stdout)
    assert s["done"] == 6 and s["ran"] == 6 - before["done"]
