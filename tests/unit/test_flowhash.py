"""The classifier's flow hash in Python (``chain trace`` aims probes with it) keeps the data
plane's properties: a symmetric chain's two directions of one flow hash alike, and a one-way
chain's hash depends on every field.  (That it equals ``sfc_flow_hash`` is checked against the
live data plane by tests/integration/test_chain_trace.py, whose probes must land on their
paths.)"""

from __future__ import annotations

from ipaddress import IPv4Address as A

from sfclab.plan.flowhash import flow_hash, mix, slot_of


def test_both_directions_of_a_symmetric_flow_hash_alike() -> None:
    c, s = A("198.18.0.2"), A("198.18.3.2")
    for sport in (40000, 40001, 51234):
        fwd = flow_hash(c, s, sport, 80, 6, 1)
        rev = flow_hash(s, c, 80, sport, 6, 2)
        assert fwd == rev


def test_a_one_way_hash_depends_on_every_field() -> None:
    base = (A("198.18.0.2"), A("198.18.3.2"), 40000, 7000, 17)
    h = flow_hash(*base, 0)
    for i, other in enumerate((A("198.18.0.3"), A("198.18.3.3"), 40001, 7001, 6)):
        x = list(base)
        x[i] = other
        assert flow_hash(*x, 0) != h, i  # type: ignore[arg-type]
    assert 0 <= h < 1 << 32 and mix(0, 0) == 0xE6546B64
    assert slot_of(256, h) == h % 256 and slot_of(0, h) == 0
