"""A plan's JSON (state files, the SSH agent's requests) is read into typed parts and written
back unchanged: ``Plan.functions`` holds :class:`FunctionPlan` entries and ``Plan.steering`` a
:class:`SteeringPlan`, and a plan saved by the code before they were typed (the file under
``data/``, made from ``scenarios/sfc-web.yaml`` at commit d4f5442) loads and is written back
byte for byte, so a lab brought up before still comes down."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from sfclab.plan.model import FunctionPlan, Plan
from sfclab.plan.steering import DirectionPlan, Hop, PathPlan, SteeringPlan
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for

ROOT = Path(__file__).resolve().parents[2]
OLD = Path(__file__).resolve().parent / "data" / "plan_sfc_web.json"


def _json(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` as it reads back from a file (tuples become lists)."""
    out: dict[str, Any] = json.loads(json.dumps(d))
    return out


def _shape(x: Any) -> Any:
    """The keys at every level and the JSON type of every leaf (values left out); an
    interface's ``offloads`` is a map of ethtool features, whichever the planner sets."""
    if isinstance(x, dict):
        return {k: "features" if k == "offloads" else _shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return sorted({json.dumps(_shape(v), sort_keys=True) for v in x})
    return type(x).__name__


def _typed(plan: Plan) -> None:
    assert isinstance(plan.steering, SteeringPlan)
    assert all(isinstance(f, FunctionPlan) for f in plan.functions.values())
    assert plan.functions["fw1"] == FunctionPlan("firewall", {"rules": []})
    assert plan.functions["nat"].kind == "nat" and plan.functions["nat"].params == {
        "outside": "dst"}
    sp = plan.steering
    assert all(isinstance(d, DirectionPlan) for d in sp.directions)
    assert all(isinstance(p, PathPlan) for d in sp.directions for p in d.paths)
    assert all(isinstance(h, Hop) for h in sp.hops)
    assert {d.chain for d in sp.directions} == {"web", "dns"}
    assert all(isinstance(a, tuple) for v in sp.attach.values() for a in v)
    assert all(isinstance(x, tuple) for x in sp.single_segment)


def test_a_scenario_plan_round_trips_through_json() -> None:
    lab = load_lab_dict(yaml.safe_load((ROOT / "scenarios/sfc-web.yaml").read_text()), "t")
    plan = plan_for(lab)
    _typed(plan)
    d = _json(plan.to_dict())
    back = Plan.from_dict(d)
    _typed(back)
    assert back == Plan.from_dict(_json(back.to_dict()))
    assert _json(back.to_dict()) == d
    # the same keys and leaf types as the plan the untyped code wrote for this scenario
    assert _shape(d) == _shape(json.loads(OLD.read_text()))


def test_a_plan_saved_before_the_types_loads_and_is_written_back_unchanged() -> None:
    old = json.loads(OLD.read_text())
    plan = Plan.from_dict(copy.deepcopy(old))
    _typed(plan)
    assert _json(plan.to_dict()) == old
    # its steering and functions as the old code read them (plain dicts) are what it holds
    assert plan.steering is not None and _json(plan.steering.to_dict()) == old["steering"]
    assert {n: _json(f.__dict__) for n, f in plan.functions.items()} == old["functions"]


def test_a_saved_plan_without_chains_keeps_steering_null() -> None:
    old = json.loads(OLD.read_text())
    old["steering"] = None
    plan = Plan.from_dict(copy.deepcopy(old))
    assert plan.steering is None
    assert _json(plan.to_dict()) == old
