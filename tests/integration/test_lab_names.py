"""Labs whose names could be confused if names were joined naively coexist and go down
independently: each ``down`` removes only what carries its own lab's mark."""

from __future__ import annotations

import os
import subprocess

from sfclab.api import Lab
from sfclab.kernel import netns


def _sleeper(lab: Lab, node: str) -> subprocess.Popen[bytes]:
    return lab.popen(node, ["sleep", "60"])


def _pair(first: dict, second: dict) -> None:
    a = Lab.from_dict(first).up()
    try:
        b = Lab.from_dict(second).up()
    except BaseException:
        a.down()
        raise
    try:
        a_spaces = {a.netns(n) for n in first["nodes"] if first["nodes"][n]["kind"] != "ovs-bridge"}
        b_spaces = {b.netns(n) for n in second["nodes"]
                    if second["nodes"][n]["kind"] != "ovs-bridge"}
        assert not a_spaces & b_spaces
        proc = _sleeper(b, next(n for n in second["nodes"]
                                if second["nodes"][n]["kind"] == "host"))
        a.down()
        assert all(not netns.exists(ns) for ns in a_spaces)
        assert all(netns.exists(ns) for ns in b_spaces), "down of one lab removed the other's"
        assert proc.poll() is None, "down of one lab ended a process of the other"
        assert b.inspect()["name"] == second["name"]
    finally:
        a.down()
        b.down()
    assert all(not netns.exists(ns) for ns in b_spaces)


def test_fzy_and_fzy_dash(lab_name: str) -> None:
    """``fzy`` (a 2-node OVS chain, which has a staging namespace) next to ``fzy-`` whose node
    is called ``stage``."""
    first = {"name": f"{lab_name}fzy", "chain": {"length": 2, "link": "ovs", "port": "veth"},
             "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                       "br1": {"kind": "ovs-bridge"}}}
    second = {"name": f"{lab_name}fzy-", "nodes": {"stage": {"kind": "host"},
                                                   "other": {"kind": "host"}},
              "links": [{"endpoints": ["stage", "other"]}]}
    _pair(first, second)


def test_x_with_a_b_next_to_x_a_with_b(lab_name: str) -> None:
    first = {"name": f"{lab_name}x", "nodes": {"a-b": {"kind": "host"}, "c": {"kind": "host"}},
             "links": [{"endpoints": ["a-b", "c"]}]}
    second = {"name": f"{lab_name}x-a", "nodes": {"b": {"kind": "host"}, "c": {"kind": "host"}},
              "links": [{"endpoints": ["b", "c"]}]}
    _pair(first, second)


def test_no_process_or_namespace_outlives_its_lab(lab_name: str) -> None:
    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 3}}).up()
    proc = lab.popen("r1", ["sleep", "60"])
    spaces = [lab.netns(n) for n in ("src", "r1", "dst")]
    lab.down()
    proc.wait(timeout=5)
    assert not any(netns.exists(ns) for ns in spaces)
    assert not os.path.exists(f"/proc/{proc.pid}/ns/net")
