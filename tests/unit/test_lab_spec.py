"""The lab file: schema, shorthands and every class of bad input (no root needed)."""

from __future__ import annotations

import textwrap

import pytest

from sfclab.errors import SpecError
from sfclab.realize.kinds import load_lab, load_lab_text


def lab(text: str):
    return load_lab_text(textwrap.dedent(text), "lab.yaml")


def bad(text: str) -> SpecError:
    with pytest.raises(SpecError) as ei:
        lab(text)
    assert ei.value.file == "lab.yaml"
    return ei.value


def test_full_form_with_every_link_form():
    lb = lab("""
        name: forms
        nodes:
          a: {kind: host}
          r: {kind: router}
          sw: {kind: linux-bridge}
          sw2: {kind: linux-bridge}
          o1: {kind: ovs-bridge}
          o2: {kind: ovs-bridge}
          b: {kind: host}
        links:
          - endpoints: [a, r]
            mtu: 9000
          - endpoints: [{node: r, address: 198.19.7.1/24, tso: off, tx-checksum: off}, sw]
          - endpoints: [sw, sw2]
          - endpoints: [sw2, o1]
          - endpoints: [o1, o2]
            connect: veth
          - endpoints: ["b:in0", o2]
            port: veth
    """)
    assert list(lb.nodes) == ["a", "r", "sw", "sw2", "o1", "o2", "b"]
    assert lb.links[0].mtu == 9000
    ep = lb.links[1].endpoints[0]
    assert ep.offloads() == {"tso": False, "tx-checksum": False}
    assert str(ep.address) == "198.19.7.1/24"
    assert lb.links[5].endpoints[0].interface == "in0"
    assert lb.nodes["r"].forwards and not lb.nodes["a"].forwards
    assert lb.nodes["o1"].is_bridge and not lb.nodes["o1"].has_namespace


def test_chain_length_expands_to_a_line_of_routers():
    lb = lab("name: c\nchain: {length: 4}\n")
    assert list(lb.nodes) == ["src", "r1", "r2", "dst"]
    assert [tuple(e.node for e in lk.endpoints) for lk in lb.links] == [
        ("src", "r1"), ("r1", "r2"), ("r2", "dst")]


def test_chain_of_two_is_one_direct_veth():
    lb = lab("name: c\nchain: {length: 2}\n")
    assert list(lb.nodes) == ["src", "dst"] and len(lb.links) == 1


def test_chain_ovs_puts_a_bridge_between_each_pair():
    lb = lab("name: c\nchain: {length: 3, link: ovs}\n")
    kinds = {n: s.kind for n, s in lb.nodes.items()}
    assert kinds == {"src": "host", "r1": "router", "dst": "host", "br1": "ovs-bridge",
                     "br2": "ovs-bridge"}
    assert all(lk.port == "internal" for lk in lb.links) and len(lb.links) == 4


def test_chain_bridges_with_patch_ports():
    lb = lab("name: c\nchain: {bridges: 3, connect: patch}\n")
    assert [lk.connect for lk in lb.links] == [None, "patch", "patch", None]
    assert [tuple(e.node for e in lk.endpoints) for lk in lb.links][1] == ("br1", "br2")


def test_nodes_override_chain_nodes():
    lb = lab("""
        name: c
        chain: {length: 3}
        nodes:
          r1: {kind: host}
    """)
    assert lb.nodes["r1"].kind == "host"


def test_expand_prints_the_full_form():
    d = lab("name: c\nchain: {length: 3}\n").to_dict()
    assert d["nodes"]["r1"] == {"kind": "router"}
    assert d["links"] == [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]
    # the full form is itself a valid lab with the same structure
    import yaml
    again = lab(yaml.safe_dump(d))
    assert again.to_dict() == d


@pytest.mark.parametrize("text, place, words", [
    ("name: x\nnodes: {a: {kind: host}\n", None, "not valid YAML"),
    ("name: x\ncolour: red\n", "colour", "unknown key"),
    ("name: x\nnodes:\n  a: {kind: hots}\n", "nodes.a.kind", "unknown kind 'hots'"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n  - endpoints: [a, b]\n"
     "  - endpoints: [a, c]\n", "links[1].endpoints[1]", "unknown node 'c'"),
    ("name: x\nnodes:\n  a: {kind: host}\n  a: {kind: router}\n", "nodes.a", "duplicate key"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n  - endpoints: [a, b]\n"
     "    mtu: -5\n", "links[0].mtu", "expected a number at least 68"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\n  c: {kind: host}\nlinks:\n"
     "  - endpoints: [{node: a, address: 198.18.0.1/24}, b]\n"
     "  - endpoints: [{node: a, address: 198.18.0.129/25}, c]\n",
     "links[1].endpoints[0].address", "overlaps"),
    ("name: x\nchain: {length: 1}\n", "chain.length", "from 2"),
    ("name: x\nnodes:\n  a: {kind: ovs-bridge}\n  b: {kind: ovs-bridge}\n  c: {kind: ovs-bridge}\n"
     "links:\n  - endpoints: [a, b]\n  - endpoints: [b, c]\n  - endpoints: [c, a]\n",
     "links[2]", "bridge loop"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n  - endpoints: [a, b]\n"
     "    port: internal\n", "links[0].port", "applies only"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n  - endpoints: [a]\n",
     "links[0].endpoints", "at least 2"),
    ("name: 'bad name'\n", "name", "expected a name"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n"
     "  - endpoints: ['a:averyveryverylongname', b]\n", "links[0].endpoints[0].interface",
     "15"),
    ("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n"
     "  - endpoints: [{node: a, address: 198.18.0.1/24}, {node: b, address: 198.18.0.1/24}]\n",
     "links[0].endpoints[1].address", "already given"),
])
def test_bad_input_names_the_place(text, place, words):
    e = bad(text)
    assert e.place == place
    assert words in str(e)
    assert str(e).startswith("lab.yaml")


def test_error_carries_the_line_number():
    e = bad("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n"
            "  - endpoints: [a, b]\n  - endpoints: [a, zz]\n")
    assert e.line == 7
    assert "lab.yaml:7: links[1].endpoints[1]: unknown node 'zz'" in str(e)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as ei:
        load_lab(str(tmp_path / "nope.yaml"))
    assert "cannot read" in str(ei.value)
