"""A chain's ``encap`` without root: the key in lab and chain files (bad values and an NSH TTL
past its 6 bits located, exit 2), the plan carrying it per direction, the encap table (one
entry per encoding, what each needs), and NSH's encoding of a planned path: (node, SPI, SI)
-> the hop's label, SI lowered after each function."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.plan.encap import ENCAPS, Encap, encap_of, nsh_entries, register
from sfclab.plan.sfc import MAX_LABELS
from sfclab.plan.steering import SteeringPlan
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document


def lab(chains: dict) -> dict:
    names = ["src", "r1", "fw", "r2", "nat", "dst"]
    d = {"name": "u", "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                                "fw": {"kind": "firewall", "rules": []},
                                "nat": {"kind": "router"},
                                "r1": {"kind": "router"}, "r2": {"kind": "router"}},
         "links": [{"endpoints": [a, b]} for a, b in zip(names, names[1:])],
         "chains": chains}
    if "bfw" in str(chains):  # an SFC-aware eBPF function must be on a chain
        d["nodes"]["bfw"] = {"kind": "bpf-firewall", "rules": []}
        d["links"].append({"endpoints": ["r1", "bfw"]})
    return d


def chain(**kw: object) -> dict:
    return {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                  "functions": ["fw", "nat"], "egress": "dst", **kw}}


def test_the_default_is_mpls_and_the_plan_carries_each_chains_encap() -> None:
    p = plan_for(load_lab_dict(lab({**chain(), "n": {
        "classifiers": [{"ingress": "src", "proto": "tcp"}], "functions": ["fw"],
        "egress": "dst", "encap": "nsh", "symmetric": True}}), "t"))
    sp = p.steering
    assert {(d.chain, d.reverse): d.encap for d in sp.directions} == {
        ("c", False): "mpls", ("n", False): "nsh", ("n", True): "nsh"}
    assert {(d.chain, d.ttl) for d in sp.directions} == {("c", 64), ("n", 63)}
    again = SteeringPlan.from_dict(sp.to_dict())  # the state journal keeps it
    assert [d.encap for d in again.directions] == [d.encap for d in sp.directions]
    # an MPLS direction is written as before encodings; such a state reads as MPLS
    old = sp.to_dict()
    assert ["encap" in d for d in old["directions"]] == [False, True, True]
    for d in old["directions"]:
        d.pop("encap", None)
    assert {d.encap for d in SteeringPlan.from_dict(old).directions} == {"mpls"}


def test_an_nsh_only_lab_gives_its_path_interfaces_the_headers_room() -> None:
    p = plan_for(load_lab_dict(lab(chain(encap="nsh")), "t"))
    mtus = {(i.node, i.name): i.mtu for i in p.interfaces}
    assert mtus[("r1", "eth0")] == 1500 + 8 and mtus[("src", "eth0")] is None
    p = plan_for(load_lab_dict(lab(chain()), "t"))
    mtus = {(i.node, i.name): i.mtu for i in p.interfaces}
    assert mtus[("r1", "eth0")] == 1500 + 4 * MAX_LABELS
    # the programs are the same for both: they dispatch by ethertype
    q = plan_for(load_lab_dict(lab(chain(encap="nsh")), "t"))
    assert q.steering.attach == p.steering.attach


@pytest.mark.parametrize("kw,place,words", [
    ({"encap": "vxlan"}, "chains.c.encap", "expected one of"),
    ({"encap": "srv6", "pad_labels": 2}, "chains.c.pad_labels", "pad_labels"),
    ({"encap": "srv6", "functions": ["bfw"]}, "chains.c.functions[0]", "SFC-aware"),
    ({"encap": "nsh", "ttl": 64}, "chains.c.ttl", "at most 63"),
    ({"encap": "nsh", "pad_labels": 2}, "chains.c.pad_labels", "pad_labels"),
    ({"encap": "nsh", "functions": ["bfw"]}, "chains.c.functions[0]", "SFC-aware"),
])
def test_bad_encap_is_located_and_exits_2(kw: dict, place: str, words: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(lab(chain(**kw)), "t"))
    assert e.value.place == place and words in str(e.value), str(e.value)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(lab(chain(**kw))))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and place in err and err.count("\n") == 1


def chain_text(**kw: object) -> str:
    return yaml.safe_dump({
        "name": "v", "classifiers": [{"ingress": "src", "proto": "udp"}], "egress": "dst",
        "functions": [{"name": "fw", "kind": "firewall"}], **kw})


def chain_file(**kw: object) -> Document:
    return Document(chain_text(**kw), "c.yaml")


def test_chain_files_take_encap() -> None:
    assert parse(chain_file()).encap == "mpls"
    got = parse(chain_file(encap="nsh"))
    assert got.encap == "nsh" and got.ttl == 63
    for kw, place in [({"encap": "gre"}, "encap"), ({"encap": "nsh", "ttl": 100}, "ttl")]:
        with pytest.raises(SpecError) as e:
            parse(chain_file(**kw))
        assert e.value.place == place


def test_chain_add_check_takes_srv6_and_refuses_its_padding(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(chain_text(encap="srv6"))
    assert main(["validate", str(f), "--kind", "chain"]) == 0
    f.write_text(chain_text(encap="srv6", pad_labels=1))
    assert main(["validate", str(f), "--kind", "chain"]) == 2
    assert "pad_labels" in capsys.readouterr().err


def test_the_table_has_one_entry_per_encoding_and_refuses_a_second() -> None:
    assert set(ENCAPS) == {"mpls", "nsh", "srv6"}
    assert encap_of("nsh").ethertype == 0x894F and encap_of("nsh").headroom == 8
    assert encap_of("mpls").ethertype == 0x8847 and encap_of("mpls").pads
    with pytest.raises(ValueError):
        register(Encap("nsh", 0x894F, 8))


def test_nsh_entries_lower_the_service_index_after_each_function() -> None:
    # src -> r1 (forward) -> fw (proxy, forward) -> r2 (forward) -> nat (proxy, forward) -> dst
    owner = {16: ("r1", "forward"), 17: ("fw", "proxy"), 18: ("fw", "forward"),
             19: ("r2", "forward"), 20: ("nat", "proxy"), 21: ("nat", "forward")}
    got = nsh_entries(7, [16, 17, 18, 19, 20, 21], owner)
    assert got == [("r1", 7, 255, 16, False), ("fw", 7, 255, 17, False),
                   ("fw", 7, 254, 18, False), ("r2", 7, 254, 19, False),
                   ("nat", 7, 254, 20, False), ("nat", 7, 253, 21, True)]
    keys = [(n, spi, si) for n, spi, si, _, _ in got]
    assert len(set(keys)) == len(keys)


def test_a_planned_nsh_path_has_one_entry_per_node_and_index() -> None:
    p = plan_for(load_lab_dict(lab(chain(encap="nsh", symmetric=True)), "t"))
    sp = p.steering
    owner = {h.label: (h.node, h.action) for h in sp.hops}
    for d in sp.directions:
        for path in d.paths:
            got = nsh_entries(path.index, path.stack, owner)
            keys = [(n, si) for n, _, si, _, _ in got]
            assert len(set(keys)) == len(keys)
            assert got[-1][2] == 255 - len(path.instances) and got[-1][4]
