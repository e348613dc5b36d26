"""``sfc-stall`` on real threads: a thread that a real-time hog keeps from its core is held for
as long as the hog runs, and a thread left alone is not (``sfclab.kernel.stall``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sfclab.kernel.stall import StallMeter, stall_binary

#: a thread that wakes every millisecond on one core
SLEEPER = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n" \
          "print('ready', flush=True)\nwhile True:\n    time.sleep(0.001)\n"
#: a real-time hog on that core for the given seconds
HOG = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\n" \
      "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))\n" \
      "end = time.monotonic() + float(sys.argv[2])\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def sleeper():
    if not os.access(stall_binary(), os.X_OK):
        subprocess.run(["make", "-C", "native", "-s", "build/sfc-stall"], check=True)
    cpu = max(os.sched_getaffinity(0))
    p = subprocess.Popen([sys.executable, "-c", SLEEPER, str(cpu)], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p.pid, cpu
    finally:
        p.kill()  # by PID: our own child
        p.wait()
        p.stdout.close()


@pytest.mark.serial  # times what the machine's load changes
def test_a_thread_kept_from_its_core_is_held_as_long_and_one_left_alone_is_not(sleeper):
    tid, cpu = sleeper
    with StallMeter([tid]) as meter:
        meter.read()
        time.sleep(0.3)
        calm = meter.read()[tid]
        subprocess.run([sys.executable, "-c", HOG, str(cpu), "0.05"], check=True, timeout=30)
        time.sleep(0.05)
        held = meter.read()[tid]
    assert calm.longest_s < 0.01 and calm.count >= 100, calm  # woken every ms, run at once
    assert 0.045 <= held.longest_s <= 0.5, held  # the hog's 50 ms
    assert held.total_s >= calm.total_s + 0.045 and held.count > calm.count


def test_a_bad_thread_id_is_refused_with_exit_2():
    for bad in ("0", "x", "-1", "99999999999"):
        cp = subprocess.run([stall_binary(), bad], capture_output=True, text=True, timeout=10)
        assert cp.returncode == 2 and "Not a thread id" in cp.stderr, (bad, cp.stderr)
