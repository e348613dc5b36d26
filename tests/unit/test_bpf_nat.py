"""The bpf-nat without root: its lab-file keys and their limits, the plan that puts its program
in place of the forwarder and the proxy, the bytes of its maps, chain inspect's text, and its
layouts against the compiled nat.bpf.o's BTF (a header edited in a copy is caught)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.cli.chain_functions import functions_text
from sfclab.errors import SpecError
from sfclab.functions import bpf_nat_maps as M
from sfclab.functions.nat import PortForward
from sfclab.kernel import btf
from sfclab.realize import contract
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

from .test_sfc_plan import chain, lab

ROOT = Path(__file__).resolve().parents[2]


def with_nat(nat: dict, chains: dict | None = None) -> dict:
    d = lab(chain() if chains is None else chains)
    d["nodes"]["fw"] = {"kind": "bpf-nat", "outside": "dst", **nat}
    return d


def forwards(n: int) -> list[dict]:
    return [{"proto": "udp", "port": 1000 + i, "to": "10.0.0.1"} for i in range(n)]


def forwards6(n: int) -> list[dict]:
    return [{"proto": "udp", "port": 1000 + i, "to": f"[2001:2::{i + 1:x}]:53"} for i in range(n)]


def test_its_program_takes_the_forwarder_and_proxy_place_on_every_interface() -> None:
    sp = plan_for(load_lab_dict(with_nat({}), "t")).steering
    assert sp.attach["fw"] == [("sfc_nat", "eth0", "xdp"), ("sfc_nat", "eth1", "xdp")]
    assert all(prog == "sfc_forward" for prog, _, _ in sp.attach["r1"])


@pytest.mark.parametrize("nat, place, says", [
    ({"forward": forwards(33)}, "nodes.fw.forward",
     "33 port forwards; a bpf-nat holds at most 32"),
    ({"forward": [{"proto": "tcp", "port": 65536, "to": "10.0.0.1"}]},
     "nodes.fw.forward[0].port", "65535"),
    ({"forward": [{"proto": "tcp", "port": 80, "to": "10.0.0.1:70000"}]},
     "nodes.fw.forward[0].to", "ports from 0 to 65535"),
    ({"forward": [{"proto": "icmp", "port": 80, "to": "10.0.0.1"}]},
     "nodes.fw.forward[0].proto", "tcp"),
    ({"masquerade": True}, "nodes.fw", "masquerade"),
    ({"forward": forwards6(33)}, "nodes.fw.forward",
     "33 port forwards; a bpf-nat holds at most 32"),
    ({"forward": [{"proto": "tcp", "port": 80, "to": "[2001:2::1]:70000"}]},
     "nodes.fw.forward[0].to", "ports from 0 to 65535"),
    ({"forward": [{"proto": "tcp", "port": 80, "to": "[2001:2::1:80"}]},
     "nodes.fw.forward[0].to", "[IPV6-ADDRESS]:PORT"),
], ids=["too-many-forwards", "port-beyond-limit", "target-port-beyond-limit", "proto",
        "unknown-key", "too-many-ipv6-forwards", "ipv6-target-port-beyond-limit",
        "ipv6-target-unclosed"])
def test_what_the_program_cannot_hold_is_refused_at_its_place(nat: dict, place: str,
                                                              says: str) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(with_nat(nat), "t"))
    assert place in str(e.value) and says in str(e.value), str(e.value)


def test_thirty_two_forwards_fit() -> None:
    plan_for(load_lab_dict(with_nat({"forward": forwards(32)}), "t"))
    d = with_nat({"forward": forwards(16) + forwards6(16)})
    d["ip"] = "dual"
    plan_for(load_lab_dict(d, "t"))


def test_a_bpf_nat_on_no_chain_is_refused() -> None:
    d = with_nat({})
    d["nodes"]["nat2"] = {"kind": "bpf-nat", "outside": "dst"}
    d["links"].append({"endpoints": ["nat2", "dst"]})
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        plan_for(load_lab_dict(d, "t"))
    assert "nodes.nat2" in str(e.value)


def test_its_maps_as_bytes() -> None:
    f = PortForward.model_validate({"proto": "tcp", "port": 8080, "to": "10.1.2.3:80"})
    raw = M.forward_bytes(f)
    assert len(raw) == 24
    assert struct.unpack(">4I", raw[:16]) == (0x0A010203, 0, 0, 0)   # network order, IPv4 first
    assert struct.unpack("<HH", raw[16:20]) == (8080, 80) and (raw[20], raw[21]) == (6, 4)
    same = M.forward_bytes(PortForward.model_validate({"proto": "udp", "port": 53,
                                                       "to": "10.1.2.3"}))
    assert struct.unpack("<HH", same[16:20]) == (53, 0) and same[20] == 17  # 0: the same port
    six = M.forward_bytes(PortForward.model_validate({"proto": "tcp", "port": 8443,
                                                      "to": "[2001:2:0:3::2]:443"}))
    assert struct.unpack(">4I", six[:16]) == (0x20010002, 3, 0, 2)
    assert struct.unpack("<HH", six[16:20]) == (8443, 443) and six[21] == 6
    assert M.config_bytes(7, IPv4Address("10.0.0.1"), None, 2) == \
        struct.pack("<I", 7) + struct.pack(">I", 0x0A000001) + struct.pack("<I", 2) + bytes(16)
    dual = M.config_bytes(7, IPv4Address("10.0.0.1"), IPv6Address("2001:2::1"), 0)
    assert len(dual) == 28 and struct.unpack(">4I", dual[12:]) == (0x20010002, 0, 0, 1)
    assert M.config_bytes(7, None, IPv6Address("2001:2::1"), 0)[4:8] == bytes(4)  # ip: 6


def flow(node: int, src: str, dst: str, sport: int, dport: int, proto: int) -> bytes:
    s, d = ip_address(src), ip_address(dst)
    return M.pack("sfc_nat_flow", node, M.words(s), M.words(d), sport, dport, proto,
                  s.version)


def xlate(addr: str, port: int, side: int, slot: int) -> bytes:
    return M.pack("sfc_nat_xlate", M.words(ip_address(addr)), port, side, slot)


def test_live_translations_are_read_from_the_connection_map() -> None:
    entries = [  # node 3: a masquerade (both halves), a forward (both halves); node 4: one
        (flow(3, "10.0.1.2", "10.0.9.2", 4000, 53, 17), xlate("10.0.5.1", 4000, 1, M.MASQUERADE)),
        (flow(3, "10.0.9.2", "10.0.5.1", 53, 4000, 17), xlate("10.0.1.2", 4000, 2, M.MASQUERADE)),
        (flow(3, "10.0.9.2", "10.0.5.1", 5000, 8080, 6), xlate("10.0.1.2", 80, 2, M.FORWARD)),
        (flow(3, "10.0.1.2", "10.0.9.2", 80, 5000, 6), xlate("10.0.5.1", 8080, 1, M.FORWARD)),
        (flow(4, "10.0.1.2", "10.0.9.2", 4000, 53, 17), xlate("10.0.5.1", 4000, 1, M.MASQUERADE)),
    ]
    got = M.translations(3, entries)
    assert got == [{"proto": "tcp", "inside": "10.0.1.2:80", "outside": "10.0.5.1:8080",
                    "peer": "10.0.9.2:5000", "rule": "forward 0"},
                   {"proto": "udp", "inside": "10.0.1.2:4000", "outside": "10.0.5.1:4000",
                    "peer": "10.0.9.2:53", "rule": "masquerade"}]
    assert M.count_sum(struct.pack("<6Q", 1, 100, 1, 2, 200, 0)) == \
        {"packets": 3, "bytes": 300, "new": 1}


def test_ipv6_translations_are_read_as_the_forwards_write_them() -> None:
    """NAT66: an ICMPv6 echo masqueraded (its identifier as the source port) and a TCP forward
    to an IPv6 target, each shown with its addresses in brackets, beside an IPv4 one."""
    entries = [
        (flow(3, "2001:2::1", "2001:2:0:3::2", 77, 0, 58),
         xlate("2001:2:0:2::2", 77, 1, M.MASQUERADE)),
        (flow(3, "2001:2::1", "2001:2:0:3::2", 80, 5000, 6),
         xlate("2001:2:0:2::2", 8080, 1, M.FORWARD + 1)),
        (flow(3, "10.0.1.2", "10.0.9.2", 4000, 53, 17), xlate("10.0.5.1", 4000, 1, M.MASQUERADE)),
    ]
    assert M.translations(3, entries) == [
        {"proto": "tcp", "inside": "[2001:2::1]:80", "outside": "[2001:2:0:2::2]:8080",
         "peer": "[2001:2:0:3::2]:5000", "rule": "forward 1"},
        {"proto": "icmpv6", "inside": "[2001:2::1]:77", "outside": "[2001:2:0:2::2]:77",
         "peer": "[2001:2:0:3::2]:0", "rule": "masquerade"},
        {"proto": "udp", "inside": "10.0.1.2:4000", "outside": "10.0.5.1:4000",
         "peer": "10.0.9.2:53", "rule": "masquerade"}]


def test_chain_inspect_text_of_a_bpf_nat() -> None:
    f = {"program": "sfc_nat (XDP, bpf/nat.bpf.c)", "outside": "r1", "interface": "eth1",
         "masquerade": {"packets": 12, "bytes": 900, "new": 3},
         "forwards": [{"packets": 4, "bytes": 300, "new": 1,
                       "forward": {"proto": "tcp", "port": 8080, "to": "10.0.0.1:80"}}],
         "not_translated": {"packets": 2, "bytes": 80, "new": 0},
         "no_port": {"packets": 0, "bytes": 0, "new": 0}, "live_translations": 4}
    assert functions_text({"functions": {"nat": f}}) == [
        "  function nat: masquerade toward r1 (eth1), live translations: 4",
        "    masquerade: 12 packets, translations made: 3",
        "    forward 0: 4 packets, translations made: 1  proto tcp port 8080 to 10.0.0.1:80",
        "    not translated: 2 packets"]
    # in a lab with IPv6: NAT66's masquerade apart, as the kernel twin's ip6 table counts it
    f["masquerade6"] = {"packets": 7, "bytes": 700, "new": 2}
    f["forwards"].append({"packets": 3, "bytes": 300, "new": 1, "forward": {
        "proto": "udp", "port": 53, "to": "[2001:2::5]:53"}})
    assert functions_text({"functions": {"nat": f}})[2:5] == [
        "    masquerade6: 7 packets, translations made: 2",
        "    forward 0: 4 packets, translations made: 1  proto tcp port 8080 to 10.0.0.1:80",
        "    forward 1: 3 packets, translations made: 1  proto udp port 53 to [2001:2::5]:53"]


# ------------------------------------------------------------------ the layouts against BTF
@pytest.fixture(scope="module")
def built() -> Path:
    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "build/nat.bpf.o"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return ROOT / "native" / "build"


def test_nat_object_agrees_with_the_python_layouts(built: Path) -> None:
    b = btf.read(str(built / "nat.bpf.o"))
    assert contract.nat_drift(b) == [] and contract.drift(b) == []
    assert b.maps["sfc_nat_forwards"].max_entries == 256 * M.MAX_FORWARDS
    assert b.maps["sfc_nat_counts"].max_entries == 256 * M.SLOTS
    assert b.maps["sfc_nat_conns"].max_entries == M.MAX_CONNS
    assert M.SLOTS == M.FORWARD + M.MAX_FORWARDS + 1 and M.MASQUERADE6 == M.SLOTS - 1


@pytest.mark.parametrize("old, new, says", [
    ("SFC_NAT_MAX_FORWARDS = 32,", "SFC_NAT_MAX_FORWARDS = 16,", "enum sfc_nat_limit"),
    ("SFC_NAT_PORT_FIRST = 32768,", "SFC_NAT_PORT_FIRST = 1024,", "enum sfc_nat_limit"),
    ("\t__u16 port;             /* host", "\t__be16 port;             /* host",
     "struct sfc_nat_forward.port"),
    ("\t__u8 side;", "\t__u16 side;", "struct sfc_nat_xlate"),
], ids=["limit", "port-range", "byte-order", "member-size"])
def test_a_nat_header_edited_in_a_copy_is_caught(built: Path, tmp_path: Path, old: str,
                                                 new: str, says: str) -> None:
    inc = tmp_path / "include"
    shutil.copytree(ROOT / "include", inc)
    header = (inc / "sfc_nat.h").read_text()
    assert header.count(old) == 1, old
    (inc / "sfc_nat.h").write_text(header.replace(old, new))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    obj = tmp_path / "nat.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-mcpu=v3",
                    f"-I/usr/include/{multiarch}", f"-I{inc}", f"-I{built}", "-c", "-o",
                    str(obj), str(ROOT / "bpf" / "nat.bpf.c")],
                   check=True, capture_output=True, timeout=120)
    drift = contract.nat_drift(btf.read(str(obj)))
    assert any(d.startswith(says) for d in drift), drift


@pytest.mark.parametrize("nat, extra_node, place", [
    ({"forward": forwards(33)}, False, "nodes.fw.forward"),
    ({}, True, "nodes.nat2"),
    ({"forward": forwards6(33)}, False, "nodes.fw.forward: 33 port forwards"),
    ({"forward": forwards6(1)}, False, "nodes.fw.forward.0.to: an IPv6 address in a lab without "
     "IPv6"),
], ids=["too-many-forwards", "on-no-chain", "too-many-ipv6-forwards", "ipv6-forward-in-ipv4-lab"])
def test_the_cli_says_it_in_one_line_with_exit_2(nat: dict, extra_node: bool, place: str,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    d = with_nat(nat)
    if extra_node:
        d["nodes"]["nat2"] = {"kind": "bpf-nat", "outside": "dst"}
        d["links"].append({"endpoints": ["nat2", "dst"]})
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and place in err and err.count("\n") == 1, err


def test_chain_add_refuses_it_at_its_place() -> None:
    """``chain add`` does not attach an eBPF function's own program (the lab's data plane is
    loaded at up): the request is refused before any lab is looked at."""
    from sfclab.live import request

    body = {"name": "natted", "attach": "r1", "egress": "dst",
            "classifiers": [{"ingress": "src", "proto": "udp"}],
            "functions": [{"name": "nat", "kind": "bpf-nat", "outside": "r1"}]}
    with pytest.raises(SpecError) as e:
        request.chain_from_dict("no-such-lab", body)
    assert "functions[0].kind" in str(e.value), str(e.value)
    assert "only a lab file's chain attaches" in str(e.value)
