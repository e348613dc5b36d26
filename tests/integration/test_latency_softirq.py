"""Latency that measures the path, not the receiver's queue: with the receiver's process
stopped for 0.4 s of a trial, probes timestamped at the socket read its queue (hundreds of ms),
probes timestamped in the receiver's softirq (the XDP sink) do not; the statistics are sfclab's
own, from the sink's histogram (issue 23, item 4)."""

from __future__ import annotations

import os
import signal
import threading

from sfclab.traffic.histogram import from_sink
from sfclab.traffic.native import NativeGenerator

DST_IP = "198.18.0.2"


def _stopped_trial(gen: NativeGenerator):
    pid = gen.sink_pid
    assert pid is not None
    stop = threading.Timer(0.2, os.kill, (pid, signal.SIGSTOP))
    go = threading.Timer(0.6, os.kill, (pid, signal.SIGCONT))
    stop.start()
    go.start()
    try:
        return gen.trial(5_000, 1.0, 64)
    finally:
        stop.cancel()
        go.cancel()
        os.kill(pid, signal.SIGCONT)


def test_softirq_timestamps_do_not_wait_in_the_receivers_queue(sfcgen, veth_pair):
    src, dst = veth_pair
    with NativeGenerator(src, dst, DST_IP, port=7421, engine="packet", sink="socket") as gen:
        sock = _stopped_trial(gen)
    with NativeGenerator(src, dst, DST_IP, port=7422, engine="packet", sink="xdp") as gen:
        soft = _stopped_trial(gen)
    assert sock.latency_source == "socket" and soft.latency_source == "softirq"
    # the socket's probes waited for the stopped process: its p99 is the stop, not the path
    assert sock.latency_us["p99"] > 100_000
    # in softirq the same stop does not show: the path's delay on a direct link
    assert soft.latency_us["p99"] < 20_000, soft.latency_us
    assert soft.received == soft.sent
    # sfclab's statistics from the sink's histogram agree with the sink's own percentiles
    h = from_sink(soft.raw["sink"])
    assert h is not None and h.count == soft.raw["sink"]["latency_us"]["count"]
    for k in ("p50", "p99"):
        assert abs(soft.latency_us[k] - soft.raw["sink"]["latency_us"][k]) <= \
            soft.raw["sink"]["latency_us"][k] / 64 + 0.001
