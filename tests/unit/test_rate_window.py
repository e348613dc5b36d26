"""The measured window's arithmetic (sfclab.traffic.window) and the trial's whole/window counts."""

from __future__ import annotations

import pytest

from sfclab.errors import MeasurementError
from sfclab.traffic.generator import Trial
from sfclab.traffic.window import window_counts


def test_rates_are_window_counts_over_the_window():
    w = window_counts({"sent": 5625, "sent_window": 3750, "window_s": 0.5},
                      {"received": 3124, "received_window": 1652, "rx_window_received": 1652,
                       "rx_window_s": 0.5})
    assert (w.sent, w.received, w.window_s) == (3750, 1652, 0.5)
    assert w.sent_pps == pytest.approx(7500)
    # n arrivals spaced evenly over a span: n - 1 gaps
    assert w.received_pps == pytest.approx(1651 / 0.5)


def test_the_whole_trial_count_never_enters_the_rate():
    # a shaper that passed 3124 packets over ramp + sending + drain: the old arithmetic read
    # 3124 / 0.75 s = 4165 pps through a 3302 pps shaper; the window reads what it reached
    w = window_counts({"sent": 5625, "sent_window": 3750, "window_s": 0.5},
                      {"received": 3124, "received_window": 1651, "rx_window_received": 1652,
                       "rx_window_s": 0.5})
    assert w.received_pps < 3302 * 1.01


def test_received_rate_is_the_arrival_span_not_window_probes_over_the_window():
    # an HTB queue still filling when the window starts: 2065 of the window's probes got through,
    # arriving over 0.625 s (0.5 s window + the queue grown from 0.18 s to 0.3 s of delay)
    w = window_counts({"sent_window": 3750, "window_s": 0.5},
                      {"received_window": 2065, "rx_window_received": 2065, "rx_window_s": 0.625})
    assert w.received == 2065
    assert w.received_pps == pytest.approx(2064 / 0.625)  # 3302, not 2065 / 0.5 = 4130


def test_received_rate_never_above_the_offered_rate():
    w = window_counts({"sent_window": 1000, "window_s": 0.5},
                      {"received_window": 1000, "rx_window_received": 1000, "rx_window_s": 0.49})
    assert w.received_pps == w.sent_pps == 2000


@pytest.mark.parametrize(("n", "span"), [(0, 0.0), (1, 0.0), (5, 0.0)])
def test_no_arrival_span_reads_zero(n, span):
    w = window_counts({"sent_window": 100, "window_s": 1.0},
                      {"received_window": n, "rx_window_received": n, "rx_window_s": span})
    assert w.received_pps == 0.0


def test_received_never_exceeds_sent_in_the_window():
    w = window_counts({"sent_window": 100, "window_s": 1.0},
                      {"received_window": 103, "rx_window_received": 103, "rx_window_s": 1.0})
    assert w.received == 100 and w.received_pps == 100


@pytest.mark.parametrize(("sender", "sink"), [
    ({"sent": 10, "duration_s": 1.0}, {"received": 10}),          # an sfcgen without the window
    ({"sent_window": 10, "window_s": 1.0}, {"received": 10}),
    ({"sent_window": "x", "window_s": 1.0}, {"received_window": 10}),
])
def test_missing_window_is_a_clear_error(sender, sink):
    with pytest.raises(MeasurementError, match="make -C native"):
        window_counts(sender, sink)


def test_empty_window_is_an_error():
    with pytest.raises(MeasurementError, match="window is empty"):
        window_counts({"sent_window": 0, "window_s": 0.0},
                      {"received_window": 0, "rx_window_received": 0, "rx_window_s": 0.0})


def test_loss_is_over_the_window_the_locator_sees_the_whole_trial():
    t = Trial(offered_pps=7500, duration_s=1.0, size=1518, sent=3750, received=1652,
              sent_pps=7500, received_pps=3304, sent_total=5625, received_total=3124)
    assert t.lost == 2098 and t.loss_ratio == pytest.approx(2098 / 3750)
    assert t.lost_total == 2501
    d = t.to_dict()
    assert d["sent_total"] == 5625 and d["received_total"] == 3124


def test_trial_without_totals_keeps_its_shape():
    t = Trial(offered_pps=10, duration_s=1.0, size=64, sent=10, received=9, sent_pps=10,
              received_pps=9)
    assert t.lost_total == t.lost == 1
    assert "sent_total" not in t.to_dict() and "received_total" not in t.to_dict()
