"""An instance ``chain add`` or ``migrate`` puts on another host than its attach node is
joined to it by a tunnel that is a plan object like any link: a hosted link of the merged plan
(:func:`sfclab.plan.chainadd.apply`), in the change that adds the instance
(:func:`~sfclab.plan.chainadd.change_of`), made by the hosted links' part of the build engine
with both host contexts joined, and taken out by the same part's ``teardown_joined`` as the
plan diff's object.  No root: the parts are fakes registered in the table under the real
names, and the engine's ways into the kernel are replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sfclab.live.chains import wire
from sfclab.plan import diff
from sfclab.plan import tunnels as plan_tunnels
from sfclab.plan.chainadd import apply, change_of, drop_nodes, plan_addition
from sfclab.plan.chainpaths import Topology
from sfclab.plan.model import HostPlan, Plan
from sfclab.realize import change, teardown
from sfclab.realize.build import Builder
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.realize.links import LINK_FORMS
from sfclab.realize.links.base import LinkForm
from sfclab.realize.nodes import NODE_KINDS
from sfclab.realize.state import LabState
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document

from tests.unit.test_chain_add_plan import GOOD, LAB, _instances
from tests.unit.test_live_change import NewForm, Recorded

VNI = 5000


def _across() -> tuple[Plan, Plan, Any]:
    """The lab with the chain added, its first instance on host ``edge2`` (its attach node
    ``r1`` on the implicit host ``local``): a tunnel."""
    plan = plan_for(load_lab_dict(LAB))
    add = plan_addition(plan, plan.steering, parse(Document(json.dumps(GOOD), "chain.json")),
                        _instances(), "chain.json")
    fw1 = add.nodes[0]
    fw1.host, fw1.vni, fw1.mtu = "edge2", VNI, 1450
    merged = Plan.from_dict(plan.to_dict())
    apply(merged, add)
    return plan, merged, add


def _ctx(lab: str, host: str) -> str:
    return f"sfclab:{lab}:@{host}"


def test_an_added_instances_tunnel_is_a_hosted_link_of_the_plan_and_of_its_change() -> None:
    _plan, merged, _add = _across()
    lab = merged.lab
    # no veth across hosts: the link's two ends are the hosted form's
    assert [(v.a.node, v.b.node) for v in merged.veths if v.link == -1] == [
        ("fw-2", "r1"), ("n-1", "r1")]
    role = {(i.node, i.name): (i.role, i.mtu) for i in merged.interfaces if i.link == -1}
    assert role[("fw-1", "eth0")] == role[("r1", "sfx0")] == ("hosted", 1450)
    assert role[("fw-2", "eth0")][0] == "veth"
    hl = plan_tunnels.host_link_of(merged, "fw-1")
    assert hl is not None and (hl.link, hl.vni, hl.mtu, hl.attach) == (-1, VNI, 1450, "bridge")
    assert [(e.node, e.host, e.netns, e.node_if, e.port, e.vxlan) for e in hl.ends] == [
        ("r1", "local", _ctx(lab, "local"), "sfx0", f"pn{VNI}", f"vxn{VNI}"),
        ("fw-1", "edge2", _ctx(lab, "edge2"), "eth0", f"pn{VNI}", f"vxn{VNI}")]
    assert ("fw-1", "eth0", "sfx0") in Topology(merged).adj["r1"] or \
        ("r1", "eth0", "sfx0") in Topology(merged).adj["fw-1"]
    # the change that adds fw-1 holds the tunnel, and joins both hosts' contexts
    got = change_of(merged, {"fw-1"})
    assert got.host_links == [hl] and not got.veths
    assert change.contexts(got) == {_ctx(lab, "local"), _ctx(lab, "edge2")}
    # a host the change names opens its own context (an agent: its root namespace)
    share = diff.within(got, {"fw-1"})
    assert [e.node for hl2 in share.host_links for e in hl2.ends] == ["fw-1"]
    share.hosts = [HostPlan("edge2", _ctx(lab, "edge2"), "10.0.0.2/24", "eth9", "", [], None,
                            False, [])]
    assert change.contexts(share) == set()
    # the removal is the plan diff: it holds the tunnel; each host's share holds its end
    after = Plan.from_dict(merged.to_dict())
    drop_nodes(after, {"fw-1"})
    gone = diff.removed(merged, after)
    assert [x.vni for x in gone.host_links] == [VNI]
    assert [e.node for e in diff.within(gone, {"r1"}).host_links[0].ends] == ["r1"]
    assert not diff.removed(merged, merged).host_links


class Tunnels(LinkForm):
    """The hosted form, recording what the engine hands it."""

    name = "hosted"

    def __init__(self, seen: list[tuple[Any, ...]]):
        self.seen = seen

    def links(self, b: Builder) -> None:
        self.seen += [("tunnel", hl.vni, e.node, e.host, e.local, e.netns in b.joined)
                      for hl in b.plan.host_links for e in hl.ends]

    def configure(self, b: Builder) -> None:
        self.seen += [("configure", i.node, i.name) for i in self.interfaces(b.plan)]

    def teardown_joined(self, state: LabState, plan: Plan, joined: set[str],
                        report: Any) -> None:
        self.seen += [("unjoin", hl.vni, e.node, e.netns in joined)
                      for hl in plan.host_links for e in hl.ends]


def test_an_added_instances_tunnel_is_made_and_removed_by_the_hosted_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    _plan, merged, add = _across()
    lab = merged.lab
    seen: list[tuple[Any, ...]] = []
    for kind in ("firewall", "nat"):
        monkeypatch.setitem(NODE_KINDS, kind, Recorded(kind, seen))
    monkeypatch.setitem(LINK_FORMS, "veth", NewForm(seen))
    monkeypatch.setitem(LINK_FORMS, "hosted", Tunnels(seen))
    joined: list[str] = []

    def join(b: Builder, name: str) -> None:
        joined.append(name)
        b.fds[name] = os.open(os.devnull, os.O_RDONLY)  # closed with the builder
        b.joined.add(name)

    addresses = {"local": "198.19.128.1/24", "edge2": "198.19.128.2/24"}

    def tunnel(state: LabState, plan: Plan, n: Any, mtu: int) -> Any:  # hosts joined
        if n.vni is None:
            return None
        return plan_tunnels.host_link(plan, n, [(h, _ctx(lab, h), addresses[h])
                                                for h in ("local", "edge2")])

    monkeypatch.setattr(Builder, "send", lambda b, batch, ns=None: None)
    monkeypatch.setattr(Builder, "join_namespace", join)
    monkeypatch.setattr(Builder, "link_indexes", lambda b, name, fd: [])  # no namespace here
    monkeypatch.setattr(wire.netns, "write_sysctl", lambda ns, key, value: None)
    monkeypatch.setattr(wire.underlay, "tunnel", tunnel)
    state = LabState(lab)

    wire.journal_nodes(state, merged, add.nodes)
    wire.make_nodes(state, merged, add.nodes)

    # one change: the tunnel made by the hosted form, with the underlay addresses the join
    # gave, both contexts joined (mark checked) like the attach node's namespace
    assert sorted(joined) == sorted([_ctx(lab, "edge2"), _ctx(lab, "local"),
                                     merged.netns_of("r1")])
    assert [s for s in seen if s[0] == "tunnel"] == [
        ("tunnel", VNI, "r1", "local", "198.19.128.1", True),
        ("tunnel", VNI, "fw-1", "edge2", "198.19.128.2", True)]
    assert {s[1:] for s in seen if s[0] == "configure"} >= {("fw-1", "eth0"), ("r1", "sfx0")}
    assert [s[1] for s in seen if s[0] == "link"] == ["fw-2", "n-1"]  # the veths
    saved = Plan.from_dict(state.plan() or {})  # saved with the tunnel before it was made
    hl = plan_tunnels.host_link_of(saved, "fw-1")
    assert hl is not None and [e.local for e in hl.ends] == ["198.19.128.1", "198.19.128.2"]

    seen.clear()
    monkeypatch.setattr(teardown, "owned_namespaces", lambda lab, names, rep: {})
    after = Plan.from_dict(merged.to_dict())
    drop_nodes(after, {"fw-1"})
    errors = wire.remove_nodes(state, merged, after, [add.nodes[0]])
    assert errors == []
    assert [s for s in seen if s[0] == "unjoin"] == [("unjoin", VNI, "r1", True),
                                                     ("unjoin", VNI, "fw-1", True)]
