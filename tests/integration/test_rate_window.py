"""A rate trial never reports a rate it did not reach: through a shaper, a 1 s trial with a ramp
reads the shaper's rate (not what the shaper passed over ramp + trial + drain divided by a
shorter span), and an unshaped trial reads the offered rate with no loss.  Both sinks (socket and
XDP) and the live-frames engine count the same measured window (sfclab.traffic.window).
"""

from __future__ import annotations

import pytest

from sfclab.kernel import netns
from sfclab.traffic.native import NativeGenerator

DST_IP = "198.18.0.2"
FRAME = 1518  # bytes on the wire with FCS; the shaper counts the 1514 bytes of the skb
SHAPER_BPS = 40_000_000
SHAPER_PPS = SHAPER_BPS / 8 / (FRAME - 4)  # 3302.5 pps


@pytest.fixture
def pair(sfcgen, veth_pair):
    return veth_pair


@pytest.mark.parametrize("sink", ["socket", "xdp"])
def test_one_second_trial_through_a_shaper_reads_the_shapers_rate(pair, sink):
    src, dst = pair
    # 40 Mbit/s on the sender's interface, a queue of 50 ms (drained well within the 0.2 s drain)
    netns.run(src, ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "40mbit",
                    "burst", "16kb", "latency", "50ms"])
    port = 7401 if sink == "socket" else 7402
    with NativeGenerator(src, dst, DST_IP, port=port, engine="packet", sink=sink) as gen:
        t = gen.trial(7_500, 1.0, FRAME, ramp_s=0.5)
    # what the trial reports: the shaper's rate, within a few percent, never above it (before the
    # measured window, this trial read 4.16 kpps: everything received over 0.75 s)
    assert t.received_pps == pytest.approx(SHAPER_PPS, rel=0.04)
    assert t.received_pps <= SHAPER_PPS * 1.01
    assert not t.generator_limited
    assert t.sent_pps == pytest.approx(7_500, rel=0.03)
    window = t.raw["sender"]["window_s"]
    assert 0.49 <= window <= 0.53, "the window runs from the ramp's end to the sending's end"
    # the whole trial's figures: the shaper passed more than its rate x window (ramp and drain)
    assert t.received_total is not None and t.received_total > SHAPER_PPS * window * 1.3
    assert t.loss_ratio == pytest.approx(1 - SHAPER_PPS / 7_500, abs=0.03)


@pytest.mark.parametrize(("engine", "sink", "ramp"), [
    ("packet", "socket", 0.5), ("packet", "socket", None), ("xdp", "xdp", 0.5)])
def test_unshaped_trial_reads_the_offered_rate_without_loss(pair, engine, sink, ramp):
    src, dst = pair
    with NativeGenerator(src, dst, DST_IP, port=7403, engine=engine, sink=sink) as gen:
        t = gen.trial(20_000, 1.0, 64, ramp_s=ramp)
    assert t.raw["sender"]["engine"] == engine and t.raw["sink"]["mode"] == sink
    assert t.lost == 0 and t.loss_ratio == 0.0
    assert t.received == t.sent
    assert t.sent_total == t.received_total == t.raw["sender"]["sent"]
    # window counts: with a ramp, the ramp's share (rate x ramp / 2) is outside the window
    expected_window = 20_000 * (1.0 - (ramp or 0.0))
    assert t.sent == pytest.approx(expected_window, rel=0.03)
    assert t.sent_total - t.sent == pytest.approx(20_000 * (ramp or 0.0) / 2, rel=0.05, abs=70)
    assert t.sent_pps == pytest.approx(20_000, rel=0.03)
    assert t.received_pps == pytest.approx(20_000, rel=0.03)
    assert not t.generator_limited
