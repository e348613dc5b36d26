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
    assert w.received_pps == pytest.approx(1652 / 0.5)


def test_the_whole_trial_count_never_enters_the_rate():
    # a shaper that passed 3124 packets over ramp + sending + drain: the old arithmetic read
    # 3124 / 0.75 s = 4165 pps through a 3302 pps shaper; the window reads what it reached
    w = window_counts({"sent": 5625, "sent_window": 3750, "window_s": 0.5},
                      {"received": 3124, "received_window": 1651, "rx_window_received": 1652,
                       "rx_window_s": 0.5})
    assert w.received_pps < 3302 * 1.01


def test_received_rate_is_over_the_sending_window_not_the_arrival_span():
    # 1 Mpps into a starved sink (issue 23): 160,500 of the window's 510,000 probes arrived,
    # bunched into 0.42 s; the arrival span read 382 kpps where received / window is 315 kpps
    # and the loss 68.5 % -- the rate must agree with the loss
    w = window_counts({"sent_window": 510_000, "window_s": 0.51},
                      {"received_window": 160_500, "rx_window_received": 160_500,
                       "rx_window_s": 0.42})
    assert w.received_pps == pytest.approx(160_500 / 0.51)
    assert w.received_pps / w.sent_pps == pytest.approx(w.received / w.sent)


def test_received_rate_never_above_the_offered_rate():
    w = window_counts({"sent_window": 1000, "window_s": 0.5},
                      {"received_window": 1000, "rx_window_received": 1000, "rx_window_s": 0.49})
    assert w.received_pps == w.sent_pps == 2000


def test_a_sink_without_the_arrival_span_still_counts():
    w = window_counts({"sent_window": 100, "window_s": 1.0}, {"received_window": 5})
    assert w.received_pps == 5.0 and (w.rx_received, w.rx_window_s) == (0, 0.0)


def test_received_never_exceeds_sent_in_the_window():
    w = window_counts({"sent_window": 100, "window_s": 1.0},
                      {"received_window": 103, "rx_window_received": 103, "rx_window_s": 1.0})
    assert w.received == 100 and w.received_pps == 100


@pytest.mark.parametrize(("sender", "sink"), [
    ({"sent": 10, "duration_s": 1.0}, {"received": 10}),          # an sfcgen without the window
    ({"sent_window": 10, "window_s": 1.0}, {"received": 10}),
    ({"sent_window": "x", "window_s": 1.0}, {"received_window": 10}),
    ({"sent_window": 10, "window_s": 1.0}, {"received_window": 10, "rx_window_s": "x"}),
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
