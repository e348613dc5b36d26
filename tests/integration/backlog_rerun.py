"""A test that counts packets can lose them to another test's flood: every veth hands its frames
to the sending CPU's backlog queue, one queue per CPU for the whole machine, every namespace
together (``/proc/net/softnet_stat``, second column: frames dropped because the queue held
``net.core.netdev_max_backlog`` already).  A rate search in one pytest worker fills it on its
CPU, and a datagram another worker's test sends on that CPU meanwhile is dropped there, before
any node of its lab saw it.  (CI's stop 35: ``test_path_kinds[ovs-userspace]`` counted 12 of
200 datagrams, ``test_encap_ipv6[srv6]`` 12 of 20, while three NDR searches ran beside them;
a ``traffic rate --rates max`` beside ``test_path_kinds`` fails it every time.)

So, in the parallel phase only: a test that fails while the machine's backlogs dropped frames
is run once more, after they have stopped dropping (up to :data:`QUIET_WAIT` s), and the rerun's
verdict is the test's.  A failure with no backlog drop is final, as is the rerun's.  Each rerun
is written to ``build/tests/reruns.txt``, which ``scripts/test.sh`` prints at the end of the
run.  The serial phase runs nothing beside its test: its failures are never rerun."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

SOFTNET = Path("/proc/net/softnet_stat")
#: at most this long the rerun waits for the backlogs to stop dropping
QUIET_WAIT = 60.0
#: they have stopped when they dropped nothing for this long
QUIET_FOR = 2.0


def backlog_drops() -> int:
    """Frames the machine's CPU backlogs have dropped since boot, all CPUs together."""
    return sum(int(line.split()[1], 16) for line in SOFTNET.read_text().splitlines())


def wait_quiet() -> float:
    """Wait until the backlogs dropped nothing for :data:`QUIET_FOR` s; the seconds waited."""
    start = time.monotonic()
    last, since = backlog_drops(), time.monotonic()
    while time.monotonic() - since < QUIET_FOR and time.monotonic() - start < QUIET_WAIT:
        time.sleep(0.25)
        now = backlog_drops()
        if now != last:
            last, since = now, time.monotonic()
    return time.monotonic() - start


def failed_call(reports: list[pytest.TestReport]) -> bool:
    return any(r.failed and r.when == "call" for r in reports)


def run(item: pytest.Item, nextitem: pytest.Item | None, log_file: Path) -> bool:
    """``pytest_runtest_protocol`` for one parallel-phase test: the test, and once more if its
    call failed while the backlogs dropped frames; only the last run's reports are logged."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    before = backlog_drops()
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    dropped = backlog_drops() - before
    if failed_call(reports) and dropped > 0:
        first = next(r for r in reports if r.failed and r.when == "call")
        why = (str(first.longrepr).strip().splitlines() or ["?"])[-1][:200]
        waited = wait_quiet()
        item._initrequest()  # type: ignore[attr-defined]  # fresh fixtures for the rerun
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        verdict = "failed again" if failed_call(reports) else "passed"
        line = (f"{item.nodeid}: failed ({why}) while the machine's CPU backlogs dropped "
                f"{dropped} frames; run again after {waited:.1f} s: {verdict}\n")
        for r in reports:
            r.user_properties.append(("rerun", line.strip()))
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("a") as f:  # one short line: appended whole by each worker
            f.write(line)
    for r in reports:
        ihook.pytest_runtest_logreport(report=r)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
