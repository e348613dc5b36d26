"""The chain's own CPU per trial (sfclab.traffic.wrappers.CoreWatchedGenerator): the run time
of the threads the chain's work runs in, read from /proc/PID/schedstat around each trial, and
nothing else's.  Here the 'chain thread' is a thread of this test that spins during each
trial; another thread spinning beside it does not count."""

from __future__ import annotations

import threading
import time

from sfclab.traffic.cpu import ksoftirqd, run_ns
from sfclab.traffic.fake import FakeGenerator
from sfclab.traffic.wrappers import CoreWatchedGenerator


def spin(seconds: float) -> None:
    """Run for ``seconds`` of this thread's own CPU time (however loaded the machine is)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Spinning(FakeGenerator):
    """A fake generator whose trials make a given thread spin for ``busy`` seconds."""

    def __init__(self, busy: float):
        super().__init__()
        self.busy = busy
        self.tid = 0

    def trial(self, offered_pps, duration_s, size, ramp_s=None):  # type: ignore[no-untyped-def]
        done = threading.Event()

        def work() -> None:
            self.tid = threading.get_native_id()
            spin(self.busy)
            done.set()

        threading.Thread(target=work).start()
        done.wait()
        return super().trial(offered_pps, duration_s, size, ramp_s)


def test_the_chain_threads_run_time_is_counted_per_trial() -> None:
    gen = Spinning(0.2)
    gen.trial(1000, 0.01, 64)  # learn the worker's thread id (a new thread each trial)
    me = threading.get_native_id()
    watched = CoreWatchedGenerator(gen, {"chain": [0], "generator": [0]}, [me])
    t = watched.trial(1000, 0.01, 64)
    # this thread only waited: its run time over the trial is far below the worker's 0.2 s
    assert t.cores is not None and t.cores["chain"]["threads_cpu_s"] < 0.1
    assert "threads_cpu_s" not in t.cores["generator"]


def test_a_spinning_chain_thread_is_counted() -> None:
    """The watched thread spins 0.3 s inside the trial: about that much is counted."""
    me = threading.get_native_id()

    class Here(FakeGenerator):
        def trial(self, offered_pps, duration_s, size, ramp_s=None):  # type: ignore[no-untyped-def]
            spin(0.3)
            t = super().trial(offered_pps, duration_s, size, ramp_s)
            t.received_total = t.received + 500  # a window measured inside a longer trial
            return t

    t = CoreWatchedGenerator(Here(), {"chain": [0]}, [me]).trial(1000, 0.01, 64)
    assert t.cores is not None and 0.3 <= t.cores["chain"]["threads_cpu_s"] <= 0.6
    assert t.cores["chain"]["threads_frames"] == t.received + 500 == t.received_whole


def test_the_readers() -> None:
    assert run_ns(threading.get_native_id()) > 0
    assert run_ns(2 ** 22 + 12345) is None  # no such thread
    pid = ksoftirqd(0)
    assert pid is not None and open(f"/proc/{pid}/comm").read().strip() == "ksoftirqd/0"


def test_cpu_per_packet_at_the_ndr_is_read_from_its_fastest_lossless_trial() -> None:
    from sfclab.traffic.ndr import chain_cpu_per_packet

    def trial(pps: float, lost: int, threads: float | None, busy: float = 50.0) -> dict:
        chain = {"cpus": [0], "busy_pct": busy, "softirq_pct": 0.0}
        if threads is not None:
            chain["threads_cpu_s"] = threads
        return {"purpose": "search", "effective_pps": pps, "lost": lost,
                "received": int(pps), "window_s": 1.0, "cores": {"chain": chain}}

    extra = {"trials": [trial(1000, 0, 0.002), trial(4000, 3, 0.02), trial(2000, 0, 0.004),
                        {**trial(9000, 0, 0.001), "purpose": "max-rate"}]}
    assert chain_cpu_per_packet(extra) == (2.0, "threads")  # 0.004 s over 2,000 packets
    no_threads = {"trials": [trial(2000, 0, None, busy=40.0)]}
    assert chain_cpu_per_packet(no_threads) == (200.0, "core")  # 0.4 s of the core
    assert chain_cpu_per_packet({"trials": [trial(2000, 5, 0.1)]}) is None
    # the threads' run time covers the whole trial: over the frames of that span when known
    whole = trial(2000, 0, 0.004)
    whole["cores"]["chain"]["threads_frames"] = 4000
    assert chain_cpu_per_packet({"trials": [whole]}) == (1.0, "threads")
