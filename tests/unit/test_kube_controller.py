"""The Kubernetes controller's and agents' pure parts (no cluster): what one pass of the
controller decides from what it read, the agents' liveness by their Leases as this machine saw
them, and a request's bound."""

from __future__ import annotations

import pytest

from sfclab.errors import LabError
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
        mark: bool = True) -> dict:
    return {"metadata": {"name": name, "uid": uid, "creationTimestamp": stamp(NOW - age),
                         "labels": {**MANAGED, LAB_LABEL: name} if mark else {}},
            "status": {"phase": phase} if phase else {}}


def part(lab_name: str, host: str, node: str, phase: str | None = "Up", uid: str = "u1",
         gen: int = 1) -> dict:
    return {"metadata": {"name": f"{lab_name}.{host}", "generation": gen,
                         "labels": {**MANAGED, LAB_LABEL: lab_name},
                         "ownerReferences": [{"kind": "Lab", "uid": uid}]},
            "spec": {"lab": lab_name, "host": host, "node": node},
            "status": {"phase": phase, "observedGeneration": gen} if phase else {}}


NODES = {"n1", "n2"}


def test_a_lab_whose_parts_are_up_is_up_and_degraded_when_an_agent_is_gone():
    labs = [lab("a", "Pending")]
    parts = [part("a", "h1", "n1"), part("a", "h2", "n2")]
    got = ctl.decide(labs, parts, [], set(), NODES, NOW)
    assert got.lab_status == {"a": {"phase": "Up", "message": "2 parts up"}}
    got = ctl.decide([lab("a", "Up")], parts, [], {"n2"}, NODES, NOW)
    assert got.lab_status["a"]["phase"] == "Degraded" and "a.h2" in got.lab_status["a"]["message"]
    assert got.removing == [] and got.delete_labs == []


def test_a_lab_without_a_phase_is_left_to_its_writer_then_removed_after_the_grace():
    parts = [part("a", "h1", "n1", phase="Up"), part("a", "h2", "n2", phase=None)]
    young = ctl.decide([lab("a", None, age=5)], parts, [], set(), NODES, NOW, grace=30)
    assert young.lab_status == {} and young.removing == []
    old = ctl.decide([lab("a", None, age=31)], parts, [], set(), NODES, NOW, grace=30)
    assert old.lab_status["a"]["phase"] == "Removing"
    assert sorted(old.removing) == ["a.h1", "a.h2"] and old.delete_labs == []
    # its parts removed by their agents: the parts, then the Lab, deleted
    done = [part("a", "h1", "n1", phase="Removed"), part("a", "h2", "n2", phase="Removed")]
    last = ctl.decide([lab("a", "Removing")], done, [], set(), NODES, NOW)
    assert sorted(last.delete_parts) == ["a.h1", "a.h2"] and last.delete_labs == ["a"]


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
