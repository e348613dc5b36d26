"""Chains in the lab file, without root: bad sections are located errors (exit 2 from the
command line), ranges become exact prefixes, slots follow the weights, stacks follow RFC 8595
stacking and are refused past 16 labels."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.plan import maglev
from sfclab.plan.sfc import MAX_LABELS, SLOTS, PathPlan, _slots, port_prefixes
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

ROOT = Path(__file__).resolve().parents[2]


def lab(chains: dict, groups: dict | None = None, n_routers: int = 1) -> dict:
    routers = [f"r{i}" for i in range(1, n_routers + 1)]
    names = ["src", *routers, "fw", "dst"]
    d = {"name": "u", "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                               "fw": {"kind": "firewall", "rules": []},
                               **{r: {"kind": "router"} for r in routers}},
         "links": [{"endpoints": [a, b]} for a, b in zip(names, names[1:])], "chains": chains}
    if groups:
        d["groups"] = groups
    return d


def chain(**kw: object) -> dict:
    return {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}], "functions": ["fw"],
                  "egress": "dst", **kw}}


@pytest.mark.parametrize("lo,hi", [(0, 65535), (7000, 7100), (80, 80), (1, 1023), (5, 6)])
def test_port_prefixes_cover_exactly_the_range(lo: int, hi: int) -> None:
    covered = set()
    for value, plen in port_prefixes(lo, hi):
        size = 1 << (16 - plen)
        assert value % size == 0
        covered |= set(range(value, value + size))
    assert covered == set(range(lo, hi + 1))


def test_slots_follow_the_weights() -> None:
    paths = [PathPlan(0, [], ["a"], [], "", "", "", 1), PathPlan(1, [], ["b"], [], "", "", "", 3)]
    s = _slots(paths)
    assert len(s) == maglev.SIZE <= SLOTS
    assert abs(s.count(0) / len(s) - 0.25) < 0.02 and s.count(0) + s.count(1) == len(s)


def test_stack_is_one_label_per_later_hop() -> None:
    p = plan_for(load_lab_dict(lab(chain()), "t"))
    sp = p.steering
    path = sp.directions[0].paths[0]
    assert path.nodes == ["src", "r1", "fw", "dst"]
    owners = {h.label: (h.node, h.action) for h in sp.hops}
    assert [owners[x] for x in path.stack] == [("r1", "forward"), ("fw", "proxy"),
                                              ("fw", "forward")]
    # interfaces that carry labels get room for them; hosts keep theirs
    mtus = {(i.node, i.name): i.mtu for i in p.interfaces}
    assert mtus[("r1", "eth0")] == 1500 + 4 * MAX_LABELS and mtus[("src", "eth0")] is None


def test_more_than_sixteen_labels_is_refused() -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(lab(chain(), n_routers=15), "t"))
    assert "at most 16" in str(e.value) and e.value.place == "chains.c.functions"


@pytest.mark.parametrize("chains,groups,place", [
    (chain(functions=["nosuch"]), None, "chains.c.functions[0]"),
    (chain(functions=["dst"]), None, "chains.c.functions[0]"),
    (chain(egress="nowhere"), None, "chains.c.egress"),
    ({"c": {"classifiers": [{"ingress": "src", "proto": "icmp", "dport": 80}],
            "functions": ["fw"], "egress": "dst"}}, None, "chains.c.classifiers[0]"),
    ({"c": {"classifiers": [{"ingress": "src", "dport": "90-80", "proto": "udp"}],
            "functions": ["fw"], "egress": "dst"}}, None, "chains.c.classifiers[0].dport"),
    ({"c": {"classifiers": [{"ingress": "src", "src": "10.0.0.1/8"}],
            "functions": ["fw"], "egress": "dst"}}, None, "chains.c.classifiers[0].src"),
    (chain(ttl=0), None, "chains.c.ttl"),
    (chain(colour="red"), None, "chains.c.colour"),
    (chain(functions=["g"]), {"g": {"instances": ["fw"], "weights": [1, 2]}}, "groups.g"),
    (chain(functions=["g"]), {"g": {"instances": ["src"]}}, "groups.g.instances[0]"),
    ({"c": {"classifiers": [], "functions": ["fw"], "egress": "dst"}}, None,
     "chains.c.classifiers"),
])
def test_bad_chain_sections_are_located(chains: dict, groups: dict | None, place: str,
                                        tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(lab(chains, groups), "t"))
    assert e.value.place == place, str(e.value)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(lab(chains, groups)))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and place in err and err.count("\n") == 1


def test_the_scenario_plans() -> None:
    p = plan_for(load_lab_dict(yaml.safe_load((ROOT / "scenarios/sfc-web.yaml").read_text()),
                               "t"))
    sp = p.steering
    assert {d.chain for d in sp.directions} == {"web", "dns"}
    assert len([d for d in sp.directions if d.chain == "web"]) == 2  # symmetric


def test_padding_goes_below_the_path_and_its_last_label_unpads() -> None:
    from sfclab.plan.sfc import PAD_LABEL
    from sfclab.realize.dataplane import Iface, encode_path
    from sfclab.realize.contract import packer

    sp = plan_for(load_lab_dict(lab(chain(pad_labels=9)), "t")).steering
    path = sp.directions[0].paths[0]
    owners = {h.label: (h.node, h.action) for h in sp.hops}
    # the same hops as unpadded; fw's forward label, the last, takes the padding off
    assert [owners[x] for x in path.stack] == [("r1", "forward"), ("fw", "proxy"),
                                              ("fw", "unpad")]
    assert path.pad == 9 and PAD_LABEL not in owners
    depth, _, _, _, *lse = packer("sfc_path").unpack(
        encode_path(path.stack, 64, Iface(2, b"\0" * 6), b"\0" * 6, path.pad))
    assert depth == 12 and [e >> 12 for e in lse[:12]] == path.stack + [PAD_LABEL] * 9
    assert [(e >> 8) & 1 for e in lse[:12]] == [0] * 11 + [1]  # bottom only on the last


def test_padding_past_the_stack_is_refused_naming_the_key(tmp_path: Path) -> None:
    # 3 labels of the path + 13 padding = 16 fits; 14 does not
    assert plan_for(load_lab_dict(lab(chain(pad_labels=13)), "t")).steering is not None
    with pytest.raises(SpecError) as e:
        plan_for(load_lab_dict(lab(chain(pad_labels=14)), "t"))
    assert e.value.place == "chains.c.pad_labels" and "at most 13 padding labels" in str(e.value)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(lab(chain(pad_labels=15))))
    assert main(["validate", str(f)]) == 2
    f.write_text(yaml.safe_dump(lab(chain(pad_labels=-1))))
    assert main(["validate", str(f)]) == 2
