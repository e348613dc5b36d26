"""The Trellis scenario's shortbridge variant carries traffic (``scenarios/trellis-forwarding.yaml``):
three hosts, the node under test forwarding between two shortbridged tunnels.  The tunnel end
hands each frame into the receiving node by ``bpf_redirect_peer``, which skips the veth's XDP: the
default receiver (``--sink kernel``) must count it at tcx ingress too, or it counts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sfclab.spec.experiment import expand, load_experiment

pytestmark = pytest.mark.serial  # measures packet rates

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "trellis-forwarding.yaml"
#: a functional floor, not a speed goal: the chain forwards tens of kpps here when idle
NDR_FLOOR_PPS = 5_000


def variant_lab(name: str) -> dict:
    """The lab ``sfclab run`` makes for the scenario's variant ``name``."""
    points = expand(load_experiment(SCENARIO))
    return next(p.lab for p in points if p.params.get("variant") == name)


def test_the_scenarios_shortbridge_lab_carries_traffic(sfcgen, running_lab, lab_name, capsys):
    from sfclab.cli import main

    lab_d = variant_lab("shortbridge")
    assert {lk["attach"] for lk in lab_d["links"]} == {"shortbridge"}
    lab = running_lab({**lab_d, "name": lab_name})
    assert main(["traffic", "rate", lab.name, "--rates", "10k", "--duration", "1",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    point = d["points"][0]
    assert point["received"] > 0.9 * point["sent"] > 0, point
    assert main(["traffic", "ndr", lab.name, "--size", "64", "--trial", "0.5", "--method",
                 "binary", "--max-rate", "50k", "--precision", "10", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    ndr = d["ndr_pps"] or d["metrics"]["ndr_lower_bound_pps"]
    assert ndr > NDR_FLOOR_PPS, d["metrics"]
