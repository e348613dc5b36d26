"""The bpf-balancer and its kernel twin without root: their lab-file keys and limits, the plan
that puts the program in place of the forwarder and proxy, the Maglev table it writes (shares,
what moves when a backend goes or comes), the bytes of its maps against the compiled
balancer.bpf.o's BTF (a header edited in a copy is caught), and the twin's nftables rules."""

from __future__ import annotations

import shutil
import struct
import subprocess
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.functions import balancer_params as P
from sfclab.functions import bpf_balancer_maps as M
from sfclab.functions.balancer import Balancer
from sfclab.kernel import btf
from sfclab.realize import contract
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

from .test_sfc_plan import chain, lab

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [{"address": f"10.9.0.{i}", "weight": 1} for i in range(1, 4)]


def with_lb(lb: dict, kind: str = "bpf-balancer") -> dict:
    d = lab(chain())
    d["nodes"]["fw"] = {"kind": kind, "vip": "10.9.9.9", "backends": BACKENDS, **lb}
    return d


def test_its_program_takes_the_forwarder_and_proxy_place_on_every_interface() -> None:
    sp = plan_for(load_lab_dict(with_lb({}), "t")).steering
    assert sp.attach["fw"] == [("sfc_lb", "eth0", "xdp"), ("sfc_lb", "eth1", "xdp")]


@pytest.mark.parametrize("lb, place, says", [
    ({"backends": [{"address": f"10.9.1.{i}"} for i in range(17)]}, "nodes.fw.backends",
     "at most 16 backends (the eBPF program's entries per node), got 17"),
    ({"backends": [{"address": "10.9.0.1", "weight": 101}]}, "nodes.fw.backends[0].weight",
     "100"),
    ({"ports": "80-65536"}, "nodes.fw.ports", "ports from 0 to 65535"),
    ({"ports": 0}, "nodes.fw.ports", "ports from 1 to 65535"),
    ({"backends": []}, "nodes.fw.backends", "at least 1"),
    ({"backends": [{"address": "10.9.0.1"}, {"address": "10.9.0.1"}]}, "nodes.fw.backends",
     "listed twice"),
    ({"vip": "10.9.0.2"}, "nodes.fw", "a vip no backend has (10.9.0.2 is also a backend)"),
    ({"sticky": "cookie"}, "nodes.fw.sticky", "tuple"),
    ({"backends": [{"address": "10.9.0.1", "port": 80}]}, "nodes.fw.backends[0]", "port"),
    ({"algorithm": "maglev"}, "nodes.fw", "algorithm"),
    ({"vip": "2001:2::9", "backends": [{"address": f"2001:2:0:1::{i + 1:x}"}
                                       for i in range(17)]},
     "nodes.fw.backends", "at most 16 backends (the eBPF program's entries per node), got 17"),
    ({"vip": "2001:2::9"}, "nodes.fw", "backends of the vip's family (IPv6): 10.9.0.1 is IPv4"),
    ({"vip": "2001:2::9", "backends": [{"address": "2001:2::9"}]}, "nodes.fw",
     "a vip no backend has (2001:2::9 is also a backend)"),
], ids=["too-many-backends", "weight", "port-beyond-limit", "port-zero", "no-backend",
        "twice", "vip-is-backend", "sticky", "unknown-backend-key", "unknown-key",
        "too-many-ipv6-backends", "families-mixed", "ipv6-vip-is-backend"])
@pytest.mark.parametrize("kind", ["bpf-balancer", "balancer"])
def test_what_the_balancer_cannot_hold_is_refused_at_its_place(lb: dict, place: str, says: str,
                                                               kind: str) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(with_lb(lb, kind), "t"))
    assert place in str(e.value) and says in str(e.value), str(e.value)


def test_sixteen_backends_fit() -> None:
    plan_for(load_lab_dict(with_lb({"backends": [{"address": f"10.9.1.{i}", "weight": 100}
                                                 for i in range(16)]}), "t"))


def test_a_bpf_balancer_on_no_chain_is_refused() -> None:
    d = with_lb({})
    d["nodes"]["lb2"] = {"kind": "bpf-balancer", "vip": "10.9.9.8", "backends": BACKENDS}
    d["links"].append({"endpoints": ["lb2", "dst"]})
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        plan_for(load_lab_dict(d, "t"))
    assert "nodes.lb2" in str(e.value)


@pytest.mark.parametrize("lb, extra_node, place", [
    ({"backends": [{"address": f"10.9.1.{i}"} for i in range(17)]}, False, "nodes.fw.backends"),
    ({}, True, "nodes.lb2"),
    ({"vip": "2001:2::9", "backends": [{"address": "2001:2:0:1::2"}]}, False,
     "nodes.fw.vip: expected a vip of the lab's families (IPv4), got an IPv6 address"),
], ids=["too-many-backends", "on-no-chain", "ipv6-vip-in-ipv4-lab"])
def test_the_cli_says_it_in_one_line_with_exit_2(lb: dict, extra_node: bool, place: str,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    d = with_lb(lb)
    if extra_node:
        d["nodes"]["lb2"] = {"kind": "bpf-balancer", "vip": "10.9.9.8", "backends": BACKENDS}
        d["links"].append({"endpoints": ["lb2", "dst"]})
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and place in err and err.count("\n") == 1, err


# ------------------------------------------------------------------ the Maglev table
ADDRS = ["10.9.0.1", "10.9.0.2", "10.9.0.3"]


def test_the_table_shares_slots_by_weight() -> None:
    t = M.table(ADDRS, [1, 2, 1])
    assert len(t) == M.TABLE_SIZE == 1021
    assert [abs(t.count(i) / len(t) - w / 4) < 0.01 for i, w in enumerate([1, 2, 1])] == \
        [True] * 3


def test_a_backend_out_moves_only_its_slots_and_back_in_gets_them_back() -> None:
    full = M.table(ADDRS, [1, 1, 1])
    out = M.table(ADDRS, [1, 1, 1], [True, False, True])
    assert 1 not in out
    assert all(o == f for o, f in zip(out, full) if f != 1)
    assert M.table(ADDRS, [1, 1, 1], [True, True, True]) == full
    with pytest.raises(ValueError, match="no backend"):
        M.table(ADDRS, [1, 1, 1], [False] * 3)


def test_a_new_backend_takes_about_its_share_and_moves_few_others() -> None:
    """A fourth backend that was never in (a new full table): its quarter of the slots, and
    Maglev moves under 3 % of the others among the first three."""
    three = M.table(ADDRS, [1, 1, 1])
    four = M.table([*ADDRS, "10.9.0.4"], [1, 1, 1, 1])
    to_new = sum(1 for f in four if f == 3)
    among = sum(1 for t, f in zip(three, four) if f != 3 and t != f)
    assert abs(to_new / 1021 - 0.25) < 0.01 and among / 1021 < 0.03, (to_new, among)


def test_the_maps_as_bytes() -> None:
    raw = M.config_bytes(IPv4Address("10.9.9.9"), (80, 90), "udp", 3, "source")
    assert len(raw) == 32
    assert raw[:16] == bytes([10, 9, 9, 9]) + bytes(12)  # network order, IPv4 in the first word
    assert struct.unpack("<HHBB2xII", raw[16:]) == (80, 90, 17, 4, 3, 1)
    assert M.backend_bytes(IPv4Address("10.9.0.1")) == bytes([10, 9, 0, 1]) + bytes(12)
    assert M.backend_bytes(None) == bytes(16)
    six = M.config_bytes(IPv6Address("2001:2:0:a::2"), (80, 80), "tcp", 2, "tuple")
    assert six[:16] == IPv6Address("2001:2:0:a::2").packed
    assert six[20:22] == bytes([6, 6])  # tcp, IPv6
    assert M.backend_bytes(IPv6Address("2001:2:0:b::2")) == IPv6Address("2001:2:0:b::2").packed
    t = M.table_bytes(M.table(ADDRS, [1, 1, 1]))
    assert len(t) == 4096 and t[1021 * 4:] == bytes(12)
    assert P.MAX_BACKENDS == M.MAX_BACKENDS


# ------------------------------------------------------------------ the layouts against BTF
@pytest.fixture(scope="module")
def built() -> Path:
    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "build/balancer.bpf.o"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return ROOT / "native" / "build"


def test_balancer_object_agrees_with_the_python_layouts(built: Path) -> None:
    b = btf.read(str(built / "balancer.bpf.o"))
    assert contract.lb_drift(b) == [] and contract.drift(b) == []
    assert b.maps["sfc_lb_backends"].max_entries == 256 * M.MAX_BACKENDS
    assert b.maps["sfc_lb_counts"].max_entries == 256 * M.SLOTS
    assert b.maps["sfc_lb_conns"].max_entries == M.MAX_CONNS


@pytest.mark.parametrize("old, new, says", [
    ("SFC_LB_MAX_BACKENDS = 16,", "SFC_LB_MAX_BACKENDS = 8,", "enum sfc_lb_limit"),
    ("\t__u16 port_first;", "\t__be16 port_first;", "struct sfc_lb_config.port_first"),
    ("\t__u32 backend;        /* index */\n\t__be32 addr[4];",
     "\t__be32 addr[4];\n\t__u32 backend;        /* index */", "struct sfc_lb_conn"),
], ids=["limit", "byte-order", "member-order"])
def test_a_lb_header_edited_in_a_copy_is_caught(built: Path, tmp_path: Path, old: str,
                                                new: str, says: str) -> None:
    inc = tmp_path / "include"
    shutil.copytree(ROOT / "include", inc)
    header = (inc / "sfc_lb.h").read_text()
    assert header.count(old) == 1, old
    (inc / "sfc_lb.h").write_text(header.replace(old, new))
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    obj = tmp_path / "balancer.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-mcpu=v3",
                    f"-I/usr/include/{multiarch}", f"-I{inc}", f"-I{built}", "-c", "-o",
                    str(obj), str(ROOT / "bpf" / "balancer.bpf.c")],
                   check=True, capture_output=True, timeout=120)
    drift = contract.lb_drift(btf.read(str(obj)))
    assert any(d.startswith(says) for d in drift), drift


# ------------------------------------------------------------------ the kernel twin's rules
def twin(**kw: object) -> str:
    params = Balancer.Params.model_validate({"vip": "10.9.9.9", "backends": [
        {"address": "10.9.0.1", "weight": 2}, {"address": "10.9.0.2"}], **kw})
    return Balancer(None, params).ruleset()  # type: ignore[arg-type]


def test_the_twin_repeats_a_backend_per_unit_of_weight() -> None:
    rules = twin(proto="tcp", ports="80-81")
    assert ("ip daddr 10.9.9.9 meta l4proto tcp th dport 80-81 dnat to jhash ip saddr . ip "
            "daddr . meta l4proto . th sport . th dport mod 3 seed 0x5fc1 map { 0 : 10.9.0.1, "
            "1 : 10.9.0.1, 2 : 10.9.0.2 }") in rules
    assert rules.count("counter comment \"sfclab backend") == 2
    assert "dnat to jhash ip saddr mod 3" in twin(sticky="source")
    assert "meta l4proto { tcp, udp } th dport 1-65535" in twin()


# ------------------------------------------------------------------ several on one node
FW = {"kind": "bpf-firewall", "rules": [{"action": "drop", "proto": "udp", "dport": 53}]}
LB = {"kind": "bpf-balancer", "vip": "10.9.9.9", "backends": BACKENDS}


def with_pipeline(functions: list) -> dict:
    d = lab(chain())
    d["nodes"]["fw"] = {"kind": "bpf-pipeline", "functions": functions}
    return d


def test_a_pipeline_puts_its_stages_in_the_tail_call_table_before_its_hook() -> None:
    sp = plan_for(load_lab_dict(with_pipeline([FW, LB]), "t")).steering
    assert sp.attach["fw"] == [("sfc_fw_stage", "0", "tail"), ("sfc_lb_stage", "1", "tail"),
                               ("sfc_pipe", "eth0", "xdp"), ("sfc_pipe", "eth1", "xdp")]
    sp = plan_for(load_lab_dict(with_pipeline([LB, FW, {"kind": "bpf-nat", "outside": "dst"}]),
                                "t")).steering
    assert [a[0] for a in sp.attach["fw"][:3]] == ["sfc_lb_stage", "sfc_fw_stage",
                                                   "sfc_nat_stage"]


@pytest.mark.parametrize("functions, place, says", [
    ([FW], "nodes.fw.functions", "at least 2"),
    ([FW, LB, FW], "nodes.fw.functions", "expected at most one function of each kind (bpf-firewall is listed twice"),
    ([FW, {"kind": "firewall"}], "nodes.fw.functions",
     "an eBPF function kind (bpf-firewall, bpf-balancer, bpf-nat) as the 'kind' of "
     "functions[1], got 'firewall'"),
    ([FW, LB | {"backends": [{"address": f"10.9.1.{i}"} for i in range(17)]}],
     "nodes.fw.functions[1]", "at most 16 backends"),
    ([FW | {"rules": [{"action": "drop", "proto": "udp", "dport": "1-70000"}]}, LB],
     "nodes.fw.functions[0]", "ports from 0 to 65535"),
], ids=["one", "kind-twice", "not-a-stage", "stage-limit", "stage-port"])
def test_what_a_pipeline_cannot_hold_is_refused_at_its_place(functions: list, place: str,
                                                            says: str) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(with_pipeline(functions), "t"))
    assert place in str(e.value) and says in str(e.value), str(e.value)


def test_a_pipeline_on_no_chain_is_refused() -> None:
    d = with_pipeline([FW, LB])
    d["nodes"]["p2"] = {"kind": "bpf-pipeline", "functions": [FW, LB]}
    d["links"].append({"endpoints": ["p2", "dst"]})
    with pytest.raises(SpecError, match="only as a function of a chain") as e:
        plan_for(load_lab_dict(d, "t"))
    assert "nodes.p2" in str(e.value)


def test_the_stage_limit_is_the_programs(built: Path) -> None:
    from sfclab.functions import bpf_pipeline

    cp = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "build/pipeline.bpf.o",
                         "build/nat.bpf.o"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    for obj in ("pipeline.bpf.o", "fw.bpf.o", "balancer.bpf.o", "nat.bpf.o"):
        b = btf.read(str(built / obj))
        assert b.enums["sfc_stage_limit"] == {"SFC_MAX_STAGES": bpf_pipeline.MAX_STAGES}, obj
        assert b.maps["sfc_stages"].max_entries == 256 * bpf_pipeline.MAX_STAGES


@pytest.mark.parametrize("flags", [[True, False], [False, False, False]], ids=["count", "none"])
def test_taking_every_backend_out_or_naming_too_few_is_refused(tmp_path: Path,
                                                               flags: list[bool]) -> None:
    from sfclab.errors import LabError
    from sfclab.functions.base import FunctionContext
    from sfclab.functions.bpf_balancer import BpfBalancer

    ctx = FunctionContext(lab="t", node="lb", netns="t", interfaces=[], state_dir=tmp_path)
    ctx.sfc_node_id, ctx.sfc_maps = 1, tmp_path
    lb = BpfBalancer(ctx, BpfBalancer.Params.model_validate({"vip": "10.9.9.9",
                                                            "backends": BACKENDS}))
    with pytest.raises(LabError, match="one flag per backend"):
        lb.set_live(flags)
