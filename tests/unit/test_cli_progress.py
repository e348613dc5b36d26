"""Long work shows progress on stderr, and ``--json`` stays quiet."""

from __future__ import annotations

import argparse

import pytest

from sfclab.cli import experiments as cli_experiments
from sfclab.cli import measure as cli_measure
from sfclab.experiments.runner import NullProgress


def test_a_search_trial_line_says_the_interval_each_goal_is_narrowed_to(
        capsys: pytest.CaptureFixture[str]) -> None:
    cli_measure._progress({"index": 3, "purpose": "bisect", "offered_pps": 120000.0,
                           "sent_pps": 119800.0, "received_pps": 119800.0, "loss_ratio": 0.0,
                           "intervals": {"ndr": [100000.0, 150000.0], "pdr": [120000.0, None]},
                           "done": ["ndr"]})
    err = capsys.readouterr().err
    assert err.startswith("  trial 3 (bisect): offered 120,000 pps, sent 119,800, received "
                          "119,800, loss 0.0000 %")
    assert "ndr in [100,000, 150,000] pps (done); pdr in [120,000, -] pps" in err


def test_json_measurements_and_runs_print_no_progress(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from sfclab.traffic import measure

    seen = {}

    class Done:
        def to_dict(self):
            return {}

    def fake_run(lab, r, progress=None):
        seen["measure"] = progress
        return Done()

    monkeypatch.setattr(measure, "run", fake_run)
    a = argparse.Namespace(lab="l", json=True)
    cli_measure._measure(a, None, lambda d: "")
    assert seen["measure"] is None
    cli_measure._measure(argparse.Namespace(lab="l", json=False), None, lambda d: "")
    assert seen["measure"] is cli_measure._progress

    import sfclab.experiments.commands as commands

    def fake_experiment(*args, progress=None, **kw):
        seen["run"] = progress
        raise SystemExit(0)

    monkeypatch.setattr(commands, "run_experiment", fake_experiment)
    for as_json, want in ((True, NullProgress), (False, type(None))):
        with pytest.raises(SystemExit):
            cli_experiments.cmd_run(argparse.Namespace(
                file="f", db="d", retry_failed=False, repetitions=None, json=as_json))
        assert isinstance(seen["run"], want)
