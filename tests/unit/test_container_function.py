"""The ``container`` function kind without root or podman: its keys, what it asks of the node's
container in the plan (limits as for ``tun``, the queue's capability), and its refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sfclab.errors import SpecError
from sfclab.functions import get, kinds
from sfclab.functions.base import FunctionContext
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "container-lb.yaml"


def lab(fn: dict[str, Any]) -> dict[str, Any]:
    return {"name": "tc", "nodes": {"src": {"kind": "host"}, "fn": fn, "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "fn"]}, {"endpoints": ["fn", "dst"]}]}


def plan(fn: dict[str, Any]):
    return plan_for(load_lab_dict(lab(fn), "t.yaml"))


def test_container_is_a_function_kind() -> None:
    assert "container" in kinds() and get("container").runs_image
    assert not get("tun").runs_image


def test_limits_as_for_tun_become_the_containers_and_nfqueue_adds_its_capability() -> None:
    p = plan({"kind": "container", "image": "localhost/x:1", "cpu": 0.5, "memory": "64M",
              "reach": "nfqueue", "queue": 3})
    [c] = p.containers
    assert (c.node, c.image, c.cpus, c.memory) == ("fn", "localhost/x:1", 0.5, 64 << 20)
    assert c.caps == ["NET_ADMIN"]
    assert p.functions["fn"].kind == "container"
    routed = plan({"kind": "container", "image": {"name": "localhost/x:1", "cpus": 1}})
    assert routed.containers[0].cpus == 1 and routed.containers[0].caps == []


def test_a_container_function_without_image_names_the_node() -> None:
    with pytest.raises(SpecError) as e:
        plan({"kind": "container", "cpu": 0.5})
    assert "t.yaml" in str(e.value) and "nodes.fn" in str(e.value)
    assert "expected an 'image' key" in str(e.value)
    assert e.value.exit_status == 2


def test_a_limit_given_twice_is_refused_at_its_key() -> None:
    with pytest.raises(SpecError, match=r"nodes\.fn\.memory: a limit given twice"):
        plan({"kind": "container", "memory": "64M",
              "image": {"name": "localhost/x:1", "memory": "32M"}})


@pytest.mark.parametrize("keys, expected", [
    ({"reach": "tunnel"}, "reach"),
    ({"queue": 1}, "only with reach: nfqueue"),
    ({"reach": "nfqueue", "queue": 70000}, "queue"),
    ({"cpu": 0}, "cpu"),
    ({"exec": "x"}, "exec"),
])
def test_bad_keys_are_refused(keys: dict[str, Any], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        load_lab_dict(lab({"kind": "container", "image": "localhost/x:1", **keys}), "t.yaml")


def test_the_nfqueue_rule_queues_forwarded_packets_with_or_without_bypass() -> None:
    cls = get("container")
    ctx = FunctionContext(lab="t", node="fn", netns="t-fn", state_dir=Path("/nonexistent"),
                          interfaces=[])
    on = cls(ctx, cls.Params.model_validate({"reach": "nfqueue", "queue": 7})).ruleset()
    assert "-A FORWARD -m comment --comment sfclab-container -j NFQUEUE --queue-num 7 " \
           "--queue-bypass" in on
    off = cls(ctx, cls.Params.model_validate({"reach": "nfqueue", "bypass": False})).ruleset()
    assert "--queue-num 0\n" in off
    routed = cls(ctx, cls.Params.model_validate({}))
    assert routed.programs() == [] and routed.inspect() == {"reach": "routed"}


def test_the_example_lab_puts_the_container_in_a_chain() -> None:
    doc = yaml.safe_load(SCENARIO.read_text())
    p = plan_for(load_lab_dict(doc, str(SCENARIO)))
    assert p.functions["lb"].kind == "container"
    assert [c.node for c in p.containers] == ["lb"]
    assert p.containers[0].image == "localhost/sfclab/haproxy:latest"


def test_a_container_function_without_a_container_fails_its_check() -> None:
    """(A ``chain add`` file gives no ``image``: the instance is refused before it is made.)"""
    cls = get("container")
    bare = FunctionContext(lab="t", node="fn", netns="t-fn", state_dir=Path("/nonexistent"),
                           interfaces=[])
    with pytest.raises(SpecError, match="image: a container function runs its image"):
        cls(bare, cls.Params.model_validate({})).check()
    from dataclasses import replace
    cls(replace(bare, image="localhost/x:1"), cls.Params.model_validate({})).check()


def test_the_function_context_carries_the_nodes_image() -> None:
    from sfclab.realize.functions import context
    from sfclab.realize.state import LabState

    p = plan({"kind": "container", "image": "localhost/x:1"})
    assert context(LabState("tc"), p, "fn").image == "localhost/x:1"
    assert context(LabState("tc"), p, "src").image is None
