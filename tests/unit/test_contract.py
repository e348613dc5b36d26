"""The data-plane contract (sfclab.realize.contract) against the compiled SFC objects' BTF.

The objects are built from include/sfc.h by native/Makefile (no root needed); a header edited in
a copy and compiled the same way shows that a drift is caught and named.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from ipaddress import IPv4Network, IPv6Network
from pathlib import Path

import pytest

from sfclab.kernel import btf
from sfclab.realize import contract, dataplane

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = ("sfc_forward", "sfc_classify", "sfc_proxy_in", "sfc_proxy_out")


@pytest.fixture(scope="module")
def built() -> Path:
    """native/build with the SFC objects made (make does nothing if they are current)."""
    targets = [f"build/{o}.bpf.o" for o in OBJECTS]
    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), *targets],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return ROOT / "native" / "build"


def compile_with(built: Path, tmp: Path, old: str, new: str, name: str = "sfc.h") -> btf.Btf:
    """sfc_forward.bpf.c compiled against a copy of include/ with ``old`` replaced by ``new``
    in header ``name``, with the Makefile's flags."""
    inc = tmp / "include"
    shutil.copytree(ROOT / "include", inc)
    header = (inc / name).read_text()
    assert header.count(old) == 1, old
    (inc / name).write_text(header.replace(old, new))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    obj = tmp / "sfc_forward.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-mcpu=v3",
                    f"-I/usr/include/{multiarch}", f"-I{inc}", f"-I{built}", "-c", "-o",
                    str(obj), str(ROOT / "bpf" / "sfc_forward.bpf.c")],
                   check=True, capture_output=True, timeout=120)
    return btf.read(str(obj))


@pytest.mark.parametrize("obj", OBJECTS)
def test_every_sfc_object_agrees_with_the_python_layouts(built: Path, obj: str) -> None:
    b = btf.read(str(built / f"{obj}.bpf.o"))
    assert contract.drift(b) == []
    # what the check leans on is really there: the structs, the limits, the maps
    want = set(contract.LAYOUTS) - (set() if obj in contract.NSH_OBJECTS
                                    else set(contract.NSH_STRUCTS))
    assert want <= set(b.structs)
    assert (obj in contract.NSH_OBJECTS) == ("sfc_nsh" in b.maps)
    assert b.enums["sfc_limit"]["SFC_MAX_LABELS"] == 16
    assert b.maps["sfc_classes"].max_entries == b.enums["sfc_limit"]["SFC_MAX_CLASSES"]


def test_the_map_sizes_are_the_limits_in_btf(built: Path) -> None:
    """Every map sized by a limit has the size the Python side bounds its input by."""
    b = btf.read(str(built / "sfc_forward.bpf.o"))
    lim = b.enums["sfc_limit"]
    assert {m: d.max_entries for m, d in b.maps.items()} == {
        "sfc_masks": lim["SFC_MAX_MASKS"], "sfc_classes": lim["SFC_MAX_CLASSES"],
        "sfc_chains": lim["SFC_MAX_CHAINS"], "sfc_paths": lim["SFC_MAX_PATHS"],
        "sfc_labels": lim["SFC_MAX_HOPS"], "sfc_stack_ids": lim["SFC_MAX_STACKS"],
        "sfc_stacks": lim["SFC_MAX_STACKS"], "sfc_next_stack": 1,
        "sfc_flows": lim["SFC_MAX_FLOWS"],
        "sfc_counters": lim["SFC_MAX_NODES"] * contract.NCOUNTERS,
        "sfc_path_counts": lim["SFC_MAX_PATHS"], "sfc_nsh": lim["SFC_MAX_HOPS"],
        "sfc_ports": lim["SFC_MAX_HOPS"], "sfc_last": 1}
    for m, d in b.maps.items():
        key, value = {**contract.MAPS, **contract.NSH_MAPS, **contract.PRIVATE_MAPS}[m]
        assert d.key_size == (b.structs[key].size if key in b.structs else int(key[-2:]) // 8)
        assert d.value_size == (b.structs[value].size if value in b.structs
                                else int(value[-2:]) // 8)


@pytest.mark.parametrize("old, new, says", [
    ("\t__be16 sport;\n\t__be16 dport;\n\t__u8 proto;           /* IPv6: the upper",
     "\t__be32 sport;\n\t__be16 dport;\n\t__u8 proto;           /* IPv6: the upper",
     "struct sfc_class_key.sport"),
    ("\t__u8 pad[2];\n};\n\nstruct sfc_mask", "\t__u8 spare[2];\n};\n\nstruct sfc_mask",
     "struct sfc_class_key: members"),
    ("\t__be32 src[4];        /* IPv4: src[0]", "\t__be32 src[2];        /* IPv4: src[0]",
     "struct sfc_class_key.src"),
    ("\t__u32 ifindex;        /* forward", "\t__be32 ifindex;        /* forward",
     "struct sfc_hop.ifindex: __be32 in C, host order"),
    ("\t__s32 priority;", "\t__u32 priority;", "struct sfc_match.priority"),
    ("\t__u32 depth;\n\t__u32 ifindex;", "\t__u32 ifindex;\n\t__u32 depth;", "struct sfc_path"),
    ("SFC_MAX_LABELS = 16,", "SFC_MAX_LABELS = 12,", "enum sfc_limit"),
    ("SFC_MAX_MASKS = 32,", "SFC_MAX_MASKS = 64,", "enum sfc_limit"),
    ("\tSFC_C_NO_INSTANCE,", "\tSFC_C_NO_INSTANCE,\n\tSFC_C_NEW,", "enum sfc_counter"),
    ("SFC_A_PROXY = 2", "SFC_A_PROXY = 3", "enum sfc_action"),
    ("__type(key, struct sfc_class_key);\n\t__type(value, __u32);\n\t__uint(pinning, "
     "LIBBPF_PIN_BY_NAME);\n} sfc_flows",
     "__type(key, struct sfc_stack);\n\t__type(value, __u32);\n\t__uint(pinning, "
     "LIBBPF_PIN_BY_NAME);\n} sfc_flows", "map sfc_flows"),
], ids=["member-size", "member-name", "address-width", "byte-order", "signedness", "member-order", "limit", "mask-limit",
        "counter", "action", "map-key"])
def test_a_header_edited_in_a_copy_is_caught_as_drift(built: Path, tmp_path: Path, old: str,
                                                      new: str, says: str) -> None:
    drift = contract.drift(compile_with(built, tmp_path, old, new))
    assert any(d.startswith(says) for d in drift), drift


@pytest.mark.parametrize("old, new, says", [
    ("\t__u32 spi;\n\t__u32 si;", "\t__u32 spi;\n\t__u8 si;", "struct sfc_nsh_key"),
    ("\t__u32 last;           /* 1:", "\t__u64 last;           /* 1:",
     "struct sfc_nsh_hop.last"),
    ("__type(value, struct sfc_nsh_hop);", "__type(value, __u64);", "map sfc_nsh"),
], ids=["nsh-key", "nsh-member", "nsh-map"])
def test_an_nsh_header_edited_in_a_copy_is_caught_as_drift(built: Path, tmp_path: Path,
                                                           old: str, new: str,
                                                           says: str) -> None:
    drift = contract.drift(compile_with(built, tmp_path, old, new, "sfc_nsh.h"))
    assert any(d.startswith(says) for d in drift), drift


def test_an_nsh_path_and_its_entries_are_the_bytes_of_rfc_8300() -> None:
    """An NSH path's header as the classifier pushes it (version 0, TTL, length 2, MD type 2;
    SPI, SI 255), flagged NSH; the (node, SPI, SI) -> (label, last) entries."""
    iface = dataplane.Iface(7, bytes.fromhex("020000000001"))
    dmac = bytes.fromhex("020000000002")
    raw = dataplane.encode_path([100, 200], 63, iface, dmac, encap="nsh", spi=0x123)
    # 0x0FC20200: ver 00, O 0, U 0, TTL 111111, length 000010, U 0000, MD 0010, NP 0
    assert raw == struct.pack("<II", 2, 7) + iface.mac + dmac + \
        struct.pack(">16I", 0x0FC20200, 0x000123FF, *[0] * 14) + struct.pack("<I", 1)
    assert dataplane.encode_path([100], 64, iface, dmac)[-4:] == bytes(4)  # MPLS: 0
    assert dataplane.nsh_key(3, 0x123, 254) == struct.pack("<III", 3, 0x123, 254)
    assert dataplane.nsh_value(17, True) == struct.pack("<II", 17, 1)


def test_the_packers_write_the_bytes_the_hand_packed_formats_wrote() -> None:
    """The layouts in the contract give the bytes the earlier hand-written formats gave."""
    iface = dataplane.Iface(7, bytes.fromhex("020000000001"))
    dmac = bytes.fromhex("020000000002")
    assert dataplane.encode_tuple(3, 1, IPv4Network("10.0.0.0/8"), IPv4Network("10.1.2.3/32"),
                                  80, 443, 6) == \
        struct.pack("<II", 3, 1) + struct.pack(">4I4IHHBB2x", 0x0A000000, 0, 0, 0, 0x0A010203,
                                               0, 0, 0, 80, 443, 6, 4)
    assert dataplane.encode_tuple(3, 2, IPv6Network("2001:2::/32"), IPv6Network("::/0"), 0, 0,
                                  17, 6) == \
        struct.pack("<II", 3, 2) + struct.pack(">4I4IHHBB2x", 0x20010002, 0, 0, 0, 0, 0, 0, 0,
                                               0, 0, 17, 6)
    assert dataplane.encode_mask(8, 32, 0, 16, True, True) == struct.pack("<I", 1) + \
        struct.pack(">4I4IHHBB2x", 0xFF000000, 0, 0, 0, 0xFFFFFFFF, 0, 0, 0, 0, 0xFFFF, 0xFF,
                    0xFF)
    assert dataplane.encode_mask(48, 0, 0, 0, False, False)[4:12] == \
        struct.pack(">II", 0xFFFFFFFF, 0xFFFF0000)
    raw = dataplane.encode_path([100, 200], 64, iface, dmac)
    lses = [dataplane.lse(100, 64, False), dataplane.lse(200, 64, True)] + [0] * 14
    assert raw == struct.pack("<II", 2, 7) + iface.mac + dmac + struct.pack(">16I", *lses) + \
        struct.pack("<I", 0)
    assert dataplane.decode_path(raw) == (iface, dmac)
    assert dataplane.encode_hop(5, "proxy", iface, dmac) == \
        struct.pack("<III", 5, 2, 7) + iface.mac + dmac
    assert dataplane.encode_hop(5, "forward", None, None) == struct.pack("<III", 5, 1, 0) + \
        bytes(12)
    chain = dataplane.encode_chain(3, 2, [4, 5, 6])
    assert chain == struct.pack("<II1024I", 3, 2, 4, 5, 6, *[0] * 1021)
    assert dataplane.decode_chain(chain) == (3, 2, [4, 5, 6])
    assert dataplane.match_chain(struct.pack("<iI", -5, 9)) == 9
