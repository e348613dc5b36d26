"""NDR/PDR by MLRsearch (the PyPI package) on the fake generator: the rates it finds, and a
sender that cannot reach the chain's limit reported as a lower bound, never as the chain's."""

from __future__ import annotations

from sfclab.traffic.fake import FakeGenerator
from sfclab.traffic.mlr import mlr_search

NDR, PDR = 300_000, 350_000


def test_ndr_and_pdr_within_the_precision_below_the_truth() -> None:
    gen = FakeGenerator(NDR, PDR, line_rate_pps=1_000_000)
    m = mlr_search(gen, 64, duration=1.0, loss_goals=[0.0, 0.005], precision=0.01, ramp_s=None)
    assert NDR * 0.99 <= m.extra["ndr_pps"] <= NDR
    assert PDR * 0.99 <= m.extra["pdr_pps"] <= PDR
    assert m.metrics["ndr_pps"] == m.extra["ndr_pps"] and not m.extra["generator_limited"]
    assert m.params["method"] == "mlr" and m.metrics["trials"] == len(m.extra["trials"]) > 2


def test_a_generator_below_the_chain_gives_a_lower_bound() -> None:
    gen = FakeGenerator(NDR, PDR, line_rate_pps=1_000_000, ceiling_pps=200_000)
    m = mlr_search(gen, 64, duration=1.0, loss_goals=[0.0, 0.005], precision=0.01, ramp_s=None)
    assert m.extra["ndr_pps"] is None and m.extra["generator_limited"]
    assert 190_000 <= m.metrics["ndr_lower_bound_pps"] <= 200_000
    assert "ndr_pps" not in m.metrics


def test_the_ramp_and_the_goals_reach_the_trials() -> None:
    gen = FakeGenerator(NDR, PDR, line_rate_pps=1_000_000)
    m = mlr_search(gen, 64, duration=1.0, loss_goals=[0.0], precision=0.02, ramp_s=0.25,
                   max_rate_pps=600_000)
    assert set(r for r in gen.ramps if r is not None) == {0.25}
    assert m.extra["ndr_pps"] >= NDR * 0.98 and "pdr_pps" not in m.extra
