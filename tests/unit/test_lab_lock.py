"""The lab's lock: ``up`` is refused at once when the lab is busy; ``down`` waits a moment for
a lock held by what a killed command left (a child between its fork and its exec)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sfclab.errors import LabError
from sfclab.realize.state import LabState

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(path: Path, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_a_busy_lock_is_refused_at_once_without_a_wait(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    state = LabState("busy")
    state.lock_path.parent.mkdir(parents=True, exist_ok=True)
    p = _hold(state.lock_path, 5)
    try:
        t0 = time.monotonic()
        with pytest.raises(LabError, match="is busy"):
            with state.locked():
                pass
        assert time.monotonic() - t0 < 1
    finally:
        p.kill()
        p.wait()


def test_a_wait_outlasts_a_lock_held_a_moment(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    state = LabState("moment")
    state.lock_path.parent.mkdir(parents=True, exist_ok=True)
    p = _hold(state.lock_path, 0.3)
    try:
        t0 = time.monotonic()
        with state.locked(wait=5):
            waited = time.monotonic() - t0
            # the holder is ending: its lock goes as its files close, a moment before it can
            # be waited for (so not p.poll(), which CI once found still running)
            assert p.wait(timeout=5) == 0
        assert waited >= 0.25, waited  # taken only once the holder let go
    finally:
        p.kill()
        p.wait()
