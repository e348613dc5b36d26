"""The runner against a fake lab and a fake measurement: order, sleeps, failures, resume,
Ctrl-C, progress; and ``run_experiment`` from a file."""

from __future__ import annotations

import abc
import contextlib
import io
import textwrap

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.commands import run_experiment
from sfclab.experiments.runner import Runner, TextProgress, pair_metrics, split_result
from sfclab.experiments.store import Store
from sfclab.spec.experiment import expand, load_experiment_text, trial_order

EXP = """\
name: fake
lab: {name: fk, chain: {length: 2}}
measure: {type: iperf, flows: 1}
sweep:
  chain.length: [2, 3, 4]
  measure.flows: [1, 2]
repetitions: 2
seed: 11
warmup: 2
cooldown: 3
"""


class Labs(abc.ABC):
    """The lab side of the runner: ``up(lab_dict)`` is a context manager."""

    @abc.abstractmethod
    def up(self, lab: dict): ...


class FakeLabs(Labs):
    def __init__(self, fail_up_for: int | None = None):
        self.live: list[dict] = []
        self.ups = self.downs = 0
        self.fail_up_for = fail_up_for

    @contextlib.contextmanager
    def up(self, lab: dict):
        if lab["chain"]["length"] == self.fail_up_for:
            raise OSError("cannot make namespace")
        self.ups += 1
        self.live.append(lab)
        try:
            yield lab
        finally:
            self.live.remove(lab)
            self.downs += 1


class FakeMeasure:
    def __init__(self, labs: FakeLabs, interrupt_at: int | None = None,
                 fail_when=lambda lab, m: False):
        self.labs = labs
        self.calls: list[tuple[int, int]] = []
        self.interrupt_at = interrupt_at
        self.fail_when = fail_when

    def __call__(self, lab: dict, m: dict) -> dict:
        assert self.labs.live == [lab], "measured without exactly one lab up"
        n, f = lab["chain"]["length"], m["flows"]
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append((n, f))
        if self.fail_when(lab, m):
            raise RuntimeError(f"iperf3 died at n={n}")
        return {"type": "iperf", "params": m,
                "metrics": {"throughput_bps": 1e9 * f * 0.9 ** (n - 2)},
                "environment": {"iperf3": "3.12"}, "cpu": {"r1": {"busy": 0.25}},
                "raw": {"iperf3": '{"end": {}}'}}


def runner(store, labs, measure, **kw):
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("environment", lambda: {"kernel": "test"})
    return Runner(store, labs.up, measure, **kw)


@pytest.fixture
def exp():
    return load_experiment_text(EXP, "fake.yaml")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r.db")
    yield s
    s.close()


def test_runs_every_point_in_trial_order(store, exp):
    labs = FakeLabs()
    m = FakeMeasure(labs)
    summary = runner(store, labs, m).run(exp)
    assert summary.total == 12 and summary.ran == 12 and summary.done == 12
    expected = [(p.params["lab.chain.length"], p.params["measure.flows"])
                for p in trial_order(expand(exp), exp.seed)]
    assert m.calls == expected
    assert labs.ups == labs.downs == 12 and labs.live == []
    runs = store.runs(summary.experiment_id, with_metrics=True)
    for r in runs:
        n, f = r.params["lab.chain.length"], r.params["measure.flows"]
        assert r.status == "done"
        assert r.metrics["throughput_bps"] == pytest.approx(1e9 * f * 0.9 ** (n - 2))
        assert r.metrics["cpu.r1.busy"] == 0.25
        assert store.raw(r.id)["iperf3"] == '{"end": {}}'
        assert store.run_environment(r.id)["lab_hash"] == r.lab_hash
    assert store.environments(summary.experiment_id) == [{"kernel": "test"}]


def test_warmup_inside_the_lab_cooldown_between_runs(store, exp):
    labs = FakeLabs()
    slept: list[tuple[float, int]] = []
    runner(store, labs, FakeMeasure(labs),
           sleep=lambda s: slept.append((s, len(labs.live)))).run(exp)
    warm = [x for x in slept if x[0] == 2]
    cool = [x for x in slept if x[0] == 3]
    assert len(warm) == 12 and all(live == 1 for _, live in warm)
    assert len(cool) == 11 and all(live == 0 for _, live in cool)


def test_failures_are_recorded_and_the_experiment_goes_on(store, exp):
    labs = FakeLabs(fail_up_for=4)
    m = FakeMeasure(labs, fail_when=lambda lab, mm: lab["chain"]["length"] == 3
                    and mm["flows"] == 2)
    s = runner(store, labs, m).run(exp)
    assert s.ran == 12 and s.failed == 4 + 2 and s.done == 6
    errors = {r.error for r in store.runs(s.experiment_id, "failed")}
    assert errors == {"OSError: cannot make namespace", "RuntimeError: iperf3 died at n=3"}
    assert labs.ups == labs.downs
    # a second invocation redoes nothing, unless failed runs are retried
    m2 = FakeMeasure(labs)
    assert runner(store, labs, m2).run(exp).ran == 0 and m2.calls == []
    labs.fail_up_for = None
    s2 = runner(store, labs, m2).run(exp, retry_failed=True)
    assert s2.ran == 6 and s2.done == 12 and s2.failed == 0


def test_bad_result_is_a_failed_run(store, exp):
    labs = FakeLabs()

    def measure(lab, m):
        return {"metrics": {"throughput_bps": "fast"}}

    s = runner(store, labs, measure).run(exp)
    assert s.failed == 12
    assert "not a finite number" in store.runs(s.experiment_id)[0].error


def test_ctrl_c_tears_down_requeues_and_resume_finishes(store, exp):
    labs = FakeLabs()
    m = FakeMeasure(labs, interrupt_at=5)
    with pytest.raises(KeyboardInterrupt):
        runner(store, labs, m, clock=lambda: 1.0).run(exp)
    assert labs.live == [] and labs.ups == labs.downs == 6
    eid = store.experiments()[0].id
    assert store.counts(eid) == {"pending": 7, "running": 0, "done": 5, "failed": 0}
    assert all(r.started is None for r in store.runs(eid, "pending"))

    m2 = FakeMeasure(labs)
    s = runner(store, labs, m2, clock=lambda: 2.0).run(exp)
    assert s.ran == 7 and s.done == 12 and s.pending == 0
    assert len(m2.calls) == 7
    # what the first session finished was not redone: it keeps its own timestamps
    started = sorted(r.started for r in store.runs(eid))
    assert started == [1.0] * 5 + [2.0] * 7


def test_run_left_running_by_a_crash_is_redone(store, exp):
    labs = FakeLabs()
    r = runner(store, labs, FakeMeasure(labs))
    eid, _ = r.prepare(exp)
    victim = store.runs(eid)[3]
    store.mark_running(victim.id)  # the process died here
    m = FakeMeasure(labs)
    s = runner(store, labs, m).run(exp)
    assert s.ran == 12 and store.run(victim.id).status == "done"


def test_split_result():
    metrics, raw, env = split_result({"type": "ndr", "params": {"size": 64},
                                      "metrics": {"ndr_pps": 1000, "pdr_pps": 1200.5},
                                      "cpu": {"fw": {"softirq": 3, "name": "x"}, "total": 7},
                                      "environment": {"a": 1}, "raw": {"trials": [1, 2]}})
    assert metrics == {"ndr_pps": 1000.0, "pdr_pps": 1200.5, "cpu.fw.softirq": 3.0,
                       "cpu.total": 7.0}
    assert raw["trials"] == [1, 2] and raw["measurement"] == {"type": "ndr",
                                                              "params": {"size": 64}}
    assert env == {"a": 1}
    # the traffic layer's shape: raw of any type, extra keys at the top level
    metrics, raw, _ = split_result({"type": "rate_curve", "metrics": {"limited": True, "u": None},
                                    "raw": [{"trial": 1}], "points": [{"offered_pps": 1.0}]})
    assert metrics == {"limited": 1.0}
    assert raw["raw"] == [{"trial": 1}] and raw["points"] == [{"offered_pps": 1.0}]
    for bad in ({}, {"metrics": [1]}, {"metrics": {"x": "1"}}, {"metrics": {"x": float("inf")}}):
        with pytest.raises(ValueError):
            split_result(bad)


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_text_progress_plain_lines_with_eta():
    out, clock = io.StringIO(), FakeClock()
    p = TextProgress(out, tty=False, clock=clock)
    p.start("exp", total=10, finished=4)
    p.begin("n=2 rep 0")
    clock.t = 30
    p.end(True, 30)
    p.begin("n=3 rep 0")
    clock.t = 90
    p.end(False, 60, "boom")
    p.begin("n=5 rep 0")
    p.finish()
    text = out.getvalue()
    assert "\r" not in text
    assert "10 runs, 4 already finished, 6 to go" in text
    assert "[4/10] ETA --" in text
    assert "[5/10] ETA 2m30s n=3 rep 0" in text  # 30 s per run, 5 left
    assert "failed: n=3 rep 0: boom" in text
    assert "[6/10, 1 failed] ETA 3m00s" in text  # 45 s per run, 4 left


def test_text_progress_bar_on_a_terminal():
    out = io.StringIO()
    p = TextProgress(out, tty=True, clock=FakeClock())
    p.start("exp", total=4, finished=2)
    p.begin("x")
    assert "\r\x1b[K|############------------| [2/4]" in out.getvalue()


def test_run_experiment_from_a_file(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(EXP))
    labs = FakeLabs()
    validated = []
    out = io.StringIO()
    s = run_experiment(path, tmp_path / "r.db", labs.up, FakeMeasure(labs),
                       TextProgress(out, tty=False), sleep=lambda s: None, environment=None,
                       validate_lab=lambda d, src: validated.append(d["chain"]["length"]))
    assert s.done == 12 and sorted(validated) == [2, 3, 4]
    assert "12/12 runs finished" in out.getvalue()
    again = run_experiment(path, tmp_path / "r.db", labs.up, FakeMeasure(labs),
                           TextProgress(io.StringIO(), tty=False), sleep=lambda s: None,
                           environment=None)
    assert again.ran == 0 and again.experiment_id == s.experiment_id


def test_pair_metrics_of_a_several_pair_rate_curve():
    def pt(offered, *pairs):
        return {"offered_pps": offered, "received_pps": sum(p[1] for p in pairs),
                "pairs": [{"pair": n, "received_pps": r, "loss_ratio": lo} for n, r, lo in pairs]}
    points = [pt(1000, ("t1:dst", 1000, 0.0), ("t2:dst", 990, 0.01)),
              pt(4000, ("t1:dst", 3000, 0.25), ("t2:dst", 2000, 0.5)),
              pt(2000, ("t1:dst", 2000, 0.0), ("t2:dst", 1000, 0.5))]
    m = pair_metrics(points)
    assert m == {"pair.t1:dst.max_received_pps": 3000, "pair.t1:dst.top_loss_ratio": 0.25,
                 "pair.t2:dst.max_received_pps": 2000, "pair.t2:dst.top_loss_ratio": 0.5}
    assert pair_metrics([{"offered_pps": 1, "received_pps": 1}]) == {}  # one pair: nothing
    assert pair_metrics(None) == {}
    metrics, raw, _ = split_result({"type": "rate_curve", "params": {},
                                    "metrics": {"max_received_pps": 5000.0}, "points": points})
    assert metrics["pair.t2:dst.top_loss_ratio"] == 0.5 and metrics["max_received_pps"] == 5000
    assert raw["points"] == points


def test_more_repetitions_extend_the_same_experiment(tmp_path):
    """``repetitions`` (sfclab run --repetitions, reproduce.sh's rounds) adds runs to the
    experiment the file made: the runs done are kept, only the new repetitions run."""
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(EXP))
    labs = FakeLabs()

    def go(reps):
        return run_experiment(path, tmp_path / "r.db", labs.up, FakeMeasure(labs),
                              TextProgress(io.StringIO(), tty=False), sleep=lambda s: None,
                              environment=None, repetitions=reps)
    first = go(None)
    more = go(4)
    assert first.done == 12 and more.experiment_id == first.experiment_id
    assert more.ran == 12 and more.done == 24 and more.total == 24
    with Store(tmp_path / "r.db", readonly=True) as s:
        assert sorted({r.repetition for r in s.runs(more.experiment_id)}) == [0, 1, 2, 3]
    assert go(4).ran == 0
    with pytest.raises(SpecError, match="--repetitions"):
        go(0)


def test_calibration_runs_once_and_is_kept_in_the_environment_record(store, exp):
    labs = FakeLabs()
    calls: list[list[dict]] = []

    def calibrate(measures):
        calls.append(measures)
        return {"sizes": {"64": {"ceiling_pps": 500_000.0}}, "lab": "temporary"}

    summary = runner(store, labs, FakeMeasure(labs), calibrate=calibrate).run(exp)
    assert len(calls) == 1 and len(calls[0]) == 12  # once, with every run's measurement
    assert store.environments(summary.experiment_id) == [
        {"kernel": "test",
         "calibration": {"sizes": {"64": {"ceiling_pps": 500_000.0}}, "lab": "temporary"}}]
    # resumed with nothing left to do: no second calibration
    runner(store, labs, FakeMeasure(labs), calibrate=calibrate).run(exp)
    assert len(calls) == 1


def test_a_failed_calibration_is_recorded_and_the_runs_go_on(store, exp):
    from sfclab.errors import MeasurementError

    labs = FakeLabs()

    def calibrate(measures):
        raise MeasurementError("sfcgen is not built")

    summary = runner(store, labs, FakeMeasure(labs), calibrate=calibrate).run(exp)
    assert summary.done == 12
    env = store.environments(summary.experiment_id)[0]
    assert env["calibration"] == {"error": "sfcgen is not built"}


def test_no_calibration_no_key(store, exp):
    labs = FakeLabs()
    summary = runner(store, labs, FakeMeasure(labs), calibrate=lambda measures: None).run(exp)
    assert store.environments(summary.experiment_id) == [{"kernel": "test"}]
