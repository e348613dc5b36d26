"""An added instance's container is checked on the host it is placed on: the agent's
``container-check`` bounds its request, and the ``ssh`` runtime asks only the hosts that run one
(each with its own containers) and names the first refusal in the instances' order."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from sfclab.errors import LabError
from sfclab.hosts.ssh import SshTarget
from sfclab.live.runtime import agent_containers
from sfclab.live.runtime.ssh import SshLive
from sfclab.plan.chainadd import NewNode
from sfclab.plan.model import ContainerPlan
from sfclab.realize.state import LabState


def node(name: str, host: str, image: str | None) -> NewNode:
    c = None if image is None else asdict(ContainerPlan(name, f"sfclab-1-t-{name}",
                                                        f"sfclab:t:{name}", image))
    return NewNode(name, f"sfclab:t:{name}", "firewall", {}, name.split("-")[0], 0.1, 0, host,
                   "r1", "eth9", "eth0", "198.19.255.252/30", "198.19.255.254/30",
                   "198.19.255.253/30", container=c)


@pytest.mark.parametrize("req", [{}, {"containers": "x"},
                                 {"containers": [{}] * (agent_containers.MAX_CONTAINERS + 1)}])
def test_a_request_that_is_no_bounded_list_is_refused_before_any_check(req):
    with pytest.raises(LabError, match="expected a list of at most"):
        agent_containers.check(req)


def test_only_hosts_with_containers_are_asked_and_the_first_refusal_in_order_wins(monkeypatch):
    asked: dict[str, list[str]] = {}

    def call(_rt: Any, t: Any, verb: str, req: dict[str, Any], timeout: float
             ) -> dict[str, Any]:
        assert verb == "container-check"
        asked[t.host] = [c["node"] for c in req["containers"]]
        bad = [c["node"] for c in req["containers"] if c["image"] == "absent"]
        return {"problem": {"node": bad[0], "key": "name", "message": "no image"}} if bad \
            else {}

    monkeypatch.setattr(SshLive, "call", call)
    monkeypatch.setattr(SshLive, "targets", lambda self: {
        h: SshTarget(h, f"198.19.0.{k + 1}") for k, h in enumerate(("h1", "h2", "m4"))})
    monkeypatch.setattr(SshLive, "each", lambda self, ts, fn: [fn(t) for t in ts.values()])
    rt = SshLive(LabState("t"))
    nodes = [node("a-1", "h1", "img"), node("b-1", "h2", None), node("c-1", "m4", "absent"),
             node("d-1", "h1", "absent")]
    host, problem = rt.image_problem(nodes) or ("", None)
    assert asked == {"h1": ["a-1", "d-1"], "m4": ["c-1"]}  # h2 runs no container
    assert host == "m4" and problem is not None and problem.node == "c-1"
    assert (problem.key, problem.message) == ("name", "no image")
    assert rt.image_problem([node("b-1", "h2", None)]) is None
