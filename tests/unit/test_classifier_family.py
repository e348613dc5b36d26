"""Classifiers of a family (issue 28 item 2): ``family: ipv4 | ipv6 | any``, IPv6 prefixes and
next header, in the spec, the planner's entries, the compact rows and the data plane's keys."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.plan.classifier_rows import mask_of, masks_of, rows_of
from sfclab.plan.sfc import entries_of, mask_key
from sfclab.realize import dataplane
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.spec import classifier_file
from sfclab.spec.classifier_file import Rule
from sfclab.spec.sfc import ClassifierSpec

from .test_sfc_plan import lab


def spec(**kw: object) -> ClassifierSpec:
    return ClassifierSpec.model_validate({"ingress": "src", **kw})


def test_the_family_defaults_to_that_of_the_prefixes_else_ipv4() -> None:
    assert spec().family == "ipv4"
    assert spec(src="198.18.0.0/16").family == "ipv4"
    assert spec(dst="2001:2::/48").family == "ipv6"
    assert spec(family="any", proto="udp").family == "any"


def test_an_ipv6_classifier_makes_128_bit_rows_of_family_6() -> None:
    r = Rule.of(spec(proto="udp", src="2001:2:0:1::/64", dport=7000))
    (row,) = rows_of(r)
    assert row[1] == 0x2001_0002_0000_0001 << 64 and row[2] == 64
    assert (row[3], row[4]) == (0, 0) and row[9] == 17 and row[11] == 6
    assert mask_of(row) == (64, 0, 0, 16, True, True)
    assert masks_of(r) == {mask_of(row)}
    (e,) = entries_of(r.spec())
    assert (e["src"], e["dst"], e.get("family")) == ("2001:2:0:1::/64", "::/0", 6)
    assert "family" not in entries_of(spec(proto="udp"))[0]  # IPv4's as before families
    assert mask_key(e) == mask_of(row)


def test_family_any_matches_either_and_masks_no_family() -> None:
    r = Rule.of(spec(family="any", proto="tcp", dport=443))
    (row,) = rows_of(r)
    assert row[11] == 0 and mask_of(row) == (0, 0, 0, 16, True, False)
    # the same shape of ipv4 is another mask: an entry of one family is never of the other
    assert mask_of(rows_of(Rule.of(spec(proto="tcp", dport=443)))[0]) == \
        (0, 0, 0, 16, True, True)


def test_icmpv6_is_next_header_58_of_ipv6_only() -> None:
    assert rows_of(Rule.of(spec(family="ipv6", proto="icmpv6")))[0][9] == 58
    with pytest.raises(ValueError, match="proto icmpv6 matches ipv6 packets only"):
        spec(proto="icmpv6")
    with pytest.raises(ValueError, match="proto icmp matches ipv4 packets only"):
        spec(family="ipv6", proto="icmp")


@pytest.mark.parametrize("kw,words", [
    ({"family": "ipv6", "src": "198.18.0.0/16"}, "src 198.18.0.0/16 is an IPv4 prefix"),
    ({"family": "ipv4", "dst": "2001:2::/48"}, "dst 2001:2::/48 is an IPv6 prefix"),
    ({"family": "any", "src": "198.18.0.0/16"}, "no src prefix with family any"),
    ({"src": "198.18.0.0/16", "dst": "2001:2::/48"}, "src 198.18.0.0/16 is an IPv4 prefix"),
])
def test_a_prefix_of_the_other_family_is_refused(kw: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        spec(**kw)


def test_a_bad_family_exits_2_with_the_place(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    chains = {"c": {"classifiers": [{"ingress": "src", "family": "ipv5"}], "functions": ["fw"],
                    "egress": "dst"}}
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(lab(chains), "t"))
    assert e.value.place == "chains.c.classifiers[0].family", str(e.value)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(lab(chains)))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "chains.c.classifiers[0].family" in err and "'ipv4', 'ipv6' or 'any'" in err, err


def test_a_bad_family_in_a_classifier_file_is_located(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("- {ingress: src, proto: udp}\n- {ingress: src, family: ip6}\n")
    with pytest.raises(SpecError) as e:
        classifier_file.read(str(path))
    assert (e.value.place, e.value.line, e.value.exit_status) == ("[1].family", 2, 2)


def test_ipv6_classifiers_in_a_file_take_the_models_way() -> None:
    rules = classifier_file.parse(b"- {ingress: src, proto: udp, dst: '2001:2:0:1::/64'}\n",
                                  "f.yaml")
    assert rules[0].family == "ipv6" and rules[0].dst == (0x2001_0002_0000_0001 << 64, 64)


def test_the_key_of_a_row_holds_the_address_in_the_family_s_words() -> None:
    six = rows_of(Rule.of(spec(proto="udp", src="2001:2:0:1::/64")))[0]
    four = rows_of(Rule.of(spec(proto="udp", src="198.18.1.0/24")))[0]
    tail6 = dataplane._key_tail(six)
    tail4 = dataplane._key_tail(four)
    assert tail6[:16] == bytes.fromhex("20010002000000010000000000000000")
    assert tail4[:16] == bytes.fromhex("c6120100") + bytes(12)
    assert struct.unpack(">HHBB", tail6[32:38]) == (0, 0, 17, 6)
    assert struct.unpack(">HHBB", tail4[32:38]) == (0, 0, 17, 4)


def test_the_mask_count_tells_a_family_less_classifier_from_an_ipv4_one() -> None:
    """Two classifiers of one shape but different families need two masks: the count made
    once per shape must not take the second for the first."""
    from sfclab.live.chains.classify_maps import check_counts

    rules = [Rule.of(spec(proto="udp", dport=53)), Rule.of(spec(family="any", proto="udp",
                                                                 dport=53))]
    total, masks = check_counts(rules, {"src": object()}, {"src": []},  # type: ignore[dict-item]
                                set(), "f.yaml")
    assert total == 2 and masks == {(0, 0, 0, 16, True, True), (0, 0, 0, 16, True, False)}
