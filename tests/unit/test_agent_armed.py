"""The agent's armed verbs (:data:`sfclab.realize.agent.ARMED`): ready first, ``armed``
answered, then the change only on ``go``; told anything else (or nothing), the verb is closed
and has changed nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Generator
from typing import Any

import pytest

from sfclab.realize import agent


@pytest.fixture
def flip(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An armed verb ``flip`` that records what it did: ready, then the change."""
    seen: dict[str, Any] = {"ready": None, "changed": False, "closed": False}

    def verb(req: dict[str, Any]) -> Generator[None, None, dict[str, Any]]:
        seen["ready"] = req["to"]
        try:
            yield
        except GeneratorExit:
            seen["closed"] = True
            raise
        seen["changed"] = True
        return {"now": req["to"]}

    monkeypatch.setitem(agent.ARMED, "flip", verb)
    return seen


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         stdin: str) -> tuple[int, list[str], str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = agent.main(["flip"])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def test_go_makes_the_change_after_armed(flip, monkeypatch, capsys):
    rc, out, _ = _run(monkeypatch, capsys, json.dumps({"to": 7}) + "\ngo\n")
    assert rc == 0
    assert [json.loads(x) for x in out] == [{"armed": True}, {"now": 7}]
    assert flip == {"ready": 7, "changed": True, "closed": False}


@pytest.mark.parametrize("after", ["", "stop\n", "\n"])
def test_anything_but_go_changes_nothing(flip, monkeypatch, capsys, after):
    rc, out, err = _run(monkeypatch, capsys, json.dumps({"to": 7}) + "\n" + after)
    assert rc == 1
    assert [json.loads(x) for x in out] == [{"armed": True}]
    assert "not told to go" in err
    assert flip == {"ready": 7, "changed": False, "closed": True}


def test_the_request_is_one_line(flip, monkeypatch, capsys):
    rc, out, err = _run(monkeypatch, capsys, "[1, 2]\ngo\n")
    assert rc == 2 and out == [] and "expected a JSON object" in err
    assert flip["ready"] is None


def test_the_usage_names_armed_verbs(flip, monkeypatch, capsys):
    assert agent.main(["nothing-such"]) == 2
    assert "flip" in capsys.readouterr().err
