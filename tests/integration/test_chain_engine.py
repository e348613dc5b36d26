"""An added chain's instances are built by the engine of ``up`` (issue 24, item 2): journaled
as ``up`` journals nodes (a ``netns`` and a ``function`` entry each, before anything is made),
each namespace marked and one-armed (ICMP redirects off), each link's two ends marked with
the lab's name, addressed and up; ``chain rm`` takes them all out again."""

from __future__ import annotations

import os
from pathlib import Path

from sfclab.kernel import netns
from sfclab.live import record, request
from sfclab.live.ops import add as chain_add
from sfclab.realize.state import LabState

from .test_chain_ops import VIDEO, base_lab, chain_file, running


def _alias(ns: str, ifname: str) -> tuple[str | None, list[str], bool]:
    ipr = netns.iproute(ns)
    try:
        m = ipr.get_links(ipr.link_lookup(ifname=ifname)[0])[0]
        addrs = [f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}"
                 for a in ipr.get_addr(index=m["index"], family=2)]
        return m.get_attr("IFLA_IFALIAS"), addrs, bool(m["flags"] & 1)
    finally:
        ipr.close()


def test_added_instances_are_journaled_and_built_as_up_builds_nodes(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        state = LabState(lab.name)
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, VIDEO)))
        got = record.load_addition(state, "video")
        assert got is not None and got[1] == "up"
        nodes = got[0].nodes
        assert sorted(n.kind for n in nodes) == ["firewall", "firewall", "router"]
        journal = state.journal()
        for n in nodes:
            assert {"op": "netns", "name": n.netns} in journal
            assert {"op": "function", "node": n.node, "kind": n.kind} in journal
            assert netns.marked(n.netns)[0] is not None
            assert netns.read_sysctl(n.netns, "net.ipv4.conf.all.send_redirects") == "0"
            assert netns.read_sysctl(n.netns, "net.ipv4.ip_forward") == "1"
            alias, addrs, up = _alias(n.netns, n.ifname)
            assert (alias, addrs, up) == (f"sfclab:{lab.name}:{n.node}:added", [n.address], True)
            alias, addrs, up = _alias(lab.netns(n.attach), n.attach_ifname)
            assert (alias, addrs, up) == (f"sfclab:{lab.name}:{n.attach}:added", [n.gateway],
                                          True)
        chain_add.remove_chain(request.RemoveChain(lab.name, "video"))
        assert not [x for x in os.listdir("/run/netns")
                    if x in {n.netns for n in nodes}]


def test_chain_rm_removes_an_attach_end_only_while_it_carries_its_mark(tmp_path: Path) -> None:
    """``chain rm`` is the plan diff taken out by the parts of ``down``: the veth form deletes
    an added link's end at the attach node only while it carries the alias the plan gave it;
    one whose alias was changed after it was made is reported and left to the kernel."""
    body = {**VIDEO, "functions": [{"name": "fw", "kind": "firewall", "rules": [],
                                    "instances": 2}]}
    with running(base_lab()) as lab:
        state = LabState(lab.name)
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        got = record.load_addition(state, "video")
        assert got is not None
        tampered, kept = got[0].nodes
        ipr = netns.iproute(lab.netns(tampered.attach))
        try:
            ipr.link("set", index=ipr.link_lookup(ifname=tampered.attach_ifname)[0],
                     ifalias="someone-else")
        finally:
            ipr.close()
        rm = chain_add.remove_chain(request.RemoveChain(lab.name, "video"))
        ns = lab.netns(tampered.attach)
        assert rm["errors"] == [f"interface {ns}/{tampered.attach_ifname} lacks the lab's mark "
                                "(alias 'someone-else'); left alone"]
        assert sorted(rm["removed"]) == ["fw-1", "fw-2"]
        for n in (tampered, kept):
            assert not netns.exists(n.netns)
        ipr = netns.iproute(ns)
        try:  # the marked end went at once, with the chain
            assert not ipr.link_lookup(ifname=kept.attach_ifname)
        finally:
            ipr.close()
