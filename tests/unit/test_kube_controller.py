"""The Kubernetes controller's and agents' pure parts (no cluster): what one pass of the
controller decides from what it read, the agents' liveness by their Leases as this machine saw
them, and a request's bound."""

from __future__ import annotations

import pytest

from sfclab.errors import LabError, SpecError
from sfclab.realize.runtime import kubernetes_controller as ctl
from sfclab.realize.runtime.kubernetes import LAB_LABEL, MANAGED
from sfclab.realize.runtime.kubernetes_lease import micro_time
from sfclab.realize.runtime.kubernetes_requests import KubeTarget, request_object
from sfclab.realize.runtime.kubernetes_watch import Liveness

NOW = 1_800_000_000.0


def stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lab(name: str, phase: str | None = None, age: float = 100.0, uid: str = "u1",
        mark: bool = True, hosts: int = 2, placed: bool | None = None) -> dict:
    """A Lab of ``hosts`` parts, allocated (``placed``) when it has a phase but Failed."""
    placed = phase not in (None, "Failed") if placed is None else placed
    status: dict = {"phase": phase} if phase else {}
    if placed:
        status["placement"] = [{"host": f"h{i + 1}", "node": "n1"} for i in range(hosts)]
    return {"metadata": {"name": name, "uid": uid, "creationTimestamp": stamp(NOW - age),
                         "labels": {**MANAGED, LAB_LABEL: name} if mark else {}},
            "spec": {"lab": name, "hostCount": hosts}, "status": status}


def part(lab_name: str, host: str, node: str | None, phase: str | None = "Up",
         uid: str = "u1", gen: int = 1) -> dict:
    return {"metadata": {"name": f"{lab_name}.{host}", "generation": gen,
                         "labels": {**MANAGED, LAB_LABEL: lab_name},
                         "ownerReferences": [{"kind": "Lab", "uid": uid}]},
            "spec": {"lab": lab_name, "host": host, **({"node": node} if node else {})},
            "status": {"phase": phase, "observedGeneration": gen} if phase else {}}


NODES = {"n1", "n2"}


def test_a_lab_whose_parts_are_up_is_up_and_degraded_when_an_agent_is_gone():
    labs = [lab("a", "Pending")]
    parts = [part("a", "h1", "n1"), part("a", "h2", "n2")]
    got = ctl.decide(labs, parts, [], set(), NODES, NOW)
    assert got.lab_status == {"a": {"phase": "Up", "message": "2 parts up"}}
    got = ctl.decide([lab("a", "Up")], parts, [], {"n2"}, NODES, NOW)
    assert got.lab_status["a"]["phase"] == "Degraded" and "a.h2" in got.lab_status["a"]["message"]
    assert got.removing == [] and got.delete_labs == [] and got.allocate == []


def test_a_lab_short_of_its_parts_is_left_to_its_writer_then_removed_after_the_grace():
    parts = [part("a", "h1", None, phase=None), part("a", "h2", None, phase=None)]
    young = ctl.decide([lab("a", None, age=5, hosts=3)], parts, [], set(), NODES, NOW,
                       grace=30)
    assert young.lab_status == {} and young.removing == [] and young.allocate == []
    old = ctl.decide([lab("a", None, age=31, hosts=3)], parts, [], set(), NODES, NOW,
                     grace=30)
    assert old.lab_status["a"]["phase"] == "Removing"
    # never placed: nothing of them built anywhere, so deleted at once, then the Lab
    assert sorted(old.delete_parts) == ["a.h1", "a.h2"] and old.delete_labs == ["a"]
    # a Lab set Removing: its placed parts removed by their agents, then deleted
    placed = [part("a", "h1", "n1", phase="Up"), part("a", "h2", "n2", phase="Removed")]
    got = ctl.decide([lab("a", "Removing")], placed, [], set(), NODES, NOW)
    assert got.removing == ["a.h1"] and got.delete_parts == ["a.h2"] and got.delete_labs == []
    done = [part("a", "h1", "n1", phase="Removed"), part("a", "h2", "n2", phase="Removed")]
    last = ctl.decide([lab("a", "Removing")], done, [], set(), NODES, NOW)
    assert sorted(last.delete_parts) == ["a.h1", "a.h2"] and last.delete_labs == ["a"]


def test_a_whole_lab_not_allocated_yet_is_allocated_however_old_those_begun_first():
    parts = [part(n, h, None, phase=None) for n in ("a", "b", "c") for h in ("h1", "h2")]
    parts[2] = part("b", "h1", "n1", phase=None)  # b's allocation begun by a pass that stopped
    labs = [lab("a", None, age=100), lab("b", None, age=50), lab("c", None, age=500)]
    got = ctl.decide(labs, parts, [], set(), NODES, NOW, grace=30)
    assert got.allocate == ["b", "c", "a"] and got.lab_status == {} and got.removing == []
    # refused by the controller (Failed, not allocated): left for down; a lab being removed
    # by down is not allocated
    labs = [lab("a", "Failed"), lab("b", None)]
    parts = [part("a", "h1", None, phase=None), part("a", "h2", None, phase=None),
             part("b", "h1", None, phase="Removing"), part("b", "h2", None, phase=None)]
    got = ctl.decide(labs, parts, [], set(), NODES, NOW)
    assert got.allocate == [] and got.lab_status == {} and got.delete_labs == []


def node(name: str, address: str, cpu: str = "2") -> dict:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "1Gi"},
                       "addresses": [{"type": "InternalIP", "address": address}]}}


def test_an_allocation_stopped_half_way_is_finished_the_same():
    from sfclab.realize.kinds import load_lab_dict
    from sfclab.realize.runtime import kubernetes as kube

    res = kube.resources(load_lab_dict({
        "name": "ka", "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1}, "h3": {"cpus": 1}},
        "nodes": {"a": {"kind": "host", "host": "h1"}, "b": {"kind": "router", "host": "h2"},
                  "c": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}]}))
    nodes = [node("n1", "198.19.255.11"), node("n2", "198.19.255.12"),
             node("n3", "198.19.255.13")]
    first = ctl.allocation(res.lab, res.parts, nodes, res.parts, [0, 1])
    assert sorted(first.placement.values()) == ["n1", "n2", "n3"]
    assert first.status["underlay"]["hosts"]["h1"].startswith(
        nodes[int(first.placement["h1"][1]) - 1]["status"]["addresses"][0]["address"] + "/")
    assert sorted(t["vni"] for t in first.status["tunnels"]) == \
        sorted({hl.vni for hl in first.plan.host_links})
    # two parts written (their Node and plan) before the pass stopped; another lab placed
    # since on the third Node's last CPU: the hosts written keep their Nodes, the plan is
    # the same where it can be
    written = [{**p, "spec": {**p["spec"], "node": first.placement[p["spec"]["host"]],
                              "plan": first.plans[p["spec"]["host"]]}} for p in res.parts[:2]]
    again = ctl.allocation(res.lab, written + res.parts[2:], nodes, written + res.parts[2:],
                           [0, 1])
    assert again.placement == first.placement and all(
        ctl.same(again.plans[h], first.plans[h]) for h in first.plans)
    assert again.status == first.status
    # nothing left for the third host: Failed with the reason
    other = part("zz", "h1", "x")
    other["spec"].update(node=first.placement["h3"], cpu=2, lab="zz")
    with pytest.raises(SpecError, match="does not fit the cluster's Nodes: host h3"):
        ctl.allocation(res.lab, written + res.parts[2:], nodes,
                       written + res.parts[2:] + [other], [0, 1])


def test_a_part_on_a_node_that_is_gone_is_deleted_without_waiting_for_its_agent():
    got = ctl.decide([lab("a", "Removing")], [part("a", "h1", "n9", phase="Removing")], [],
                     {"n9"}, NODES, NOW)
    assert got.delete_parts == ["a.h1"] and got.delete_labs == ["a"]


def test_parts_of_a_deleted_lab_or_of_another_lab_of_that_name_are_removed():
    parts = [part("a", "h1", "n1"), part("b", "h1", "n1", uid="old")]
    got = ctl.decide([lab("b", "Up", uid="new")], parts, [], set(), NODES, NOW)
    assert sorted(got.removing) == ["a.h1", "b.h1"]
    # a Lab of that name that is not sfclab's: its parts are left alone
    got = ctl.decide([lab("a", "Up", mark=False)], [part("a", "h1", "n1")], [], set(), NODES,
                     NOW)
    assert got.removing == [] and got.lab_status == {}


def test_requests_left_behind_are_deleted():
    def req(name: str, lab_name: str, phase: str | None, age: float) -> dict:
        return {"metadata": {"name": name, "creationTimestamp": stamp(NOW - age),
                             "labels": {LAB_LABEL: lab_name}},
                "status": {"phase": phase} if phase else {}}

    reqs = [req("fresh", "a", "Done", 5), req("stale", "a", "Done", 61),
            req("running", "a", "Running", 100), req("forgotten", "a", None, 901),
            req("orphan", "gone", None, 1)]
    got = ctl.decide([lab("a", "Up")], [part("a", "h1", "n1")], reqs, set(), NODES, NOW)
    assert sorted(got.delete_requests) == ["forgotten", "orphan", "stale"]


def test_liveness_is_judged_by_when_a_renewal_was_seen_here():
    clock = [100.0]
    seen = Liveness(clock=lambda: clock[0])

    def lease(holder: str, renewed: float) -> dict:
        return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                         "renewTime": micro_time(renewed)}}

    import time

    now = time.time()
    # n1's clock is an hour behind: its renewals still count, as they are seen to change
    seen.listed([lease("n1", now - 3600), lease("n2", now)])
    assert seen.expired() == {"n1"}  # first seen, it says it is an hour old
    clock[0] += 5
    seen.saw(lease("n1", now - 3595))
    assert seen.live("n1") and seen.live("n2")
    clock[0] += 14
    seen.saw(lease("n2", now + 19))
    assert seen.expired() == set()
    clock[0] += 2  # n1 not renewed for 16 s (as seen here)
    assert seen.expired() == {"n1"} and seen.live("n2")
    seen.saw(lease("n1", now), deleted=True)
    assert "n1" not in seen.seen


def test_a_request_larger_than_an_object_may_be_is_refused_before_it_is_sent():
    t = KubeTarget("h1", "198.19.0.1", "n1", "lab")
    assert request_object(t, "sfc-read", {"lab": "lab"})["metadata"]["generateName"] == \
        "lab.h1-"
    with pytest.raises(LabError, match="more than the"):
        request_object(t, "chain-make", {"plan": "x" * (1 << 20)})
