"""Refusals on real labs (issue 22): ``up`` refuses every class ``validate`` refuses, with exit
status 2, the place named and nothing made; ``chain classify`` refuses another chain's
classifier entry; a ``chain add`` whose function's program exits at once leaves nothing."""

from __future__ import annotations

import copy
import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml

from sfclab.cli import main
from sfclab.realize.dataplane import DataPlane
from sfclab.realize.state import LabState
from sfclab.live.ops import chains as steer_chains

from ..unit.test_refusals import CASES
from .test_chain_ops import VIDEO, base_lab, chain_file, running


def lab_leftovers(name: str) -> list[str]:
    spaces = [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{name}:")]
    return spaces + ([str(LabState(name).dir)] if LabState(name).dir.exists() else [])


@pytest.mark.parametrize("case", ["egress is the ingress", "two chains, one classifier",
                                  "interface all", "tun device ..", "NUL in a tun argument",
                                  "underlay in the lab's plan"])
def test_up_refuses_what_validate_refuses_and_makes_nothing(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, place, words = CASES[case]
    d = {**copy.deepcopy(d), "name": "r" + secrets.token_hex(3)}
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["validate", str(f)]) == 2
    said = capsys.readouterr().err
    assert main(["up", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == said and place in err and words in err, err
    assert lab_leftovers(d["name"]) == []


def two_chains() -> dict[str, Any]:
    d = base_lab()
    d["chains"]["other"] = {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 8000}],
                            "functions": ["f1"], "egress": "dst"}
    return d


def test_classify_refuses_an_entry_another_chain_holds(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    with running(two_chains()) as lab:
        sp = steer_chains._steering(lab.name)[1]
        row = [("src", 0, 0, 0, 0, 0, 0, 7999, 16, 17, 0, 4)]
        with DataPlane(lab.name) as dp:
            owner = dp.holders(sp.node_ids, row)
        f = tmp_path / "steal.json"
        f.write_text(json.dumps([{"ingress": "src", "proto": "udp", "dport": 8001},
                                 {"ingress": "src", "proto": "udp", "dport": 7999}]))
        assert main(["chain", "classify", lab.name, "other", "--from-file", str(f)]) == 2
        err = capsys.readouterr().err
        assert f"{f}: [1]" in err and "'base'" in err, err
        with DataPlane(lab.name) as dp:  # nothing written: 7999 still base's, 8001 nobody's
            assert dp.holders(sp.node_ids, row) == owner != [None]
            assert dp.holders(sp.node_ids, [row[0][:7] + (8001, 16, 17, 0, 4)]) == [None]
        # the chain's own entry may be given again
        assert main(["chain", "classify", lab.name, "base", "--from-file", str(f)]) == 0


def _files(name: str) -> list[str]:
    d = LabState(name).dir
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.name != "slots.lock")


def test_a_chain_add_whose_program_exits_at_once_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running(base_lab()) as lab:
        before = _files(lab.name), sorted(lab_leftovers(lab.name))
        plan = (LabState(lab.name).dir / "plan.json").read_text()
        for exe in (["/bin/true"], ["false"]):
            body = {**VIDEO, "functions": [{"name": "m", "kind": "tun", "exec": exe}]}
            assert main(["chain", "add", lab.name, chain_file(tmp_path, body)]) == 1
            assert "exited at start" in capsys.readouterr().err
            assert (_files(lab.name), sorted(lab_leftovers(lab.name))) == before
            assert (LabState(lab.name).dir / "plan.json").read_text() == plan
