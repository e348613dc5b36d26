"""The bpf-firewall without root: its lab-file keys and their limits, the plan that puts its
program in place of the forwarder and the proxy, the bytes of its rules, and its layouts
against the compiled fw.bpf.o's BTF (a header edited in a copy is caught)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from ipaddress import IPv6Address
from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.functions import bpf_firewall_maps as M
from sfclab.functions.rules import Rule
from sfclab.kernel import btf
from sfclab.realize import contract
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

from .test_sfc_plan import chain, lab

ROOT = Path(__file__).resolve().parents[2]


#: 65 IPv6 rules, one too many: the limit is the rule map's, for both families together
RULES6_65 = [{"action": "drop", "proto": "udp", "dst": f"2001:2:0:{i:x}::/64"} for i in range(65)]


def with_fw(fw: dict, chains: dict | None = None) -> dict:
    d = lab(chain() if chains is None else chains)
    d["nodes"]["fw"] = {"kind": "bpf-firewall", **fw}
    return d


def test_its_program_takes_the_forwarder_and_proxy_place_on_every_interface() -> None:
    p = plan_for(load_lab_dict(with_fw({"rules": [{"action": "drop", "proto": "udp"}]}), "t"))
    sp = p.steering
    assert sp.attach["fw"] == [("sfc_fw", "eth0", "xdp"), ("sfc_fw", "eth1", "xdp")]
    assert all(prog == "sfc_forward" for prog, _, _ in sp.attach["r1"])
    owners = {h.label: (h.node, h.action) for h in sp.hops}
    path = sp.directions[0].paths[0]
    assert [owners[x] for x in path.stack] == [("r1", "forward"), ("fw", "proxy"),
                                              ("fw", "forward")]


@pytest.mark.parametrize("fw, place, says", [
    ({"rules": [{"action": "drop", "proto": "udp", "dport": i} for i in range(65)]},
     "nodes.fw.rules", "65 rules; a bpf-firewall holds at most 64"),
    ({"hooks": ["forward"]}, "nodes.fw", "'hooks' is a key of kind firewall"),
    ({"generate": {"count": 3}}, "nodes.fw", "'generate' is a key of kind firewall"),
    ({"rules": [{"action": "drop", "proto": "udp", "dport": "100-65536"}]},
     "nodes.fw.rules[0].dport", "ports from 0 to 65535"),
    ({"rules": [{"action": "drop", "proto": "udp", "ports": 80}]},
     "nodes.fw.rules[0]", "ports"),
    ({"statefull": True}, "nodes.fw", "statefull"),
    ({"rules": RULES6_65}, "nodes.fw.rules", "65 rules; a bpf-firewall holds at most 64"),
    ({"rules": [{"action": "drop", "dst": "2001:2::/129"}]}, "nodes.fw.rules[0].dst",
     "expected an IPv6 prefix"),
    ({"rules": [{"action": "drop", "proto": "tcp", "src": "2001:2::/48", "dport": "1-65536"}]},
     "nodes.fw.rules[0].dport", "ports from 0 to 65535"),
    ({"rules": [{"action": "drop", "proto": "icmp", "dst": "2001:2::/48"}]}, "nodes.fw.rules[0]",
     "proto icmp with IPv6 prefixes: expected icmpv6"),
    ({"rules": [{"action": "drop", "src": "10.0.0.0/8", "dst": "2001:2::/48"}]},
     "nodes.fw.rules[0]", "src and dst of one family"),
], ids=["too-many-rules", "hooks", "generate", "port-beyond-limit", "unknown-rule-key",
        "unknown-key", "too-many-ipv6-rules", "ipv6-prefix-beyond-128", "ipv6-port-beyond-limit",
        "icmp-with-ipv6-prefix", "families-mixed"])
def test_what_the_program_cannot_hold_is_refused_at_its_place(fw: dict, place: str,
                                                              says: str) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(with_fw(fw), "t"))
    assert place in str(e.value) and says in str(e.value), str(e.value)


def test_sixty_four_rules_fit() -> None:
    rules = [{"action": "drop", "proto": "udp", "dport": i} for i in range(64)]
    plan_for(load_lab_dict(with_fw({"rules": rules}), "t"))


def test_sixty_four_rules_of_both_families_fit_in_a_dual_stack_lab() -> None:
    rules = RULES6_65[:32] + [{"action": "accept", "proto": "icmpv6"}] + \
        [{"action": "drop", "proto": "tcp", "src": f"10.{i}.0.0/16"} for i in range(31)]
    d = with_fw({"rules": rules})
    d["ip"] = "dual"
    fw = load_lab_dict(d, "t").nodes["fw"].params
    assert len(fw.rules) == 64 and {r.family for r in fw.rules} == {4, 6, None}
    assert {M.rule_bytes(r)[74] for r in fw.rules} == {4, 6, 0}


def test_a_bpf_firewall_on_no_chain_is_refused() -> None:
    d = with_fw({})
    d["nodes"]["fw2"] = {"kind": "bpf-firewall"}
    d["links"].append({"endpoints": ["fw2", "dst"]})
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        plan_for(load_lab_dict(d, "t"))
    assert "nodes.fw2" in str(e.value)
    # through a group it is on a chain
    d = with_fw({}, chains=chain(functions=["g"]))
    d["groups"] = {"g": {"instances": ["fw"]}}
    plan_for(load_lab_dict(d, "t"))


def test_a_rule_as_bytes() -> None:
    r = Rule.model_validate({"action": "accept", "proto": "tcp", "src": "10.1.0.0/16",
                             "dport": "8000-8100"})
    raw = M.rule_bytes(r)
    assert len(raw) == 76
    src, smask, dst, dmask = (struct.unpack(">4I", raw[i:i + 16]) for i in (0, 16, 32, 48))
    # network order, an IPv4 prefix in the first word and 0 in the rest; no dst: 0/0
    assert (src, smask) == ((0x0A010000, 0, 0, 0), (0xFFFF0000, 0, 0, 0))
    assert dst == dmask == (0, 0, 0, 0)
    assert struct.unpack("<4H", raw[64:72]) == (0, 65535, 8000, 8100)
    assert (raw[72], raw[73], raw[74]) == (6, 1, 4)   # proto, accept, IPv4 only
    assert M.config_bytes(3, "drop", True) == struct.pack("<3I", 3, 0, 1)


def test_an_ipv6_rule_as_bytes_and_a_rule_of_no_family() -> None:
    r = Rule.model_validate({"action": "drop", "proto": "icmpv6", "dst": "2001:2:0:3::/64"})
    raw = M.rule_bytes(r)
    assert struct.unpack(">4I", raw[32:48]) == (0x20010002, 0x00000003, 0, 0)
    assert struct.unpack(">4I", raw[48:64]) == (0xFFFFFFFF, 0xFFFFFFFF, 0, 0)
    assert raw[:32] == bytes(32)                      # no src: any
    assert (raw[72], raw[73], raw[74]) == (58, 0, 6)  # icmpv6, drop, IPv6 only
    # a rule without prefixes matches both families, as in the kernel twin's inet table
    both = M.rule_bytes(Rule.model_validate({"action": "drop", "proto": "udp", "dport": 53}))
    assert both[:64] == bytes(64) and both[74] == 0
    assert M.words(IPv6Address("2001:2::1")) == (0x20010002, 0, 0, 1)
    assert str(M.address((0x20010002, 0, 0, 1), 6)) == "2001:2::1"
    assert str(M.address((0x0A000001, 0, 0, 0), 4)) == "10.0.0.1"


# ------------------------------------------------------------------ the layouts against BTF
@pytest.fixture(scope="module")
def built() -> Path:
    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "build/fw.bpf.o"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return ROOT / "native" / "build"


def test_fw_object_agrees_with_the_python_layouts(built: Path) -> None:
    b = btf.read(str(built / "fw.bpf.o"))
    assert contract.fw_drift(b) == [] and contract.drift(b) == []
    assert b.maps["sfc_fw_rules"].max_entries == 256 * M.MAX_RULES
    assert b.maps["sfc_fw_counts"].max_entries == 256 * M.SLOTS
    assert b.maps["sfc_fw_conns"].max_entries == M.MAX_CONNS


@pytest.mark.parametrize("old, new, says", [
    ("SFC_FW_MAX_RULES = 64,", "SFC_FW_MAX_RULES = 32,", "enum sfc_fw_limit"),
    ("\t__u16 sport_first;", "\t__be16 sport_first;", "struct sfc_fw_rule.sport_first"),
    ("\t__u32 nrules;\n\t__u32 policy;", "\t__u32 policy;\n\t__u32 nrules;",
     "struct sfc_fw_config"),
], ids=["limit", "byte-order", "member-order"])
def test_a_fw_header_edited_in_a_copy_is_caught(built: Path, tmp_path: Path, old: str,
                                                new: str, says: str) -> None:
    inc = tmp_path / "include"
    shutil.copytree(ROOT / "include", inc)
    header = (inc / "sfc_fw.h").read_text()
    assert header.count(old) == 1, old
    (inc / "sfc_fw.h").write_text(header.replace(old, new))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    obj = tmp_path / "fw.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-mcpu=v3",
                    f"-I/usr/include/{multiarch}", f"-I{inc}", f"-I{built}", "-c", "-o",
                    str(obj), str(ROOT / "bpf" / "fw.bpf.c")],
                   check=True, capture_output=True, timeout=120)
    drift = contract.fw_drift(btf.read(str(obj)))
    assert any(d.startswith(says) for d in drift), drift


@pytest.mark.parametrize("fw, extra_node, place", [
    ({"rules": [{"action": "drop", "proto": "udp", "dport": i} for i in range(65)]}, False,
     "nodes.fw.rules"),
    ({}, True, "nodes.fw2"),
    ({"rules": RULES6_65}, False, "nodes.fw.rules: 65 rules"),
    ({"rules": [{"action": "drop", "proto": "udp", "src": "2001:2::/48", "dport": "9-70000"}]},
     False, "nodes.fw.rules[0].dport"),
], ids=["too-many-rules", "on-no-chain", "too-many-ipv6-rules", "ipv6-port-beyond-limit"])
def test_the_cli_says_it_in_one_line_with_exit_2(fw: dict, extra_node: bool, place: str,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    d = with_fw(fw)
    if extra_node:
        d["nodes"]["fw2"] = {"kind": "bpf-firewall"}
        d["links"].append({"endpoints": ["fw2", "dst"]})
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and place in err and err.count("\n") == 1, err
