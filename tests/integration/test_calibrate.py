"""``sfclab traffic calibrate``: the generator-to-receiver ceiling and latency floor over a
direct link of a temporary lab (removed afterwards), stored in the state directory, read by the
measurements that follow (``generator_bound``), kept by experiments; bad input exits 2 and
makes nothing (issue 23, item 3)."""

from __future__ import annotations

import json

import pytest

from tests.integration.labtools import nothing_left

from sfclab.cli import main
from sfclab.realize import lifecycle
from sfclab.spec.measurement import RateRequest
from sfclab.traffic import calibrate, measure


def _labs() -> set[str]:
    return {d["name"] for d in lifecycle.listing()}


@pytest.mark.serial  # times or counts what the machine's load changes
def test_calibrate_measures_stores_and_removes_its_lab(sfcgen, capsys):
    before = _labs()
    assert main(["traffic", "calibrate", "--sizes", "64,1518", "--duration", "0.5",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["sizes"]) == {"64", "1518"} and d["lab"] == "temporary"
    for c in d["sizes"].values():
        assert 0 < c["ceiling_pps"] <= c["sent_pps"] * (1 + 1e-9)
    assert d["sizes"]["64"]["ceiling_pps"] > 10_000
    floor = d["latency_floor_us"]
    assert floor["size"] == 64 and 0 < floor["p50"] <= floor["p99"] <= floor["max"]
    assert calibrate.stored() == {k: v for k, v in d.items() if k != "stored_in"}
    assert _labs() == before  # the temporary lab is gone, and everything it made
    assert d["temporary_lab"].startswith("cal") and nothing_left(d["temporary_lab"])


@pytest.mark.parametrize(("argv", "place"), [
    (["--sizes", "40"], "--sizes"), (["--sizes", "64,9000"], "--sizes"),
    (["--sizes", "sixty"], "--sizes"), (["--from", "src"], "--from"),
    (["--duration", "0"], "--duration")])
def test_bad_input_exits_2_with_the_place_and_makes_nothing(argv, place, capsys):
    before = _labs()
    assert main(["traffic", "calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sfclab: error: {place}:"), err
    assert _labs() == before


def test_a_lab_without_the_named_nodes_exits_2(running_lab, capsys):
    lab = running_lab({"chain": {"length": 2}})
    assert main(["traffic", "calibrate", lab.name, "--from", "nope"]) == 2
    assert "--from: expected a node of lab" in capsys.readouterr().err
    assert main(["traffic", "calibrate", lab.name, "--to", "src"]) == 2  # src -> src
    assert main(["traffic", "calibrate", lab.name, "--sizes", "1519"]) == 2
    assert "--sizes" in capsys.readouterr().err


@pytest.mark.serial  # times or counts what the machine's load changes
def test_a_rate_above_ninety_percent_of_the_ceiling_is_generator_bound(sfcgen, running_lab):
    lab = running_lab({"chain": {"length": 2}})
    cal = calibrate.calibrate(calibrate.CalibrationRequest(sizes=[64], lab=lab.name,
                                                           duration_s=0.5))
    assert cal["lab"] == lab.name
    top = cal["sizes"]["64"]["ceiling_pps"]
    m = measure.run(lab.name, RateRequest(size=64, duration=0.5,
                                          rates=[0.5 * top, 0.95 * top])).to_dict()
    assert [p["generator_bound"] for p in m["points"]] == [False, True]
    assert m["environment"]["calibration"]["sizes"]["64"]["ceiling_pps"] == top


@pytest.mark.serial  # times or counts what the machine's load changes
def test_an_experiment_calibrates_once_and_keeps_it(sfcgen, tmp_path, capsys, lab_name):
    from sfclab.experiments.store import Store

    f = tmp_path / "exp.yaml"
    f.write_text(f"""
name: cal-e2e
lab: {{name: {lab_name}, chain: {{length: 2}}}}
measure: {{type: rate, rates: [10k], size: 128, duration: 0.5}}
sweep:
  measure.flows: [1, 2]
""")
    db = tmp_path / "r.db"
    assert main(["run", str(f), "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["done"] == 2
    with Store(db, readonly=True) as store:
        exp = store.experiments()[0]
        envs = store.environments(exp.id)
        assert len(envs) == 1  # one invocation, one calibration
        cal = envs[0]["calibration"]
        assert list(cal["sizes"]) == ["128"] and cal["sizes"]["128"]["ceiling_pps"] > 0
        assert cal["lab"] == "temporary"
        # each run's own environment carries the calibration its trials were flagged against
        for r in store.runs(exp.id):
            run_env = store.run_environment(r.id)
            assert run_env["calibration"]["measured_at"] == cal["measured_at"]
