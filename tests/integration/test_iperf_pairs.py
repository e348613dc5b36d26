"""Several iperf3 sender -> receiver pairs in one trial (``measure: {type: iperf, pairs: [...]}``),
each pair's throughput its own metric: two pairs of namespaces, a1 -> b1 and a2 -> b2, in a
fresh lab that is always removed (needs root and iperf3)."""

from __future__ import annotations

import shutil

import pytest

from sfclab.spec.measurement import IperfRequest
from sfclab.traffic.measure import iperf

pytestmark = [pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed"),
              pytest.mark.serial]  # times or counts what the machine's load changes


def test_two_pairs_run_together_and_are_reported_apart(running_lab, lab_name):
    running_lab({"nodes": {n: {"kind": "host"} for n in ("a1", "b1", "a2", "b2")},
                 "links": [{"endpoints": ["a1", "b1"]}, {"endpoints": ["a2", "b2"]}]})
    r = IperfRequest.model_validate({"type": "iperf", "pairs": ["a1:b1", "a2:b2"], "flows": 2,
                                     "duration": 2})
    m = iperf(lab_name, r).to_dict()
    met = m["metrics"]
    one, two = met["pair.a1:b1.throughput_bps"], met["pair.a2:b2.throughput_bps"]
    assert one > 0 and two > 0
    assert one + two == pytest.approx(met["throughput_bps"])
    assert met["flows"] == 4
    assert [f["pair"] for f in m["per_flow"]] == ["a1:b1", "a1:b1", "a2:b2", "a2:b2"]
    # the four clients ran in one trial: started within a second of each other
    starts = [c["start"]["timestamp"]["timesecs"] for c in m["raw"]["clients"]]
    assert max(starts) - min(starts) <= 1
    # each pair's flows went to its own receiver
    hosts = [c["start"]["connecting_to"]["host"] for c in m["raw"]["clients"]]
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3]
