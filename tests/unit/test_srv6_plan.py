"""SID planning for SRv6 chains (sfclab.plan.srv6) and its agreement with include/sfc_srv6.h."""

from __future__ import annotations

import shutil
import struct
import subprocess
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path

import pytest

from sfclab.kernel import btf
from sfclab.plan import srv6
from sfclab.realize import contract

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = ("sfc_forward", "sfc_classify", "sfc_proxy_out")


def test_a_sid_is_the_owners_locator_and_the_label() -> None:
    assert srv6.locator(3) == IPv6Network("2001:2:ff:3::/64")
    assert srv6.sid(3, 17) == IPv6Address("2001:2:ff:3::11")
    assert srv6.label_of(IPv6Address("2001:2:ff:3::11")) == (3, 17)
    with pytest.raises(ValueError):
        srv6.label_of(IPv6Address("2001:2::1"))
    with pytest.raises(ValueError):
        srv6.locator(0)


def test_locators_stay_out_of_the_labs_default_pool() -> None:
    pool = IPv6Network("2001:2::/48")
    assert not srv6.LOCATORS.overlaps(pool)
    assert all(not srv6.locator(n).overlaps(pool) for n in (1, 255, 256, 65535))


def test_the_segment_list_is_the_stack_last_first() -> None:
    owner = {16: 1, 17: 2, 18: 2, 19: 3}
    segs = srv6.segment_list([16, 17, 18, 19], owner)
    assert segs == [IPv6Address("2001:2:ff:3::13"), IPv6Address("2001:2:ff:2::12"),
                    IPv6Address("2001:2:ff:2::11"), IPv6Address("2001:2:ff:1::10")]
    assert srv6.overhead(4) == 40 + 8 + 64


@pytest.fixture(scope="module")
def built() -> Path:
    targets = [f"build/{o}.bpf.o" for o in OBJECTS]
    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), *targets],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return ROOT / "native" / "build"


@pytest.mark.parametrize("obj", OBJECTS)
def test_the_srv6_layout_agrees_with_the_c_header(built: Path, obj: str) -> None:
    b = btf.read(str(built / f"{obj}.bpf.o"))
    assert "sfc_srv6" in b.enums
    assert contract.srv6_drift(b) == []


def test_a_drifted_locator_is_caught(built: Path, tmp_path: Path) -> None:
    """sfc_forward compiled against a copy of include/ whose locator differs: named."""
    inc = tmp_path / "include"
    shutil.copytree(ROOT / "include", inc)
    header = (inc / "sfc_srv6.h").read_text()
    old = "SFC_SRV6_LOC_W1 = 0x00ff0000"
    assert header.count(old) == 1
    (inc / "sfc_srv6.h").write_text(header.replace(old, "SFC_SRV6_LOC_W1 = 0x00fe0000"))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    obj = tmp_path / "drift.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-mcpu=v3",
                    f"-I/usr/include/{multiarch}", f"-I{inc}", f"-I{built}", "-c", "-o",
                    str(obj), str(ROOT / "bpf" / "sfc_forward.bpf.c")],
                   check=True, capture_output=True, timeout=120)
    drift = contract.srv6_drift(btf.read(str(obj)))
    assert len(drift) == 1 and "enum sfc_srv6" in drift[0]


def test_an_srv6_paths_entries_carry_the_srv6_mark() -> None:
    """The classifier tells an SRv6 path by its entries' traffic class (SFC_LSE_SRV6); an MPLS
    path's entries stay as they were."""
    from sfclab.realize.dataplane import Iface, encode_path, lse

    iface, dmac = Iface(7, b"\x02" * 6), b"\x04" * 6
    mpls = encode_path([100, 200], 64, iface, dmac)
    six = encode_path([100, 200], 64, iface, dmac, encap="srv6")
    # struct sfc_path: depth, ifindex, smac, dmac, 16 entries, encap (SFC_ENCAP_SRV6 = 2)
    assert six[:20] == mpls[:20]
    assert struct.unpack(">16I", six[20:84])[:2] == (lse(100, 64, False) | 0x200,
                                                      lse(200, 64, True) | 0x200)
    assert struct.unpack(">16I", mpls[20:84])[:2] == (lse(100, 64, False), lse(200, 64, True))
    assert struct.unpack("<I", six[84:])[0] == 2 and struct.unpack("<I", mpls[84:])[0] == 0


def test_a_hosts_share_holds_the_owners_of_the_sids_of_srv6_paths_through_it() -> None:
    """src r1 | f1 | f2 dst on three hosts: each share gets every other host's label of the
    path through it -- src's host needs them all (its classifier writes the whole segment
    list), f1's at least f2's (its proxy puts back what follows it); an MPLS chain's share
    needs none of another host's labels."""
    from sfclab.plan.sfc_hosts import foreign_sid_labels
    from sfclab.realize.kinds import load_lab_dict
    from sfclab.realize.lifecycle import plan_for

    names = ["src", "r1", "f1", "f2", "dst"]
    d = {"name": "u", "nodes": {n: {"kind": "firewall", "rules": []} if n[0] == "f" else
                                {"kind": "router" if n == "r1" else "host"} for n in names},
         "links": [{"endpoints": [a, b]} for a, b in zip(names, names[1:])],
         "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                          "functions": ["f1", "f2"], "egress": "dst", "encap": "srv6"}}}
    sp = plan_for(load_lab_dict(d, "t")).steering
    owner = {h.label: h.node for h in sp.hops}
    stack = sp.directions[0].paths[0].stack
    got = {frozenset(n): sorted(owner[h.label] for h in foreign_sid_labels(sp, set(n)))
           for n in ({"src", "r1"}, {"f1"}, {"f2", "dst"})}
    assert got == {frozenset({"src", "r1"}): ["f1", "f1", "f2", "f2"],
                   frozenset({"f1"}): ["f2", "f2", "r1"],
                   frozenset({"f2", "dst"}): ["f1", "f1", "r1"]}
    assert len(stack) == 5
    d["chains"]["c"]["encap"] = "mpls"
    assert foreign_sid_labels(plan_for(load_lab_dict(d, "t")).steering, {"src"}) == []
