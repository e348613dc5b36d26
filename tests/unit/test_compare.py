"""Results compared side by side (sfclab.experiments.compare): the ratio of two sides with its
95 % Fieller interval on known numbers, the environment differences, the published band beside
our ratio, the lab a side ran on, and the same comparison from ``sfclab report --compare`` and
``GET /api/results/compare``."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from scipy import stats as st

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.experiments.compare import compare, environment_differences
from sfclab.experiments.stats import summarize
from sfclab.experiments.store import Store
from sfclab.realize.state import LabState
from tests.webclient import api_client

#: throughput (bit/s) per chain length and repetition, before and after a change
BEFORE = {2: [10e9, 11e9, 12e9], 4: [8e9, 8.5e9, 9e9]}
AFTER = {2: [20e9, 22e9, 24e9], 4: [8e9, 8.5e9, 9e9]}
ENV_BEFORE = {"commit": "aaaa", "load": [0.1, 0.2, 0.3], "kernel": {"release": "6.18.0"},
              "cores": 2}
ENV_AFTER = {"commit": "bbbb+dirty", "load": [1.5, 0.2, 0.3], "kernel": {"release": "6.18.0"},
             "cores": 2}


def _experiment(store: Store, name: str, values: dict[int, list[float]],
                env: dict[str, Any], lab: str) -> int:
    exp = store.register_experiment(name, name, {"name": name, "sweep": {
        "lab.chain.length": list(values)}}, 1, source=f"/x/{name}.yaml")
    store.add_environment(exp, env)
    points = [SimpleNamespace(key=f"{n}-{i}", params={"lab.chain.length": n}, repetition=i,
                              lab={"name": lab, "chain": {"length": n}}, measure={},
                              lab_hash="h") for n, vs in values.items() for i in range(len(vs))]
    store.add_runs(exp, points)
    for r in store.runs(exp):
        n, i = r.params["lab.chain.length"], r.repetition
        store.mark_running(r.id)
        store.finish_run(r.id, {"throughput_bps": values[n][i], "retransmits": 1.0})
    return exp


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cmp.db"
    with Store(path) as store:
        _experiment(store, "before", BEFORE, ENV_BEFORE, "cmpa")
        _experiment(store, "after", AFTER, ENV_AFTER, "cmpb")
    return path


def fieller(a: list[float], b: list[float]) -> tuple[float, float]:
    """The 95 % Fieller interval of mean(a)/mean(b), solved here from its quadratic."""
    sa, sb = summarize(a), summarize(b)
    va, vb = sa.std ** 2 / sa.n, sb.std ** 2 / sb.n
    r = sa.mean / sb.mean
    df = (va + r * r * vb) ** 2 / (va ** 2 / (sa.n - 1) + (r * r * vb) ** 2 / (sb.n - 1))
    t = st.t.ppf(0.975, df)
    qa, qb, qc = sb.mean ** 2 - t * t * vb, -2 * sa.mean * sb.mean, sa.mean ** 2 - t * t * va
    root = math.sqrt(qb * qb - 4 * qa * qc)
    return (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)


def test_ratio_and_its_interval_on_known_numbers(db: Path) -> None:
    with Store(db, readonly=True) as store:
        c = compare(store, ["before", "after"], findings="/nonexistent")
    tp = next(m for m in c["metrics"] if m["metric"] == "throughput_bps")
    assert tp["y_label"] == "throughput (Gbit/s)" and c["x_label"] == "chain length"
    assert [s["mean"] for s in tp["series"]] == [pytest.approx([11, 8.5]),
                                                 pytest.approx([22, 8.5])]
    (r,) = tp["ratios"]
    assert r["x"] == [2, 4] and r["ratio"] == pytest.approx([2.0, 1.0])
    assert (r["low"][0], r["high"][0]) == pytest.approx(fieller(AFTER[2], BEFORE[2]))
    assert (r["low"][1], r["high"][1]) == pytest.approx(fieller(AFTER[4], BEFORE[4]))
    assert r["low"][0] > 1.5 and r["low"][1] < 1 < r["high"][1]


def test_environment_differences_list_only_what_differs(db: Path) -> None:
    with Store(db, readonly=True) as store:
        c = compare(store, ["1", "2"], findings="/nonexistent")
    assert c["environment"] == [
        {"key": "commit", "label": "source commit", "values": ["aaaa", "bbbb+dirty"],
         "shown": ["aaaa", "bbbb+dirty"]},
        {"key": "load", "label": "load average (1, 5, 15 min)",
         "values": [[0.1, 0.2, 0.3], [1.5, 0.2, 0.3]], "shown": ["0.1, 0.2, 0.3", "1.5, 0.2, 0.3"]}]
    assert environment_differences([{"a": {"b": 1}}, {"a": {"b": 1}, "c": 2}]) == [
        {"key": "c", "label": "c", "values": [None, 2], "shown": ["–", "2"]}]
    (d,) = environment_differences([{"kernel": {"release": "6.1.0"}, "memory_bytes": 2 ** 31},
                                    {"kernel": {"release": "6.12.0"}, "memory_bytes": 2 ** 31}])
    assert (d["label"], d["shown"]) == ("kernel", ["6.1.0", "6.12.0"])


#: two repetitions, one near 0: the mean's interval and Fieller's set of the ratio reach below 0
NOISY = {2: [0.5e9, 4e9], 3: [1e9, 1.2e9]}
STEADY = {2: [2e9, 2.1e9], 3: [1e9, 1.1e9]}


def test_no_interval_of_a_rate_or_of_a_ratio_of_rates_goes_below_zero(tmp_path: Path) -> None:
    with Store(tmp_path / "n.db") as store:
        _experiment(store, "steady", STEADY, ENV_BEFORE, "n1")
        _experiment(store, "noisy", NOISY, ENV_BEFORE, "n2")
        c = compare(store, ["steady", "noisy"], findings="/nonexistent")
    tp = next(m for m in c["metrics"] if m["metric"] == "throughput_bps")
    noisy = tp["series"][1]
    t = summarize(NOISY[2])
    assert t.ci_low < 0  # Student's t reaches below 0 ...
    assert noisy["ci_low"][0] == 0.0  # ... the drawn interval of a rate does not
    assert noisy["ci_high"][0] == pytest.approx(t.ci_high / 1e9)
    (r,) = tp["ratios"]
    lo, hi = fieller(NOISY[2], STEADY[2])
    assert lo < 0 < hi  # Fieller's set reaches below 0: the noisy side's own interval does
    assert r["low"][0] == 0.0 and r["high"][0] == pytest.approx(hi)
    assert r["low"][1] > 0 and (r["low"][1], r["high"][1]) == pytest.approx(
        fieller(NOISY[3], STEADY[3]))
    # the retransmits (a count) are cut at 0 too; a metric that may be negative is not
    from sfclab.experiments.units import nonnegative
    assert nonnegative("retransmits") and nonnegative("latency_us_p99")
    assert not nonnegative("delta")


def test_runs_of_one_experiment_and_where_they_ran(db: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path / "state"))
    LabState("cmpb").begin({}, "", "/x/lab.yaml")
    LabState("cmpb").set_meta(status="up")
    with Store(db, readonly=True) as store:
        runs = [r.id for r in store.runs(2)]
        c = compare(store, [f"after:{runs[0]}-{runs[2]}", f"after:{runs[3]},{runs[4]}"],
                    findings="/nonexistent")
        sides = c["sides"]
        assert sides[0]["runs"] == runs[:3] and sides[1]["runs"] == runs[3:5]
        assert sides[0]["ran_on"] == {"labs": [{"name": "cmpb", "up": True}],
                                      "experiment_file": "/x/after.yaml"}
        assert compare(store, ["1", "2"], findings="/no")["sides"][0]["ran_on"]["labs"] == [
            {"name": "cmpa", "up": False}]
        for bad in (["1"], ["1", "2:9-3"], ["1", "2:x"], ["1", "2:999"], ["1", "a/b"]):
            with pytest.raises(SpecError) as e:
                compare(store, bad)
            assert e.value.place == "RUN"


def test_published_band_beside_our_ratio(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "findings.yaml"
    f.write_text(textwrap.dedent("""\
        tolerance: 0.1
        findings:
          - id: X1
            study: P
            claim: chain length 2 doubles chain length 4
            published: "about 1.3"
            db: before
            metric: throughput_bps
            a: {lab.chain.length: 2}
            b: {lab.chain.length: 4}
            expect: [1.2, 1.4]
          - id: X2
            study: P
            claim: not ours
            published: "x"
            db: elsewhere
            metric: throughput_bps
            a: {lab.chain.length: 2}
            b: {lab.chain.length: 4}
            expect: [1, 2]
        """))
    with Store(db, readonly=True) as store:
        c = compare(store, ["before", "after"], findings=f)
    (p,) = c["published"]
    assert p["id"] == "X1" and p["band"] == pytest.approx([1.08, 1.54])
    assert p["ratio"] == pytest.approx(11 / 8.5) and p["low"] < p["ratio"] < p["high"]
    assert p["verdict"]


def test_the_command_line_compares_with_json_and_text(db: Path, capsys: Any) -> None:
    assert main(["report", "--db", str(db), "--compare", "before", "after", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert [s["label"] for s in c["sides"]] == ["before (id 1)", "after (id 2)"]
    assert c["metrics"][0]["ratios"][0]["ratio"] == pytest.approx([2.0, 1.0])
    assert main(["report", "--db", str(db), "--compare", "1", "2", "--metric",
                 "throughput_bps"]) == 0
    text = capsys.readouterr().out
    assert "throughput against chain length (throughput (Gbit/s))" in text
    assert "2× (" in text and "| source commit | aaaa | bbbb+dirty |" in text
    assert "| load average (1, 5, 15 min) | 0.1, 0.2, 0.3 | 1.5, 0.2, 0.3 |" in text
    assert "throughput_bps" not in text and "[0.1" not in text
    assert main(["report", "--db", str(db), "--compare", "1"]) == 2
    assert "expected 2 to 8" in capsys.readouterr().err
    assert main(["report", "--db", str(db), "--compare", "1", "2", "--metric", "x"]) == 2


@pytest.fixture
def client(db: Path) -> Iterator[TestClient]:
    with api_client(db=str(db)) as c:
        yield c


def test_the_api_compares(client: TestClient, db: Path) -> None:
    r = client.get("/api/results/compare", params=[("side", "before"), ("side", "after")])
    assert r.status_code == 200, r.text
    c = r.json()
    assert c["metrics"][0]["ratios"][0]["ratio"] == pytest.approx([2.0, 1.0])
    assert c["environment"][0]["key"] == "commit"
    assert client.get("/api/results/compare", params=[("side", "1")]).status_code == 422
    bad = client.get("/api/results/compare", params=[("side", "1"), ("side", "2:x")])
    assert bad.status_code == 422 and bad.json()["place"] == "RUN"
    assert client.get("/api/results/compare",
                      params=[("side", "1"), ("side", "nope")]).status_code == 404
