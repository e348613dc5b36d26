"""A chain added to a running lab is a change made by the build engine of ``up``: the objects
its nodes bring (:func:`sfclab.plan.chainadd.change_of`) are journaled by the parts of the kind
table and made by their stages, so a node kind or link form in the table builds them.  No root:
the parts here are fakes registered in the table under the real names, and the engine's two
ways into the kernel (sending a netlink batch, joining a lab namespace) are replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sfclab.live.chains import wire
from sfclab.plan import diff, migration
from sfclab.plan.chainadd import apply, change_of, drop_nodes, plan_addition, withdraw
from sfclab.plan.model import Plan
from sfclab.realize import teardown
from sfclab.realize.build import Builder
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.realize.links import LINK_FORMS
from sfclab.realize.links.base import LinkForm
from sfclab.realize.nodes import NODE_KINDS
from sfclab.realize.nodes.function import FunctionNode
from sfclab.realize.state import LabState
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document

from tests.unit.test_chain_add_plan import GOOD, LAB, _instances


def _added() -> tuple[Plan, Plan, Any]:
    plan = plan_for(load_lab_dict(LAB))
    add = plan_addition(plan, plan.steering, parse(Document(json.dumps(GOOD), "chain.json")),
                        _instances(), "chain.json")
    merged = Plan.from_dict(plan.to_dict())
    apply(merged, add)
    return plan, merged, add


def test_the_change_of_added_nodes_is_exactly_what_they_bring() -> None:
    plan, merged, add = _added()
    nodes = {n.node for n in add.nodes}
    got = change_of(merged, nodes)
    assert [ns.node for ns in got.namespaces] == ["fw-1", "fw-2", "n-1"]
    assert all(ns.forwards for ns in got.namespaces)
    # each link with both ends: the node's own and the attach node's (r1, a namespace of the lab)
    assert [(v.a.node, v.b.node, v.b.name) for v in got.veths] == [
        ("fw-1", "r1", "sfx0"), ("fw-2", "r1", "sfx1"), ("n-1", "r1", "sfx2")]
    assert {(i.node, i.name) for i in got.interfaces} == (
        {(n, "eth0") for n in nodes} | {("r1", f"sfx{i}") for i in range(3)})
    assert [(r.node, r.dst) for r in got.routes] == [(n, "0.0.0.0/0") for n in sorted(nodes)]
    assert sorted(got.functions) == sorted(nodes)
    assert not (got.hosts or got.host_links or got.ovs_bridges or got.linux_bridges
                or got.steering or got.tenancy)
    # and it is what taking the nodes out again removes
    rest = Plan.from_dict(merged.to_dict())
    drop_nodes(rest, nodes)
    assert len(rest.namespaces) + len(got.namespaces) == len(merged.namespaces)
    assert len(rest.veths) + len(got.veths) == len(merged.veths) == len(plan.veths) + 3


class Recorded(FunctionNode):
    """A function node kind that records the stages it is called at and what it is given."""

    def __init__(self, kind: str, seen: list[tuple[Any, ...]]):
        super().__init__(kind)
        self.seen = seen

    def namespaces(self, b: Builder) -> None:
        self.seen += [("namespace", ns.node) for ns in self.mine(b.plan)]

    def prepare(self, b: Builder) -> None:
        self.seen += [("prepare", n, n in b.whole.functions and "f1" in b.whole.functions)
                      for n in self.nodes(b.plan)]

    def start(self, b: Builder) -> None:
        self.seen += [("start", n) for n in self.nodes(b.plan)]


class NewForm(LinkForm):
    """A link form put in the table in place of ``veth``: chain add's links must be its."""

    name = "veth"

    def __init__(self, seen: list[tuple[Any, ...]]):
        self.seen = seen

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return [{"op": "netns", "name": v.a.netns} for v in plan.veths if v.a.netns]

    def links(self, b: Builder) -> None:
        self.seen += [("link", v.a.node, v.b.node, v.b.netns in b.fds) for v in b.plan.veths]

    def configure(self, b: Builder) -> None:
        self.seen += [("configure", i.node, i.name) for i in self.interfaces(b.plan)]


def test_added_nodes_are_journaled_and_made_by_the_kind_tables_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    _plan, merged, add = _added()
    seen: list[tuple[Any, ...]] = []
    for kind in ("firewall", "nat"):
        monkeypatch.setitem(NODE_KINDS, kind, Recorded(kind, seen))
    monkeypatch.setitem(LINK_FORMS, "veth", NewForm(seen))
    sent: list[str | None] = []
    joined: list[str] = []
    sysctls: list[str] = []

    def send(b: Builder, batch: Any, ns: str | None = None) -> None:
        sent.append(ns)

    def join(b: Builder, name: str) -> None:
        joined.append(name)
        b.fds[name] = os.open(os.devnull, os.O_RDONLY)  # closed with the builder
        b.joined.add(name)

    monkeypatch.setattr(Builder, "send", send)
    monkeypatch.setattr(Builder, "join_namespace", join)
    monkeypatch.setattr(Builder, "link_indexes", lambda b, name, fd: [])  # no namespace here
    monkeypatch.setattr(wire.netns, "write_sysctl", lambda ns, key, value: sysctls.append(ns))
    state = LabState(merged.lab)

    wire.journal_nodes(state, merged, add.nodes)
    wire.make_nodes(state, merged, add.nodes)

    nodes = ["fw-1", "fw-2", "n-1"]
    netns = {n: merged.netns_of(n) for n in [*nodes, "r1"]}
    # journaled by the parts, before anything: the node kinds' namespaces and functions, and
    # the new form's own entries
    journal = state.journal()
    assert [e for e in journal if e["op"] == "function"] == [
        {"op": "function", "node": n, "kind": k}
        for n, k in (("fw-1", "firewall"), ("fw-2", "firewall"), ("n-1", "nat"))]
    assert sorted(e["name"] for e in journal if e["op"] == "netns") == sorted(
        [netns[n] for n in nodes] * 2)
    # made by the parts' stages, in the stages' order: the attach node's namespace joined
    assert joined == [netns["r1"]]
    assert [s for s in seen if s[0] == "namespace"] == [("namespace", n) for n in nodes]
    assert [s for s in seen if s[0] == "link"] == [("link", n, "r1", True) for n in nodes]
    assert sorted(s[1:] for s in seen if s[0] == "configure") == sorted(
        [(n, "eth0") for n in nodes] + [("r1", f"sfx{i}") for i in range(3)])
    assert [s for s in seen if s[0] == "prepare"] == [("prepare", n, True) for n in nodes]
    assert [s[0] for s in seen].index("start") > max(
        i for i, s in enumerate(seen) if s[0] in ("link", "configure", "prepare"))
    # the routes went in each new namespace's batch: nothing of the lab was built again
    assert set(sent) - {None} == {netns[n] for n in nodes}
    assert sorted(set(sysctls)) == sorted(netns[n] for n in nodes)  # one-armed: no redirects


def test_an_instance_with_a_container_brings_its_own_and_a_clone_gets_the_same_image() -> None:
    """A chain file's ``image`` (a container planned for no node yet) becomes each instance's
    own container (its podman name and namespace), in the merged plan, in the change the
    engine makes, gone with :func:`drop_nodes`; a migration's clone runs the same image."""
    from sfclab.plan.containers import moved_to
    from sfclab.plan.model import ContainerPlan
    from sfclab.plan.names import container_name, netns_name

    plan = plan_for(load_lab_dict(LAB))
    template = ContainerPlan(node="", name="", netns="", image="localhost/x/fw:1",
                             env={"A": "1"}, memory=64 << 20)
    insts = _instances()
    insts[0].container = template
    add = plan_addition(plan, plan.steering, parse(Document(json.dumps(GOOD), "chain.json")),
                        insts, "chain.json")
    merged = Plan.from_dict(plan.to_dict())
    apply(merged, add)
    node = insts[0].node
    want = [(node, container_name(LAB["name"], node), netns_name(LAB["name"], node),
             "localhost/x/fw:1", {"A": "1"}, 64 << 20)]
    got = [(c.node, c.name, c.netns, c.image, c.env, c.memory) for c in merged.containers]
    assert got == want
    assert [c.node for c in change_of(merged, {n.node for n in add.nodes}).containers] == [node]
    # saved and read back with the plan, and with the addition's record
    again = Plan.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert [c.name for c in again.containers] == [want[0][1]]
    clone = moved_to(merged, node, f"{node}.m1")
    assert clone is not None and clone["image"] == "localhost/x/fw:1"
    assert clone["name"] == container_name(LAB["name"], f"{node}.m1")
    assert clone["netns"] == netns_name(LAB["name"], f"{node}.m1")
    assert moved_to(merged, insts[1].node, "other") is None  # no container, none for a clone
    drop_nodes(merged, {node})
    assert merged.containers == []


def test_a_removal_is_the_plan_diff_from_the_lab_with_the_nodes_to_the_lab_without() -> None:
    _plan, merged, add = _added()
    after = Plan.from_dict(merged.to_dict())
    withdraw(after, add)
    got = diff.removed(merged, after)
    want = change_of(merged, {n.node for n in add.nodes})
    assert got.to_dict() == want.to_dict()
    # one node's share, as a host's agent takes it: the node, and its link's end at r1 only
    # where r1 is on that host
    one = diff.within(got, {"fw-1"})
    assert [ns.node for ns in one.namespaces] == ["fw-1"]
    assert [(i.node, i.name) for i in one.interfaces] == [("fw-1", "eth0")]
    assert [(i.node, i.name) for i in diff.within(got, {"r1"}).interfaces] == [
        ("r1", f"sfx{i}") for i in range(3)]
    assert not diff.within(got, {"r1"}).namespaces
    # a host taken out is the host alone: no node of the lab goes with it
    h = Plan.from_dict(merged.to_dict())
    h.hosts = []
    assert diff.removed(merged, h).to_dict() == Plan(merged.lab, merged.tag,
                                                     hosts=merged.hosts).to_dict()


class Removed(FunctionNode):
    """A function node kind that records what ``chain rm`` asks it to stop."""

    def __init__(self, kind: str, seen: list[tuple[Any, ...]]):
        super().__init__(kind)
        self.seen = seen

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: Any) -> None:
        assert plan is not None
        self.seen += [("stop", n, plan.steering is not None) for n in self.nodes(plan)]


class RemovedForm(LinkForm):
    """A link form in the table in place of ``veth``: chain rm's links must go through it."""

    name = "veth"
    teardown_rank = 30

    def __init__(self, seen: list[tuple[Any, ...]]):
        self.seen = seen

    def teardown_joined(self, state: LabState, plan: Plan, joined: set[str],
                        report: Any) -> None:
        self.seen += [("unjoin", i.node, i.name) for v in plan.veths for i in (v.a, v.b)
                      if i.netns in joined]


def test_removed_nodes_go_through_the_kind_tables_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    _plan, merged, add = _added()
    seen: list[tuple[Any, ...]] = []
    for kind in ("firewall", "nat"):
        monkeypatch.setitem(NODE_KINDS, kind, Removed(kind, seen))
    monkeypatch.setitem(LINK_FORMS, "veth", RemovedForm(seen))
    owned: list[list[str]] = []

    def owned_namespaces(lab: str, names: list[str], rep: Any) -> dict[int, str]:
        owned.append(list(names))
        return {}

    monkeypatch.setattr(teardown, "owned_namespaces", owned_namespaces)
    after = Plan.from_dict(merged.to_dict())
    drop_nodes(after, {"fw-1", "fw-2"})  # n-1 stays
    state = LabState(merged.lab)
    errors = wire.remove_nodes(state, merged, after, add.nodes[:2])

    # functions stopped by their kind, rebuilt in the lab's plan (its steering: node ids)
    assert [s for s in seen if s[0] == "stop"] == [("stop", "fw-1", True),
                                                   ("stop", "fw-2", True)]
    # the links' ends at the attach node by the link form, after the functions stopped
    assert [s for s in seen if s[0] == "unjoin"] == [("unjoin", "r1", "sfx0"),
                                                     ("unjoin", "r1", "sfx1")]
    assert [s[0] for s in seen] == ["stop", "stop", "unjoin", "unjoin"]
    # the namespaces, from the journal entries of the removed nodes alone
    assert owned == [[merged.netns_of("fw-1"), merged.netns_of("fw-2")]]
    assert errors == []


def test_a_migration_is_the_clone_applied_the_switch_and_the_removal_applied() -> None:
    """The four steps as plans: the clone's change is the diff from the lab to the lab with
    it; the switch touches only the steering; the removal is the diff from the switched lab
    to the lab without the old instance, which holds the old node and its link alone."""
    plan, merged, add = _added()
    old = next(n for n in add.nodes if n.node == "fw-1")
    m = migration.plan_clone(merged, add, old, "local", add.nodes, 1550)
    assert m.clone.node == "fw-1.m1" and m.clone.attach == old.attach
    assert diff.removed(m.merged, merged).to_dict() == change_of(m.merged, {"fw-1.m1"}).to_dict()
    assert [d.index for d in m.news] == [d.index for d in m.olds]
    assert all("fw-1" not in p.instances for d in m.news for p in d.paths)
    assert any("fw-1.m1" in p.instances for d in m.news for p in d.paths)
    switched = migration.switched(m.merged, m.news)
    assert diff.removed(m.merged, switched).to_dict() == Plan(plan.lab, plan.tag).to_dict()
    final, _freed = migration.removal(switched, old)
    gone = diff.removed(switched, final)
    assert [n.node for n in gone.namespaces] == ["fw-1"]
    assert [(v.a.node, v.b.node, v.b.name) for v in gone.veths] == [("fw-1", "r1", "sfx0")]
    assert sorted(gone.functions) == ["fw-1"]
    assert "fw-1" not in (final.steering.node_ids if final.steering else {})


def test_host_rm_is_a_change_of_one_host_taken_out_by_the_hosts_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``host rm`` of an emulated host removes what ``host add`` made as ``down`` would: what
    runs in its context is ended before its cgroups go (they must be empty), the namespace
    last; a cgroup that is not the lab's is left, said so."""
    from sfclab.plan.model import HostPlan
    from sfclab.realize import hosts as realize_hosts
    from sfclab.realize.runtime.local import LocalRuntime

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    done: list[tuple[str, Any]] = []

    def owned_namespaces(lab: str, names: list[str], rep: Any) -> dict[int, str]:
        done.append(("owned", list(names)))
        return {7: names[0]}

    monkeypatch.setattr(teardown, "owned_namespaces", owned_namespaces)
    monkeypatch.setattr(teardown, "end_processes_in",
                        lambda owned, rep: done.append(("end", sorted(owned.values()))))
    monkeypatch.setattr(teardown, "delete_namespaces",
                        lambda owned, rep: done.append(("delete", sorted(owned.values()))))
    monkeypatch.setattr(realize_hosts.host_cgroups, "remove",
                        lambda name: done.append(("cgroup", name)) or [])
    h = HostPlan("e1", "sfclab:u1:@e1", "", "", "sfclab:u1:@e1", [0], 64 << 20, True, [])
    assert LocalRuntime(LabState("u1")).leave(h) == []
    assert done == [("owned", ["sfclab:u1:@e1"]), ("end", ["sfclab:u1:@e1"]),
                    ("cgroup", "sfclab:u1:@e1"), ("delete", ["sfclab:u1:@e1"])]
    done.clear()
    forged = HostPlan("e2", "sfclab:u1:@e2", "", "", "sfclab:other:@e2", [0], 64 << 20, True,
                      [])
    errors = LocalRuntime(LabState("u1")).leave(forged)
    assert len(errors) == 1 and "sfclab:other:@e2" in errors[0] and "left alone" in errors[0]
    assert ("cgroup", "sfclab:other:@e2") not in done
