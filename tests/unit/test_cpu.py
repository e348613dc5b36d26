"""Per-core CPU use from /proc/stat and per-process CPU time (fixtures and the live files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.traffic.cpu import (CpuMonitor, CpuTimes, parse_pid_stat, parse_proc_stat,
                                process_cpu_seconds, read_proc_stat, reap, usage)

DATA = Path(__file__).parent / "data"


def fixture(name: str) -> dict[str, CpuTimes]:
    return parse_proc_stat((DATA / name).read_text())


def test_parse_fixture():
    s = fixture("proc_stat_before.txt")
    assert set(s) == {"cpu", "cpu0", "cpu1"}
    assert s["cpu0"] == CpuTimes(10000, 200, 15000, 400000, 600, 0, 2000, 0)
    assert s["cpu"].total == 20000 + 500 + 30000 + 800000 + 1200 + 0 + 4000 + 0


def test_usage_per_core_and_total():
    u = usage(fixture("proc_stat_before.txt"), fixture("proc_stat_after.txt"))
    c0, c1, tot = u["cores"]["cpu0"], u["cores"]["cpu1"], u["all"]
    assert c0 == pytest.approx({"user": 10, "system": 20, "irq": 1, "softirq": 19, "idle": 50,
                                "steal": 0, "busy": 50})
    # nice counts as user, iowait as idle
    assert c1 == pytest.approx({"user": 50, "system": 10, "irq": 0, "softirq": 0, "idle": 40,
                                "steal": 0, "busy": 60})
    assert tot == pytest.approx({"user": 30, "system": 15, "irq": 0.5, "softirq": 9.5,
                                 "idle": 45, "steal": 0, "busy": 55})
    assert list(u["cores"]) == ["cpu0", "cpu1"]


def test_no_time_passed_gives_zeros():
    s = fixture("proc_stat_before.txt")
    assert usage(s, s)["all"]["busy"] == 0.0


def test_short_lines_and_core_ordering():
    text = "cpu 1 2 3 4\n" + "".join(f"cpu{i} 1 2 3 4\n" for i in (10, 2, 1))
    s = parse_proc_stat(text)
    assert s["cpu"].iowait == 0
    after = parse_proc_stat(text.replace("1 2 3 4", "2 2 3 5"))
    assert list(usage(s, after)["cores"]) == ["cpu1", "cpu2", "cpu10"]


@pytest.mark.parametrize("text", ["", "intr 1 2\n", "cpu a b c\n", "cpu\n"])
def test_malformed_proc_stat(text):
    with pytest.raises(ValueError):
        parse_proc_stat(text)


def test_live_proc_stat():
    s = read_proc_stat()
    cores = [k for k in s if k != "cpu"]
    assert len(cores) >= 1
    assert len(cores) >= len(os.sched_getaffinity(0))
    assert s["cpu"].total > 0


def test_monitor_around_work():
    with CpuMonitor() as mon:
        x = 0
        for i in range(300_000):
            x += i * i
        mon.add_process("me", os.getpid(), process_cpu_seconds(os.getpid()))
    r = mon.result
    assert r["interval_s"] > 0
    for pct in [r["all"], *r["cores"].values()]:
        assert all(0.0 <= v <= 100.0 for v in pct.values())
        parts = pct["user"] + pct["system"] + pct["irq"] + pct["softirq"] + pct["idle"] \
            + pct["steal"]
        assert parts == pytest.approx(100.0) or parts == 0.0
    assert r["process_cpu_s"]["me"] > 0
    assert mon.pids["me"] == os.getpid()


def test_monitor_before_use_is_empty():
    assert CpuMonitor().result == {}


def test_parse_pid_stat_with_awkward_name():
    # the command name may contain spaces and ')' : fields are counted after the last ')'
    text = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 1 0 99 0 0"
    assert parse_pid_stat(text) == (150, 25)


def test_process_cpu_seconds():
    assert process_cpu_seconds(os.getpid()) > 0
    assert process_cpu_seconds(2 ** 22 + 12345) is None  # above pid_max's default range


def test_reap_child_with_rusage():
    p = subprocess.Popen([sys.executable, "-c", "sum(i*i for i in range(2_000_000))"])
    code, cpu_s = reap(p.pid, block=True)
    p.returncode = code
    assert code == 0
    assert cpu_s > 0
    with pytest.raises(ChildProcessError):
        reap(p.pid)


def test_reap_nonblocking_while_running():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert reap(p.pid) is None
    finally:
        p.kill()
        code, _ = reap(p.pid, block=True)
        p.returncode = code
    assert code < 0  # killed by a signal
