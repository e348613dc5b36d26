"""A rate trial never reports a rate it did not reach: through a shaper, a 1 s trial with a ramp
reads the shaper's rate (not what the shaper passed over ramp + trial + drain divided by a
shorter span), at most plus what its queue grew by over the window (RFC 2544's arithmetic,
received over the offered window), and an unshaped trial reads the offered rate with no loss.  Both sinks (socket and
XDP) and the live-frames engine count the same measured window (sfclab.traffic.window).
"""

from __future__ import annotations

import pytest

from sfclab.kernel import netns
from sfclab.traffic.native import NativeGenerator

pytestmark = pytest.mark.serial  # times or counts what the machine's load changes

DST_IP = "198.18.0.2"
#: trials per case: the machine is shared, so one trial may have its sender or the shaper's
#: softirq starved; every trial must keep the bound, one undisturbed trial must be exact
TRIES = 3
FRAME = 1518  # bytes on the wire with FCS; the shaper counts the 1514 bytes of the skb
SHAPER_BPS = 40_000_000
SHAPER_PPS = SHAPER_BPS / 8 / (FRAME - 4)  # 3302.5 pps
#: packets a shaper's queue can hold beyond its rate: an HTB leaf's 1000, a TBF's 50 ms
QUEUE = {"tbf": 0, "htb": 1000}


@pytest.fixture
def pair(sfcgen, veth_pair):
    return veth_pair


SHAPERS = {
    # 40 Mbit/s, a queue of 50 ms: drained within the 0.2 s drain
    "tbf": [["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "40mbit",
             "burst", "16kb", "latency", "50ms"]],
    # 40 Mbit/s, the leaf's 1000-packet queue: 0.3 s of window probes still queued when the
    # sending ends (the drain goes on while they arrive)
    "htb": [["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"],
            ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb",
             "rate", "40mbit"]],
}


@pytest.mark.parametrize(("shaper", "sink"), [("tbf", "socket"), ("tbf", "xdp"),
                                              ("htb", "socket")])
def test_one_second_trial_through_a_shaper_reads_the_shapers_rate(pair, shaper, sink):
    src, dst = pair
    for argv in SHAPERS[shaper]:  # on the sender's interface, in the test's own namespace
        netns.run(src, argv)
    port = 7401 if sink == "socket" else 7402
    with NativeGenerator(src, dst, DST_IP, port=port, engine="packet", sink=sink) as gen:
        for _ in range(TRIES):
            t = gen.trial(7_500, 1.0, FRAME, ramp_s=0.5)
            window = t.raw["sender"]["window_s"]
            # never above the shaper's rate plus what its queue can grow by in the window
            # (before the measured window, this trial read 4.16 kpps through TBF: everything
            # received over ramp, sending and drain divided by 0.75 s)
            assert t.received_pps <= SHAPER_PPS * 1.01 + QUEUE[shaper] / window
            # one window: the rates agree with the counts and the loss
            assert t.received_pps == pytest.approx(t.received / window)
            assert t.received_pps == pytest.approx(t.sent_pps * (1 - t.loss_ratio))
            if t.sent_pps == pytest.approx(7_500, rel=0.03):
                break  # the sender kept its schedule: this trial must read the shaper's rate
    # what the trial reports: the shaper's rate, within a few percent (HTB: plus its queue's
    # growth, a queue still filling when the window starts)
    if shaper == "tbf":
        assert t.received_pps == pytest.approx(SHAPER_PPS, rel=0.04)
    else:
        assert SHAPER_PPS * 0.96 <= t.received_pps <= SHAPER_PPS * 1.01 + QUEUE[shaper] / window
    assert not t.generator_limited
    assert t.sent_pps == pytest.approx(7_500, rel=0.03)
    assert t.window_s == window and 0.49 <= window <= 0.53, "the window runs from the ramp's end to the sending's end"
    # the whole trial's figures: the shaper passed more than its rate x window (ramp and drain)
    assert t.received_total is not None and t.received_total > SHAPER_PPS * window * 1.3
    # the arrivals' span over the window's probes is kept (at least the window long), unused
    assert t.raw["sink"]["rx_window_s"] >= window * 0.95
    # loss over the window's probes; with a short queue it is the shaper's excess (a queue still
    # filling when the window starts lets some more of the window's probes through)
    assert 0.3 < t.loss_ratio < 0.6 and t.received < t.sent
    if shaper == "tbf":
        assert t.loss_ratio == pytest.approx(1 - SHAPER_PPS / 7_500, abs=0.03)


@pytest.mark.parametrize(("engine", "sink", "ramp"), [
    ("packet", "socket", 0.5), ("packet", "socket", None), ("xdp", "xdp", 0.5)])
def test_unshaped_trial_reads_the_offered_rate_without_loss(pair, engine, sink, ramp):
    src, dst = pair
    with NativeGenerator(src, dst, DST_IP, port=7403, engine=engine, sink=sink) as gen:
        for _ in range(TRIES):
            t = gen.trial(20_000, 1.0, 64, ramp_s=ramp)
            assert t.received <= t.sent and t.received_pps <= t.sent_pps
            if t.lost == 0 and t.sent_pps == pytest.approx(20_000, rel=0.03):
                break  # an undisturbed trial (a starved veth backlog may drop a few packets)
    assert t.raw["sender"]["engine"] == engine and t.raw["sink"]["mode"] == sink
    assert t.lost == 0 and t.loss_ratio == 0.0
    assert t.received == t.sent
    assert t.sent_total == t.raw["sender"]["sent"] and t.received_total <= t.sent_total
    # window counts: with a ramp, the ramp's share (rate x ramp / 2) is outside the window
    expected_window = 20_000 * (1.0 - (ramp or 0.0))
    assert t.sent == pytest.approx(expected_window, rel=0.03)
    assert t.sent_total - t.sent == pytest.approx(20_000 * (ramp or 0.0) / 2, rel=0.05, abs=70)
    assert t.sent_pps == pytest.approx(20_000, rel=0.03)
    assert t.received_pps == pytest.approx(20_000, rel=0.03)
    assert not t.generator_limited
