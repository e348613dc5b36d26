"""Packet measurements of a family (issue 28 item 1): the request's ``ip`` and the IPv6 frame
floor, and paths followed over the plan's IPv6 routes."""

from __future__ import annotations

import pytest

from sfclab.errors import SpecError
from sfclab.plan.build import build_plan
from sfclab.plan.paths import hops
from sfclab.realize.kinds import load_lab_dict
from sfclab.spec.measurement import from_options


def test_ip_6_defaults_to_the_smallest_ipv6_frame() -> None:
    assert from_options({"type": "rate", "rates": ["1k"], "ip": "6"}).size == 84
    assert from_options({"type": "rate", "rates": ["1k"]}).size == 64
    assert from_options({"type": "ndr", "ip": 6, "size": 1518}).size == 1518


@pytest.mark.parametrize("values,option,words", [
    ({"ip": "6", "size": "64"}, "--size", "from 84 bytes with ip 6"),
    ({"ip": "6", "size": "imix"}, "--size", "IMIX has 64-byte frames"),
    ({"ip": "5"}, "--ip", "4 or 6"),
])
def test_a_bad_family_or_size_names_its_option(values: dict, option: str, words: str) -> None:
    with pytest.raises(SpecError) as e:
        from_options({"type": "latency", **values})
    assert e.value.place == option and words in str(e.value), str(e.value)


def test_the_path_to_an_ipv6_address_follows_the_ipv6_routes() -> None:
    plan = build_plan(load_lab_dict({"name": "u", "ip": "dual", "chain": {"length": 4}}, "t"))
    dst6 = plan.address_of("dst", 6)
    assert hops(plan, "src", dst6) == hops(plan, "src", plan.address_of("dst")) == \
        ["src", "r1", "r2", "dst"]
    six = build_plan(load_lab_dict({"name": "u", "ip": 6, "chain": {"length": 3}}, "t"))
    assert hops(six, "src", six.address_of("dst", 6)) == ["src", "r1", "dst"]
