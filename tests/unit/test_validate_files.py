"""``sfclab validate`` checks every kind of sfclab file as the command that uses it does: the
kind told from the file's keys (or ``--kind``), the same first fault with the same message and
exit status, ``--json`` a list of findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError
from sfclab.spec.filekind import kind_of

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_file_is_valid(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(path)]) == ExitStatus.OK, capsys.readouterr().err
    assert "is valid" in capsys.readouterr().out


def test_each_kind_is_told_from_its_keys() -> None:
    kinds = {p.stem: kind_of(__import__("yaml").safe_load(p.read_text())) for p in SCENARIOS}
    assert kinds["chain5"] == kinds["sfc-web"] == kinds["hosts-tenants"] == "lab"
    assert kinds["demo-chain-length"] == kinds["trellis-forwarding"] == "experiment"
    assert kinds["sfc-video-chain"] == "chain"
    assert kinds["sfc-web-classifiers"] == "classifier"
    assert kinds["findings"] == "findings"
    assert kind_of({"classifiers": []}) == "classifier"
    assert kind_of({"name": "x", "lab": "chain5.yaml"}) == "experiment"


def _own_error(kind: str, path: str) -> str:
    """The message of the command that would use the file."""
    from sfclab.experiments.findings import load_findings
    from sfclab.live.request import read_chain_file
    from sfclab.spec import classifier_file
    from sfclab.spec.experiment import expand, load_experiment
    from sfclab.realize.kinds import load_lab_dict
    try:
        if kind == "experiment":
            expand(load_experiment(path), load_lab_dict)
        elif kind == "chain":
            read_chain_file("nosuchlab", path)
        elif kind == "classifier":
            classifier_file.read(path)
        else:
            load_findings(path)
    except SpecError as e:
        return str(e)
    raise AssertionError(f"{path} was accepted by its own command")


BAD = {
    "experiment": "name: x\nlab: {name: demo, chain: {length: 2}}\nmeasure:\n  type: iperf\n"
                  "  flows: 0\n",
    "chain": "name: c\nclassifiers: [{ingress: src, dport: 80}]\negress: dst\nfunctions:\n"
             "  - {name: f, kind: firewal}\n",
    "classifier": "- {ingress: src, protocol: udpx}\n",
    "findings": "findings:\n  - {id: 1}\ntables: []\n",
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_file_of_each_kind_gets_its_commands_message_and_exit_2(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / f"bad-{kind}.yaml"
    f.write_text(BAD[kind])
    assert main(["validate", str(f)]) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err == f"sfclab: error: {_own_error(kind, str(f))}"
    assert err.startswith(f"sfclab: error: {f}")
    assert main(["validate", str(f), "--json"]) == ExitStatus.BAD_INPUT
    (d,) = json.loads(capsys.readouterr().out)
    assert d["kind"] == kind and d["valid"] is False and d["error"]["exit_status"] == 2
    assert d["error"]["text"] == _own_error(kind, str(f))


def test_several_files_one_list_and_the_worst_status(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD["classifier"])
    good = str(ROOT / "scenarios" / "chain5.yaml")
    assert main(["validate", good, str(bad), "--json"]) == ExitStatus.BAD_INPUT
    out = json.loads(capsys.readouterr().out)
    assert [(d["kind"], d["valid"]) for d in out] == [("lab", True), ("classifier", False)]
    assert out[0]["nodes"] == 5


def test_kind_given_overrides_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    lab = str(ROOT / "scenarios" / "chain5.yaml")
    assert main(["validate", lab, "--kind", "classifier"]) == ExitStatus.BAD_INPUT
    assert capsys.readouterr().err.startswith(f"sfclab: error: {lab}")
