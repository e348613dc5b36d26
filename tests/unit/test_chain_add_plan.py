"""Placement (first-fit decreasing, groups spread), chain files (structure and places), and the
pure plan of a chain added to a running lab: existing labels and indices untouched, paths
through the attach node, a free /30 per instance, and withdrawal giving back exactly what was
added.  No root, no kernel."""

from __future__ import annotations

import json

import pytest

from sfclab.errors import SpecError
from sfclab.plan import placement
from sfclab.plan.chainadd import Addition, Instance, apply, plan_addition, withdraw
from sfclab.plan.chainpaths import NO_PATH, free_path_base, path_ranges
from sfclab.plan.placement import Host, Need, NoRoom, place
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document

G = 1 << 30


def test_first_fit_decreasing_spreads_a_group_over_hosts() -> None:
    hosts = [Host("a", 2, 4 * G), Host("b", 2, 4 * G)]
    needs = [Need("fw", "fw-1", 0.5, G), Need("fw", "fw-2", 0.5, G),
             Need("dpi", "dpi-1", 1.5, G)]
    got = place(needs, hosts)
    assert got == {"dpi-1": "a", "fw-1": "a", "fw-2": "b"}  # largest first; fw-2 apart
    assert hosts[0].used_cpu == 0  # the caller's hosts are left as they were


def test_a_group_shares_a_host_only_when_no_other_fits() -> None:
    hosts = [Host("a", 2, 4 * G), Host("b", 0.2, 4 * G)]
    got = place([Need("fw", "fw-1", 0.5, G), Need("fw", "fw-2", 0.5, G)], hosts)
    assert got == {"fw-1": "a", "fw-2": "a"}


def test_nothing_fits_names_the_function_its_needs_and_the_largest_free_host() -> None:
    hosts = [Host("a", 2, 4 * G, used_cpu=1.5), Host("b", 1, G)]
    with pytest.raises(NoRoom) as e:
        place([Need("fw", "fw-1", 0.5, G), Need("big", "big-1", 1.5, 2 * G)], hosts)
    assert e.value.need.function == "big"
    assert str(e.value) == ("function big (instance big-1) needs 1.5 CPU and 2G; the largest "
                            "free host is b with 1 CPU and 1G free")
    assert placement.fmt_bytes(64 << 20) == "64M"


def test_memory_counts_as_well_as_cpu() -> None:
    with pytest.raises(NoRoom):
        place([Need("m", "m-1", 0.1, 3 * G)], [Host("a", 8, 2 * G)])


def _doc(d: object) -> Document:
    return Document(json.dumps(d), "chain.json")


GOOD = {"name": "video", "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5000}],
        "egress": "dst",
        "functions": [{"name": "fw", "kind": "firewall", "rules": [], "instances": 2,
                       "weight": [1, 3], "cpu": 0.5, "memory": "32M"},
                      {"name": "n", "kind": "nat"}]}


def test_a_chain_file_keeps_the_kinds_keys_apart() -> None:
    c = parse(_doc(GOOD))
    assert c.functions[0].params == {"rules": []}
    assert c.functions[0].weights() == [1, 3] and c.functions[1].weights() == [1]
    assert c.functions[0].cpu == 0.5


@pytest.mark.parametrize("body,place", [
    ({**GOOD, "functions": []}, "functions"),
    ({**GOOD, "functions": [{"name": "a b", "kind": "nat"}]}, "functions[0].name"),
    ({**GOOD, "functions": [{"name": "a", "kind": "nat", "cpu": 0}]}, "functions[0].cpu"),
    ({**GOOD, "functions": [{"name": "a", "kind": "nat", "instances": 2, "weight": [1]}]},
     "functions[0].weight"),
    ({**GOOD, "functions": [{"name": "a", "kind": "nat"}, {"name": "a", "kind": "nat"}]},
     "functions[1].name"),
    ({**GOOD, "functions": [{"name": "a", "kind": "nat", "params": {}}]},
     "functions[0].params"),
    ({**GOOD, "classifiers": [{"ingress": "src", "proto": "icmp", "dport": 1}]},
     "classifiers[0]"),
    ({**GOOD, "ttl": 0}, "ttl"),
    ({k: v for k, v in GOOD.items() if k != "egress"}, "egress"),
])
def test_bad_chain_files_are_located(body: dict, place: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(_doc(body))
    assert e.value.place == place and e.value.file == "chain.json"


LAB = {"name": "u1", "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                               "f1": {"kind": "firewall"}, "dst": {"kind": "host"}},
       "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "f1"]},
                 {"endpoints": ["f1", "dst"]}],
       "chains": {"base": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7999}],
                           "functions": ["f1"], "egress": "dst", "symmetric": True}}}


def _instances() -> list[Instance]:
    return [Instance("fw-1", "fw", "firewall", {}, 0.5, 32 << 20),
            Instance("fw-2", "fw", "firewall", {}, 0.5, 32 << 20),
            Instance("n-1", "n", "nat", {"outside": "r1"}, 0.1, 16 << 20)]


def test_an_added_chain_leaves_existing_labels_and_indices_alone() -> None:
    plan = plan_for(load_lab_dict(LAB))
    before = plan.steering.copy()
    chain = parse(_doc({**GOOD, "symmetric": True}))
    add = plan_addition(plan, before, chain, _instances(), "chain.json")
    assert add.attach == "r1"  # the router nearest the ingress
    assert [n.attach_ifname for n in add.nodes] == ["sfx0", "sfx1", "sfx2"]
    assert all(n.subnet.startswith("198.19.255.") for n in add.nodes)
    assert len({n.subnet for n in add.nodes}) == 3
    old = {h.label for h in before.hops}
    assert all(h.label > max(old) for h in add.hops)
    # the hop r1 -> f1 of the existing chain is reused, not numbered again
    fwd = add.directions[0].paths[0]
    assert fwd.nodes == ["src", "r1", "fw-1", "r1", "n-1", "r1", "f1", "dst"]
    assert set(fwd.stack) & old
    assert [d.index for d in add.directions] == [2, 3]
    ranges = path_ranges(before)
    for d in add.directions:
        assert d.path_base is not None
        mine = set(range(d.path_base, d.path_base + len(d.paths)))
        assert not mine & {i for b, n in ranges for i in range(b, b + n)}
        assert NO_PATH not in mine
    assert {p.weight for p in add.directions[0].paths} == {1, 3}
    # programs: sfc_forward on r1's new ends, the proxy on the functions; the classifier of
    # src and dst are there already (the lab's symmetric chain)
    assert ("sfc_forward", "sfx0", "xdp") in add.attach_progs["r1"]
    assert "src" not in add.attach_progs
    assert "dst" not in add.attach_progs  # it classifies already (the symmetric base chain)
    # merged, then withdrawn: the plan is the lab's again
    merged = type(plan).from_dict(plan.to_dict())
    apply(merged, Addition.from_dict(json.loads(json.dumps(add.to_dict()))))
    sp = merged.steering
    assert {d.chain for d in sp.directions} == {"base", "video"}
    assert "fw-1" in merged.functions and merged.netns_of("n-1") == "sfclab:u1:n-1"
    freed = withdraw(merged, add)
    assert sorted(freed) == sorted(h.label for h in add.hops)
    back = merged.steering
    assert back.hops == before.hops and back.directions == before.directions
    assert [n.node for n in merged.namespaces] == [n.node for n in plan.namespaces]


def test_an_added_chain_refuses_what_the_lab_cannot_carry() -> None:
    plan = plan_for(load_lab_dict(LAB))
    sp = plan.steering.copy()
    for body, where in [({**GOOD, "name": "base"}, "name"),
                        ({**GOOD, "attach": "dst"}, "attach"),
                        ({**GOOD, "egress": "zz"}, "egress")]:
        with pytest.raises(SpecError) as e:
            plan_addition(plan, sp, parse(_doc(body)), _instances(), "chain.json")
        assert e.value.place == where
    with pytest.raises(SpecError, match="already has a node 'f1'"):
        plan_addition(plan, sp, parse(_doc(GOOD)),
                      [Instance("f1", "fw", "firewall", {}, 0.1, 1)], "chain.json")


def test_free_path_ranges_skip_the_empty_path() -> None:
    assert free_path_base([(0, 4)], 2) == 4
    assert free_path_base([(0, 4), (6, 2)], 2) == 4
    assert free_path_base([(0, NO_PATH - 1)], 1) == NO_PATH - 1
    with pytest.raises(SpecError):
        free_path_base([(0, NO_PATH - 1)], 2)  # only the empty path's neighbour is left


def test_a_mapping_from_an_api_becomes_the_same_typed_request() -> None:
    from sfclab.live.request import chain_from_dict

    req = chain_from_dict("nolab", {**GOOD, "attach": "r1"}, source="POST /labs/x/chains")
    assert [f.name for f in req.functions] == ["fw", "n"]
    assert req.functions[1].params == {"outside": "r1"}  # one arm: the outside is the attach
    assert [i.node for i in req.instances()] == ["fw-1", "fw-2", "n-1"]
    assert req.functions[0].memory == 32 << 20 and req.functions[0].weights == [1, 3]
    with pytest.raises(SpecError) as e:
        chain_from_dict("nolab", {**GOOD, "functions": [{"name": "a", "kind": "firewall",
                                                         "policy": "maybe"}]},
                        source="POST /labs/x/chains")
    assert e.value.file == "POST /labs/x/chains" and e.value.place == "functions[0].policy"


def test_new_labels_wrap_to_the_lowest_free_at_the_tables_end() -> None:
    """A label indexes the data plane's label array (below MAX_HOPS): once the highest in use
    is its last index, new labels take the lowest free ones, and a full table is refused."""
    from sfclab.plan.chainpaths import Labels
    from sfclab.plan.steering import Hop
    from sfclab.spec.limits import MAX_HOPS

    labels = Labels([Hop(16, "a", "proxy"), Hop(18, "b", "proxy"),
                     Hop(MAX_HOPS - 1, "c", "proxy")])
    got = [labels.label(Hop(0, n, "proxy")) for n in ("d", "e", "f")]
    assert got == [17, 19, 20]
    full = Labels([Hop(i, f"n{i}", "proxy") for i in range(16, MAX_HOPS)])
    with pytest.raises(SpecError, match="label table is full"):
        full.label(Hop(0, "x", "proxy"))
