"""``measure: {type: iperf, pairs: [...]}``: several sender -> receiver pairs in one trial."""

from __future__ import annotations

import pytest

from sfclab.spec.measurement import IperfRequest


def test_iperf_pairs_parse_and_refuse_repeats():
    r = IperfRequest.model_validate({"type": "iperf", "pairs": ["vm1:dst", "vm2:dst"]})
    assert [str(p) for p in r.pairs_or_one()] == ["vm1:dst", "vm2:dst"]
    assert [str(p) for p in IperfRequest().pairs_or_one()] == ["src:dst"]
    with pytest.raises(ValueError, match="each pair once"):
        IperfRequest.model_validate({"type": "iperf", "pairs": ["vm1:dst", "vm1:dst"]})
    with pytest.raises(ValueError, match="two different nodes"):
        IperfRequest.model_validate({"type": "iperf", "pairs": ["vm1:vm1"]})
