"""Findings as data (scenarios/findings.yaml): the verdict rule, the checks of the file, the
page's marked blocks filled from a small results database, and the choice of files that get
more repetitions while a comparison is not separated."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.findings import compare, derived, load_findings
from sfclab.experiments.page import fill
from sfclab.experiments.reprorun import Record, more_repetitions, render_environment
from sfclab.experiments.store import Store
from sfclab.realize.kinds import load_lab_dict
from sfclab.spec.experiment import expand, load_experiment

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- the file

def _write(tmp_path, text):
    p = tmp_path / "f.yaml"
    p.write_text(text)
    return p


GOOD = """
findings:
  - {id: X1, study: T, claim: "a beats b", published: "2x", db: d, metric: m, unit: kpps,
     a: {variant: a}, b: {variant: b}, expect: [1.5, 3]}
  - {id: X2, study: T, claim: "c equals b", db: d, metric: m,
     a: {variant: c}, b: {variant: b}, test: equivalent, margins: [0.9, 1.1]}
tables:
  - {id: tab, db: d, metric: m, unit: kpps, rows: variant}
"""


@pytest.mark.parametrize("text, place", [
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, expect: [2, 1]}]",
     "findings[0].expect"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}}]", "findings[0]"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, expect: [1, 2],"
     " colour: red}]", "findings[0].colour"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, expect: [1, 2],"
     " unit: furlongs}]", "findings[0].unit"),
    ("tables: [{id: t, db: d, metric: m, rows: r}, {id: t, db: d, metric: m, rows: r}]",
     "tables[1].id"),
    ("chapters: []", ".chapters"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, test: same}]",
     "findings[0].test"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, test: equivalent,"
     " margins: [1.05, 1.2]}]", "findings[0].margins"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, test: equivalent}]",
     "findings[0]"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, expect: [1, 2],"
     " tolerance: 1.5}]", "findings[0].tolerance"),
    ("tolerance: -0.1", "tolerance"),
    ("findings: [{id: X, study: T, claim: c, db: d, metric: m, a: {}, b: {}, test: more,"
     " not_testable: [x]}]", "findings[0].not_testable"),
])
def test_bad_findings_file_names_the_place(tmp_path, text, place):
    with pytest.raises(SpecError) as e:
        load_findings(_write(tmp_path, text))
    assert place in str(e.value) and "f.yaml" in str(e.value)


def _files_of(db: str) -> list[str]:
    one = ROOT / "scenarios" / f"{db}.yaml"
    if one.is_file():
        return [str(one)]
    return sorted(glob.glob(str(ROOT / "scenarios" / f"*{db}-*.yaml")))


def test_every_finding_selects_one_point_of_its_scenarios():
    """Each finding's a and b name exactly one sweep point of the files run into its
    database, and each table's rows/cols are parameters of those files."""
    f = load_findings(ROOT / "scenarios" / "findings.yaml")
    points: dict[str, list[tuple[str, dict]]] = {}
    for db in f.dbs():
        files = _files_of(db)
        assert files, f"no scenario file runs into {db}.db"
        for path in files:
            exp = load_experiment(path)
            points.setdefault(db, []).extend(
                (exp.name, p.params) for p in expand(exp, load_lab_dict) if p.repetition == 0)
    for fd in f.findings:
        for side, db in ((fd.a, fd.db), (fd.b, fd.b_db or fd.db)):
            hits = [p for name, p in points[db]
                    if all(True if k == "metric" else (name == v) if k == "experiment" else
                           json.dumps(p.get(k), sort_keys=True) == json.dumps(v, sort_keys=True)
                           for k, v in side.items())]
            assert len(hits) == 1, (fd.id, side, len(hits))
    for t in f.tables:
        params = {k for _, p in points[t.db] for k in {**p, **derived(p)}} | {"experiment"}
        assert set(t.row_keys) | set(t.col_keys) <= params, t.id


# ----------------------------------------------------------------- a small database

def _db(path: Path, values: dict[str, list[float]], source: str = "/s/d.yaml") -> None:
    with Store(path) as s:
        eid = s.register_experiment("d", "h", {}, 1, source)
        pts = [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i, lab={},
                               measure={}, lab_hash="x")
               for v, xs in values.items() for i in range(len(xs))]
        s.add_runs(eid, pts)
        for r in s.runs(eid):
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, {"m": values[r.params["variant"]][r.repetition] * 1e3},
                         ended=110.0)


PAGE = """# page
hand-written why
<!-- repro:begin findings -->
old summary
<!-- repro:end -->
<!-- repro:begin finding X1 -->
old X1
<!-- repro:end -->
text kept
<!-- repro:begin table tab -->
old table
<!-- repro:end -->
<!-- repro:begin table other -->
kept: its database was not run
<!-- repro:end -->
<!-- repro:begin environment -->
old env
<!-- repro:end -->
"""


def test_fill_rewrites_only_the_blocks(tmp_path):
    f = load_findings(_write(tmp_path, GOOD + "  - {id: other, db: missing, metric: m, "
                                              "rows: variant}\n"))
    _db(tmp_path / "d.db", {"a": [200, 210, 205], "b": [100, 104, 102], "c": [101, 60, 140]})
    rec = Record(tmp_path, clock=iter([1000.0, 1010.0, 1100.0, 1130.0]).__next__,
                 load=lambda: [1.5, 1.0, 0.5])
    rec.begin({"kernel": {"release": "6.18"}, "cores": 2, "versions": {"iperf3": "3.12"},
               "commit": "abc"})
    rec.group("d", "start")
    rec.round("d", "/s/d.yaml", 5, ["X1"])
    rec.group("d", "end")
    rec.finish()
    out = fill(PAGE, f, tmp_path, lambda: render_environment(rec), run_id="r1", partial=True)
    assert "hand-written why" in out and "text kept" in out
    assert "old summary" not in out and "old X1" not in out and "old table" not in out
    assert "kept: its database was not run" in out
    x1 = out.split("repro:begin finding X1 run=r1 -->\n")[1].split("<!--")[0]
    assert "verdict **holds**" in x1 and "95 % interval 1.91–2.11" in x1
    assert "205 ± " in x1 and "102 ± " in x1
    summary = out.split("repro:begin findings run=r1 -->\n")[1].split("<!--")[0]
    assert "| X1 |" in summary and "| holds |" in summary
    assert "| X2 |" in summary and "| inconclusive |" in summary
    assert "within 0.9–1.1 (TOST)" in summary
    assert "of the 2 scored, 1 hold, 0 do not hold and 1 are inconclusive" in summary
    table = out.split("repro:begin table tab run=r1 -->\n")[1].split("<!--")[0]
    assert "| a | 205 ± " in table and "| c | 100 ± " in table and "†" in table
    env = out.split("repro:begin environment run=r1 -->\n")[1].split("<!--")[0]
    assert "kernel 6.18" in env and "2 min 10 s" in env and "| d | 1 min 30 s |" in env
    assert "d → 5 (X1)" in env and "1.5 1.0 0.5" in env
    # filling again gives the same page (markers kept)
    assert fill(out, f, tmp_path, lambda: render_environment(rec), run_id="r1",
                partial=True) == out
    assert "<!-- repro:begin finding X1 run=r1 -->" in out
    assert "<!-- repro:begin table other -->" in out  # kept, unstamped: not this run's


def test_page_naming_an_unknown_finding_is_refused(tmp_path):
    f = load_findings(_write(tmp_path, GOOD))
    with pytest.raises(SpecError, match="Z9"):
        fill("<!-- repro:begin finding Z9 -->\n<!-- repro:end -->\n", f, tmp_path, run_id="r")


def test_files_are_brought_up_to_the_repetitions_planned_from_the_pilot(tmp_path):
    f = load_findings(_write(tmp_path, GOOD))
    _db(tmp_path / "d.db", {"a": [150, 260], "b": [100, 104], "c": [101, 103]})
    with Store(tmp_path / "d.db", readonly=True) as s:
        c = compare(s, f.findings[0])
    assert c.verdict == "inconclusive" and c.sources == ("/s/d.yaml",)
    plans: dict = {}
    more = more_repetitions(f, tmp_path, ["d"], budget_s=1000, plans=plans)
    # X1: a's spread (cv 0.38) against a range of half log-width 0.35 needs more than the cap
    # of 10 (power 0.55 there); X2 (c against b, cv 0.03) needs 3 for its margins (2 would
    # give power 0.71: t on 2 degrees of freedom)
    assert plans["X1"]["repetitions"] == 10 and plans["X1"]["reason"].startswith("the cap")
    assert plans["X1"]["power"] == pytest.approx(0.554, abs=0.002)
    assert plans["X2"]["repetitions"] == 3 and plans["X2"]["pilot"] == 2
    # 6 runs of 10 s over 2 repetitions: 30 s per repetition, 8 more, 20 % margin
    assert [(p.file, p.repetitions, p.findings) for p in more] == [("/s/d.yaml", 10,
                                                                    ("X1", "X2"))]
    assert more[0].estimate_s == pytest.approx(288)
    # the plan is kept: data that would now plan otherwise changes nothing
    plans["X1"]["repetitions"] = 6
    again = more_repetitions(f, tmp_path, ["d"], budget_s=1000, plans=plans)
    assert [p.repetitions for p in again] == [6]
    assert more_repetitions(f, tmp_path, ["d"], budget_s=100, plans={}) == []  # no fit
    assert more_repetitions(f, tmp_path, ["other"], budget_s=1000) == []  # not this group


def test_a_side_without_an_interval_asks_for_repetitions_and_or_metric_fills_tables(tmp_path):
    f = load_findings(_write(tmp_path, GOOD.replace("rows: variant}", "rows: variant, "
                                                    "or_metric: m2}")))
    _db(tmp_path / "d.db", {"a": [200, 210], "b": [100, 104], "c": [100]})
    # X2: c has one repetition, no variance to plan from: the cap
    plans: dict = {}
    more = more_repetitions(f, tmp_path, ["d"], budget_s=1e6, plans=plans)
    assert plans["X2"]["repetitions"] == 10 and "without a variance" in plans["X2"]["reason"]
    assert [(p.repetitions, p.findings) for p in more] == [(10, ("X2",))]
    with Store(tmp_path / "d.db") as s:
        run = s.runs(status="done")[0]
        s.finish_run(run.id, {"m2": 7e3})  # a run that only has the other metric
    out = fill("<!-- repro:begin table tab -->\n<!-- repro:end -->\n", f, tmp_path, run_id="r")
    assert "| a | 108 ± " in out  # (7 + 210) / 2: the run without m counted by m2


SEARCHED = """
findings:
  - {id: X1, study: T, claim: "a beats b", published: "2x", db: d, metric: ndr_pps,
     unit: kpps, a: {variant: a}, b: {variant: b}, expect: [1.5, 3]}
  - {id: X2, study: T, claim: "a beats c", db: d, metric: ndr_pps, unit: kpps,
     a: {variant: a}, b: {variant: c}, test: more}
"""


def _searched_db(path: Path, runs: dict[str, list[tuple[str, float]]]) -> None:
    """A database of NDR searches: per variant, (metric name, kpps) per repetition."""
    with Store(path) as s:
        eid = s.register_experiment("d", "h", {}, 1, "/s/d.yaml")
        pts = [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i, lab={},
                               measure={}, lab_hash="x")
               for v, xs in runs.items() for i in range(len(xs))]
        s.add_runs(eid, pts)
        for r in s.runs(eid):
            name, kpps = runs[r.params["variant"]][r.repetition]
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, {name: kpps * 1e3}, ended=110.0)


def test_a_search_at_its_ceiling_is_a_censored_side_on_the_page(tmp_path):
    f = load_findings(_write(tmp_path, SEARCHED))
    # a's second search reached the top of its range: a lower bound, not the chain's NDR
    _searched_db(tmp_path / "d.db", {
        "a": [("ndr_pps", 1000), ("ndr_lower_bound_pps", 1010), ("ndr_pps", 990)],
        "b": [("ndr_pps", 400), ("ndr_pps", 410), ("ndr_pps", 395)],
        "c": [("ndr_lower_bound_pps", 1000), ("ndr_lower_bound_pps", 1005),
              ("ndr_lower_bound_pps", 995)]})
    with Store(tmp_path / "d.db", readonly=True) as s:
        x1, x2 = compare(s, f.findings[0]), compare(s, f.findings[1])
    assert x1.censored == "a" and x1.a.n == 3  # the bound is counted at its value
    # the ratio (about 2.5) lies inside 1.35-3.3, but a censored a may lie above: never holds
    assert x1.verdict == "inconclusive" and x1.interval.format().startswith("≥ ")
    assert x2.censored == "ab" and x2.verdict == "not testable here"
    page = fill("<!-- repro:begin findings -->\n<!-- repro:end -->\n"
                "<!-- repro:begin finding X1 -->\n<!-- repro:end -->\n", f, tmp_path, run_id="r")
    assert "| X1 | a beats b | a ≥ 1e+03 ± 25 vs b 402 ± " in page
    assert "a ≥ 1e+03 ± 25 kpps (n = 3) against b 402" in page.split("finding X1")[1]
    assert "1 are not testable here" in page


def test_a_peak_at_the_top_of_its_offered_grid_is_censored(tmp_path):
    """O1's old design: both sides passed the grid's top offered rate (400 kpps)."""
    f = load_findings(_write(tmp_path, SEARCHED.replace("ndr_pps", "max_received_pps")))
    with Store(tmp_path / "d.db") as s:
        eid = s.register_experiment("d", "h", {}, 1, "/s/d.yaml")
        got = {"a": [399.5, 400.0, 399.9], "b": [200.0, 210.0, 190.0], "c": [398.0, 400.0, 399.0]}
        pts = [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i, lab={},
                               measure={"type": "rate", "rates": [100e3, 200e3, 400e3]},
                               lab_hash="x") for v, xs in got.items() for i in range(len(xs))]
        s.add_runs(eid, pts)
        for r in s.runs(eid):
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, {"max_received_pps": got[r.params["variant"]][r.repetition] * 1e3},
                         ended=110.0)
    with Store(tmp_path / "d.db", readonly=True) as s:
        x1, x2 = compare(s, f.findings[0]), compare(s, f.findings[1])
    assert x1.censored == "a" and x1.verdict == "inconclusive"  # 2x, but a may lie above
    assert x2.censored == "ab" and x2.verdict == "not testable here"


def test_a_total_metric_is_the_per_pair_search_rate_times_the_pairs(tmp_path):
    """O3: a search of several pairs reports the rate each pair got (its loss goal held in
    every pair); the node's capacity is that times the pairs, a bound times the pairs too."""
    f = load_findings(_write(tmp_path, SEARCHED.replace("metric: ndr_pps",
                                                        "metric: total.ndr_pps")))
    pairs = {"a": ["vm1:dst", "vm2:dst", "vm3:dst", "vm4:dst"], "b": ["vm1:dst"],
             "c": ["vm1:dst", "vm2:dst"]}
    got = {"a": [("ndr_pps", 20), ("ndr_pps", 21), ("ndr_pps", 19)],
           "b": [("ndr_pps", 60), ("ndr_pps", 62), ("ndr_pps", 58)],
           "c": [("ndr_lower_bound_pps", 30), ("ndr_pps", 29), ("ndr_pps", 31)]}
    with Store(tmp_path / "d.db") as s:
        eid = s.register_experiment("d", "h", {}, 1, "/s/d.yaml")
        pts = [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i, lab={},
                               measure={"type": "ndr", "pairs": pairs[v]}, lab_hash="x")
               for v, xs in got.items() for i in range(len(xs))]
        s.add_runs(eid, pts)
        for r in s.runs(eid):
            name, kpps = got[r.params["variant"]][r.repetition]
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, {name: kpps * 1e3}, ended=110.0)
    with Store(tmp_path / "d.db", readonly=True) as s:
        x1, x2 = compare(s, f.findings[0]), compare(s, f.findings[1])
    assert x1.a.mean == pytest.approx(80e3) and x1.b.mean == pytest.approx(60e3)
    assert x1.ratio == pytest.approx(4 / 3) and not x1.censored
    # c's first search passed at its top: 2 x 30 kpps is a lower bound of c's total
    assert x2.censored == "b" and x2.b.n == 3 and x2.b.mean == pytest.approx(60e3)


def test_a_side_whose_runs_are_done_without_a_figure_is_said_not_judged(tmp_path):
    # the full rerun's O3-O5: every run of a side done, its searches ended without a rate (no
    # metric stored); the page says so, stamped with the run, instead of refusing the run or
    # calling it "not run"; a side whose runs are not done yet is still "not run"
    f = load_findings(_write(tmp_path, GOOD + "  - {id: other, db: missing, metric: m, "
                                              "rows: variant}\n"))
    with Store(tmp_path / "d.db") as s:
        eid = s.register_experiment("d", "h", {}, 1, "/s/d.yaml")
        pts = [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i, lab={},
                               measure={}, lab_hash="x")
               for v in ("a", "b", "c") for i in range(2)]
        s.add_runs(eid, pts)
        for r in s.runs(eid):
            if r.params["variant"] == "c":
                continue  # still to run
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, {"m": 200e3} if r.params["variant"] == "a" else {"trials": 19},
                         ended=110.0)
    out = fill(PAGE, f, tmp_path, None, run_id="r1", partial=True)
    x1 = out.split("repro:begin finding X1 run=r1 -->\n")[1].split("<!--")[0]
    assert x1.startswith("measured, no figure: a: 2 runs done, 200 ± 0 kpps; b: 2 runs done, "
                         "none with a figure"), x1
    assert "verdict **" not in x1 and "no ratio, no verdict" in x1
    summary = out.split("repro:begin findings run=r1 -->\n")[1].split("<!--")[0]
    assert "| X1 | a beats b | no figure for b (runs done) | – |" in summary
    assert "| X2 | c equals b | not run |" in summary
    assert "Of 2 findings, 1 were measured (1 of them with no figure on a side); of the 0 " \
        "scored" in summary
    with pytest.raises(SpecError, match="finding X2"):  # X2's c is not done: a whole render
        fill("<!-- repro:begin finding X2 -->\nold\n<!-- repro:end -->\n", f, tmp_path, None,
             run_id="r1")
    # a whole render of the finding whose runs are done goes through
    assert fill("<!-- repro:begin finding X1 -->\nold\n<!-- repro:end -->\n", f, tmp_path,
                None, run_id="r1").count("measured, no figure") == 1
