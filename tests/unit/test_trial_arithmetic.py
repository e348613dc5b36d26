"""Property test of a trial's arithmetic: whatever the sender and the sink report, every figure
is over one window, and received <= sent, received_pps <= sent_pps, loss_ratio = 1 -
received/sent hold in the trial, its JSON, a search's trial row and the rate table's text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfclab.cli.measure import rate_rows
from sfclab.traffic.generator import Trial
from sfclab.traffic.ndr import SearchTrial
from sfclab.traffic.window import window_counts

counts = st.integers(min_value=0, max_value=50_000_000)
spans = st.floats(min_value=1e-3, max_value=3600.0, allow_nan=False)


def native_trial(offered: float, sender: dict, sink: dict) -> Trial:
    """A trial as NativeGenerator.trial builds it from the two reports."""
    w = window_counts(sender, sink)
    return Trial(offered_pps=offered, duration_s=1.0, size=64, sent=w.sent, received=w.received,
                 sent_pps=w.sent_pps, received_pps=w.received_pps, window_s=w.window_s)


def check(d: dict) -> None:
    assert d["received"] <= d["sent"]
    assert d["received_pps"] <= d["sent_pps"] * (1 + 1e-12)
    if d["sent"]:
        assert d["loss_ratio"] == pytest.approx(1 - d["received"] / d["sent"], abs=1e-12)
        # the rates are the counts over the same window: they agree with the loss
        assert d["received_pps"] == pytest.approx(d["sent_pps"] * (1 - d["loss_ratio"]),
                                                  rel=1e-9, abs=1e-9)
    else:
        assert d["loss_ratio"] == 0.0 and d["received_pps"] == 0.0


@settings(max_examples=300, deadline=None)
@given(sent=counts, received=counts, window=spans, rx=counts, rx_span=spans,
       offered=st.floats(min_value=1.0, max_value=1e8))
def test_trial_invariants_hold_everywhere(sent, received, window, rx, rx_span, offered):
    t = native_trial(offered, {"sent_window": sent, "window_s": window},
                     {"received_window": received, "rx_window_received": rx,
                      "rx_window_s": rx_span})
    assert t.window_s == window
    d = json.loads(json.dumps(t.to_dict()))
    check(d)
    assert d["window_s"] == window
    row = json.loads(json.dumps(SearchTrial(0, "curve", None, t).to_dict()))
    check(row)
    # the text table shows the same figures, rounded
    line = rate_rows([row])[1]
    o, s, r, loss = (float(x.replace(",", "")) for x in line.split()[:4])
    assert r <= s + 1 and loss == pytest.approx(row["loss_ratio"] * 100, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(pairs=st.lists(st.tuples(counts, counts, spans), min_size=2, max_size=4))
def test_pairs_keep_the_invariants_in_each_pair(pairs):
    done = [native_trial(1e6, {"sent_window": s, "window_s": w}, {"received_window": r})
            for s, r, w in pairs]
    t = Trial(offered_pps=1e6, duration_s=1.0, size=64, sent=sum(p.sent for p in done),
              received=sum(p.received for p in done), sent_pps=sum(p.sent_pps for p in done),
              received_pps=sum(p.received_pps for p in done), pairs=done)
    d = t.to_dict()
    assert d["received"] <= d["sent"] and d["received_pps"] <= d["sent_pps"] * (1 + 1e-12)
    for p in d["pairs"]:
        check(p)
    assert d["loss_ratio"] == max(p["loss_ratio"] for p in d["pairs"])  # the worst pair's
