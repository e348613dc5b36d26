"""The parallel phase's rerun hook (``tests/integration/backlog_rerun.py``), run in an inner
pytest session over a made-up ``softnet_stat``: a test that fails while the backlogs dropped
frames is run once more and the rerun's verdict is its own; a failure with no drop is final."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import os
from pathlib import Path
import pytest
from tests.integration import backlog_rerun

backlog_rerun.SOFTNET = Path(os.environ["FAKE_SOFTNET"])
backlog_rerun.QUIET_FOR = 0.1
backlog_rerun.QUIET_WAIT = 5.0

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    return backlog_rerun.run(item, nextitem, Path(os.environ["RERUN_LOG"]))
"""

#: each run of the test counts itself in RUNS; a run in DROP_ON drops frames on "CPU 1";
#: a run in FAIL_ON fails
TEST = """
import os
from pathlib import Path

def test_counts_packets():
    runs = Path(os.environ["RUNS"])
    n = int(runs.read_text() or "0") + 1 if runs.exists() else 1
    runs.write_text(str(n))
    if str(n) in os.environ["DROP_ON"].split(","):
        softnet = Path(os.environ["FAKE_SOFTNET"])
        rows = softnet.read_text().splitlines()
        cols = rows[1].split()
        cols[1] = format(int(cols[1], 16) + 12, "08x")
        rows[1] = " ".join(cols)
        softnet.write_text("\\n".join(rows) + "\\n")
    assert str(n) not in os.environ["FAIL_ON"].split(","), f"run {n} lost 12 datagrams"
"""


def inner(tmp_path: Path, drop_on: str, fail_on: str) -> tuple[subprocess.CompletedProcess,
                                                                 int, str]:
    """Run the inner session; its result, how often the test ran, and the rerun log."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TEST)
    softnet = tmp_path / "softnet_stat"
    softnet.write_text("0000a000 00000005 00000000\n0000b000 00000007 00000000\n")
    env = dict(os.environ, FAKE_SOFTNET=str(softnet), RERUN_LOG=str(tmp_path / "reruns.txt"),
               RUNS=str(tmp_path / "runs"), DROP_ON=drop_on, FAIL_ON=fail_on,
               PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    cp = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         "--rootdir", str(tmp_path), str(tmp_path)],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    runs = int((tmp_path / "runs").read_text())
    log = tmp_path / "reruns.txt"
    return cp, runs, log.read_text() if log.exists() else ""


def test_a_failure_while_the_backlogs_dropped_is_run_again_and_its_pass_counts(tmp_path):
    cp, runs, log = inner(tmp_path, drop_on="1", fail_on="1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert runs == 2 and "1 passed" in cp.stdout
    assert "test_inner.py::test_counts_packets: failed (test_inner.py:" in log
    assert "dropped 12 frames; run again after" in log and log.rstrip().endswith(": passed")


def test_a_rerun_that_fails_again_fails_the_test(tmp_path):
    cp, runs, log = inner(tmp_path, drop_on="1", fail_on="1,2")
    assert cp.returncode == 1 and runs == 2 and "1 failed" in cp.stdout
    assert "run 2 lost 12 datagrams" in cp.stdout  # the rerun's report is the one shown
    assert log.rstrip().endswith(": failed again")


@pytest.mark.parametrize("drop_on,fail_on", [("", "1"), ("1", "")])
def test_a_failure_with_no_drop_and_a_pass_with_drops_run_once(tmp_path, drop_on, fail_on):
    cp, runs, log = inner(tmp_path, drop_on=drop_on, fail_on=fail_on)
    assert runs == 1 and log == ""
    assert cp.returncode == (1 if fail_on else 0), cp.stdout + cp.stderr
