"""Placement over a running lab's hosts (no root): the hosts the lab file names and those
``host add`` made, less what their functions take; the implicit host ``local`` only in a lab
whose file names none; instances put on and taken off their host's plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sfclab.plan.chainadd import Instance, apply, drop_nodes, plan_addition
from sfclab.plan.model import HostPlan
from sfclab.plan.placement import Need, NoRoom, place
from sfclab.plan.sfc import SteeringPlan
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.realize.state import LabState
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document
from sfclab.live.hosts import capacity
from sfclab.live import record

M = 1 << 20
HOSTED = {"name": "uh1",
          "hosts": {"c1": {"cpus": 1, "memory": "512M"}, "c2": {"cpus": 2, "memory": "1G"}},
          "nodes": {"src": {"kind": "host", "host": "c1"}, "r1": {"kind": "router", "host": "c1"},
                    "dst": {"kind": "host", "host": "c2"}},
          "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]}
PLAIN = {"name": "uh2", "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                                  "dst": {"kind": "host"}},
         "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]}
CHAIN = {"name": "c", "attach": "r1",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5000}], "egress": "dst",
         "functions": [{"name": "fw", "kind": "firewall", "rules": [], "instances": 2,
                        "cpu": 0.5, "memory": "64M"}]}


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    return tmp_path


def _state(name: str) -> LabState:
    s = LabState(name)
    s.dir.mkdir(parents=True, exist_ok=True)
    return s


def _added(plan, hosts: list[str]):  # type: ignore[no-untyped-def]
    insts = [Instance(f"fw-{i + 1}", "fw", "firewall", {"rules": []}, 0.5, 64 * M, h)
             for i, h in enumerate(hosts)]
    return plan_addition(plan, SteeringPlan(), parse(Document(json.dumps(CHAIN), "c.json")),
                         insts, "c.json")


def test_a_lab_with_hosts_offers_its_hosts_less_their_instances(state_dir: Path) -> None:
    plan = plan_for(load_lab_dict(HOSTED))
    state = _state("uh1")
    hosts = capacity.hosts_of(state, plan)
    assert [(h.name, h.cpus, h.memory) for h in hosts] == [("c1", 1, 512 * M), ("c2", 2, 1 << 30)]
    add = _added(plan, ["c1", "c2"])
    record.save_addition(state, add, "up")
    apply(plan, add)
    assert "fw-1" in plan.host_of("fw-1").nodes and plan.host_of("fw-2").name == "c2"
    # the path leaves r1 over its hosted link (a tunnel to c2) toward dst
    assert add.directions[0].paths[0].nodes[-2:] == ["r1", "dst"]
    hosts = capacity.hosts_of(state, plan)
    assert [(h.name, h.free_cpu, h.free_memory) for h in hosts] == \
        [("c1", 0.5, 448 * M), ("c2", 1.5, 960 * M)]
    assert [h.functions for h in hosts] == [["fw"], ["fw"]]
    # first fit decreasing over them: the big one fits c2 only, the small one c1 first
    assert place([Need("big", "big-1", 1.0, 128 * M), Need("s", "s-1", 0.5, 64 * M)],
                 hosts) == {"big-1": "c2", "s-1": "c1"}
    with pytest.raises(NoRoom, match="largest free host is c2 with 1.5 CPU"):
        place([Need("huge", "huge-1", 2.0, M)], hosts)
    assert capacity.instances_by_host(state) == {"c1": ["fw-1"], "c2": ["fw-2"]}
    drop_nodes(plan, {"fw-1"})
    assert plan.host_of("fw-1") is None


def test_a_lab_without_hosts_has_local_and_the_hosts_added_to_it(state_dir: Path) -> None:
    plan = plan_for(load_lab_dict(PLAIN))
    state = _state("uh2")
    [local] = capacity.hosts_of(state, plan)
    assert local.name == "local" and local.cpus == capacity.machine_cpus()
    plan.hosts.append(HostPlan("e2", "sfclab:uh2:@e2", "", "", "sfclab:uh2:@e2", [0], 256 * M))
    capacity.save_added_hosts(state, ["e2"])
    assert capacity.has_local(state, plan)
    add = _added(plan, ["local", "e2"])
    record.save_addition(state, add, "up")
    apply(plan, add)
    hosts = capacity.hosts_of(state, plan)
    assert [(h.name, h.used_cpu, h.used_memory) for h in hosts] == \
        [("local", 0.5, 64 * M), ("e2", 0.5, 64 * M)]
    assert plan.hosts[0].nodes == ["fw-2"]  # local is no plan host: its nodes are in none
    # a group spreads: a third fw goes where no fw is only if one exists; here it shares
    assert place([Need("fw", "fw-3", 0.5, 64 * M)], hosts) == {"fw-3": "local"}
    assert place([Need("fw", "fw-3", 0.5, 250 * M)], hosts) == {"fw-3": "local"}
    assert place([Need("dpi", "dpi-1", 0.5, 64 * M)], hosts) == {"dpi-1": "local"}
    # a lab whose file names hosts has no implicit host, even with added ones
    hosted = plan_for(load_lab_dict(HOSTED))
    assert not capacity.has_local(_state("uh1"), hosted)
