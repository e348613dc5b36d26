"""The per-finding budget of scripts/reproduce.sh's added repetitions (issue: the findings run
last got one repetition): every finding of the groups run is owed an equal share of what is
left when its group comes, a rerun is charged by the time it took (a fake clock here), and what
a finding leaves goes to the findings after it; the page reports share, spent and
repetitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.findings import load_findings
from sfclab.experiments.reprobudget import Budget, fit
from sfclab.experiments.reprorun import MoreReps, Record, more_repetitions, render_environment

from .test_findings import GOOD, _db, _write


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def plan(fid: str, est: float, file: str = "") -> MoreReps:
    return MoreReps(file or f"/s/{fid}.yaml", 4, est, (fid,))


def test_equal_shares_of_what_is_left_and_the_rest_passes_on() -> None:
    b = Budget.start(300, [("X1", "g1"), ("X2", "g1"), ("Y1", "g2")])
    assert b.allowances("g1") == {"X1": 100.0, "X2": 100.0}
    b.charge(["X1"], 30)
    assert b.allowances("g1") == {"X1": 70.0, "X2": 100.0}  # the shares stay as given
    b.close("g1", {"X1": 5, "X2": 3})
    # g1 spent 30 of its 200: Y1, the last, gets all that is left
    assert b.allowances("g2") == {"Y1": 270.0}
    b.charge(["Y1"], 400)  # a rerun took longer than estimated: never below 0
    assert b.allowances("g2") == {"Y1": 0.0} and b.left_s() == 0.0
    assert b.findings["X1"]["repetitions"] == 5 and b.findings["X1"]["done"]
    with pytest.raises(SpecError):
        Budget.start(-1, [])


def test_a_rerun_fits_its_findings_own_allowance() -> None:
    plans = [plan("X1", 50), plan("X2", 120), plan("X1", 40, "/s/other.yaml")]
    # X1 has 100: its two files (40 + 50) fit; X2's 120 does not fit its 100
    assert [p.estimate_s for p in fit(plans, {"X1": 100, "X2": 100})] == [40, 50]
    assert fit(plans, {"X1": 60}) == [plans[2]]  # cheapest first, then 50 > 20 left
    # a file serving two findings may pool their allowances
    both = MoreReps("/s/both.yaml", 4, 150, ("X1", "X2"))
    assert fit([both], {"X1": 80, "X2": 80}) == [both]
    assert fit([both], {"X1": 80}) == []


def simulate(shared: bool) -> tuple[dict[str, int], Record]:
    """Six findings in six groups; O2 and O3 are separated (need nothing), the others ask for
    a rerun estimated at 80 s that takes 70 s, for two rounds a group, within 480 s: per
    finding (``shared``) or first come, first served (one pool, as before)."""
    ids = [f"O{i}" for i in range(1, 7)]
    needs = {"O1", "O4", "O5", "O6"}
    clock = Clock()
    rec = Record(Path("/nonexistent"), clock=clock, load=lambda: [])
    rec.save = lambda: None  # type: ignore[method-assign]  # nothing on disk here
    rec.data = {"budget": Budget.start(480, [(i, f"g{i}") for i in ids]).data}
    runs: dict[str, int] = {}
    pool = 480.0
    for fid in ids:
        g = f"g{fid}"
        for _ in range(2):  # REPRO_ROUNDS
            asked = [plan(fid, 80)] if fid in needs else []
            chosen = fit(asked, rec.allowances(g)) if shared else \
                [p for p in asked if p.estimate_s <= pool]
            for p in chosen:
                t0 = clock()
                clock.t += 70
                rec.round(g, p.file, p.repetitions, list(p.findings), t0)
                pool -= 70
                runs[fid] = runs.get(fid, 0) + 1
        rec.close_group(g, {fid: 3 + 2 * runs.get(fid, 0)})
    return runs, rec


def test_the_last_findings_get_their_share() -> None:
    """First come, first served left the last finding nothing (O5/O6 of the issue); shared,
    every finding that asks gets a rerun, and the later ones what the earlier left."""
    fcfs, _ = simulate(shared=False)
    assert fcfs == {"O1": 2, "O4": 2, "O5": 2}  # O6 got nothing
    runs, rec = simulate(shared=True)
    assert runs == {"O1": 1, "O4": 1, "O5": 2, "O6": 2}, runs
    b = rec.budget
    assert b is not None
    shares = [b.findings[f"O{i}"]["share_s"] for i in range(1, 7)]
    assert shares[0] == 80 and shares == sorted(shares), shares  # the rest passes on
    assert b.findings["O2"]["spent_s"] == 0 and b.findings["O6"]["spent_s"] == 140
    assert sum(f["spent_s"] for f in b.findings.values()) <= 480
    assert b.findings["O6"]["repetitions"] == 7
    assert rec.data["groups"]["gO1"]["rounds"][0]["seconds"] == 70


def test_the_record_the_script_keeps_and_the_page(tmp_path: Path) -> None:
    f = load_findings(_write(tmp_path, GOOD))
    _db(tmp_path / "d.db", {"a": [150, 260], "b": [100, 104], "c": [101, 103]})
    clock = Clock()
    rec = Record(tmp_path, clock=clock, load=lambda: [0.5, 0.5, 0.5])
    rec.begin({})
    b = rec.start_budget(800, f, ["d", "unrun"])
    assert list(b.findings) == ["X1", "X2"]  # the findings of the groups run, in order
    rec.group("d", "start")
    allow = rec.allowances("d")
    assert allow == {"X1": 400.0, "X2": 400.0}
    # X1 is planned 10 repetitions from the pilot: 6 runs of 10 s over 2 repetitions, 288 s
    plans = rec.data.setdefault("plan", {})
    more = more_repetitions(f, tmp_path, ["d"], allow, plans)
    assert [(p.file, p.repetitions, p.findings) for p in more] == [("/s/d.yaml", 10,
                                                                      ("X1", "X2"))]
    # X2 (3 planned) shares the file: their shares pool, but 100 + 150 s do not fit
    assert more_repetitions(f, tmp_path, ["d"], {"X1": 100.0, "X2": 150.0}, plans) == []
    rec.save()
    t0 = clock()
    clock.t += 265
    rec.round("d", "/s/d.yaml", 10, ["X1", "X2"], t0)
    rec.group("d", "end")
    rec.close_group("d", {"X1": 10, "X2": 10})
    again = Record(tmp_path)  # as the next step of the script reads it
    assert again.budget is not None
    assert again.budget.findings["X1"]["spent_s"] == 132.5  # the rerun split between both
    assert again.allowances("d") == {}  # the group is done
    page = render_environment(again)
    assert "| X1 | d | 400 s | 132 s | 2 | 10 (0.55) | 10 |" in page, page
    assert "| X2 | d | 400 s | 132 s | 2 | 3 (0.97) | 10 |" in page, page
    assert "left unspent: 535 s" in page


def test_more_without_a_budget_is_refused(tmp_path: Path) -> None:
    rec = Record(tmp_path)
    with pytest.raises(SpecError, match="budget"):
        rec.allowances("d")
