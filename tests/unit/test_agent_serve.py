"""The served agent (:mod:`sfclab.realize.agent_serve`): each request a forked run of its own,
answered on one line with what that run would have exited with and printed."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from typing import Any

from sfclab.realize import agent_serve

STATE: dict[str, int] = {"calls": 0}


def count(req: dict[str, Any]) -> dict[str, Any]:
    STATE["calls"] += 1  # in the child only: the server's copy never changes
    return {"calls": STATE["calls"], "got": req}


def fail(req: dict[str, Any]) -> dict[str, Any]:
    raise OSError("no such thing")


def big(req: dict[str, Any]) -> dict[str, Any]:
    print("x" * 300_000, file=sys.stderr)  # more than a pipe holds: read while it runs
    return {"n": int(req["n"])}


def killed(req: dict[str, Any]) -> dict[str, Any]:
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def daemon(req: dict[str, Any]) -> dict[str, Any]:
    """Leaves a process running that holds the verb's output open."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                         start_new_session=True)  # stdout and stderr: the verb's
    return {"pid": p.pid}


VERBS = {"count": count, "fail": fail, "big": big, "killed": killed, "daemon": daemon}


def served(*requests: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    lines = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
    out = io.BytesIO()
    status = agent_serve.serve(VERBS, {}, "m", stdin=io.BytesIO(lines), stdout=out)
    return status, [json.loads(ln) for ln in out.getvalue().splitlines()]


def test_each_request_is_a_run_of_its_own_answered_on_one_line():
    status, got = served({"verb": "count", "request": {"a": 1}},
                         {"verb": "count", "request": {"a": 2}})
    assert status == 0
    assert [g["status"] for g in got] == [0, 0]
    assert [json.loads(g["out"]) for g in got] == [{"calls": 1, "got": {"a": 1}},
                                                   {"calls": 1, "got": {"a": 2}}]
    assert STATE["calls"] == 0


def test_a_failure_an_unknown_verb_and_a_signal_give_what_a_run_would():
    status, got = served({"verb": "fail", "request": {}}, {"verb": "nope", "request": {}},
                         {"verb": "killed", "request": {}})
    assert status == 0
    assert got[0]["status"] == 1 and "agent fail: no such thing" in got[0]["err"]
    assert got[1]["status"] == 2 and "usage:" in got[1]["err"]
    assert got[2]["status"] == 255


def test_output_larger_than_a_pipe_and_a_process_left_holding_it_do_not_block():
    status, got = served({"verb": "big", "request": {"n": 7}},
                         {"verb": "daemon", "request": {}})
    assert status == 0
    assert json.loads(got[0]["out"]) == {"n": 7} and len(got[0]["err"]) > 300_000
    pid = json.loads(got[1]["out"])["pid"]
    try:
        assert got[1]["status"] == 0
    finally:
        fd = os.pidfd_open(pid)
        signal.pidfd_send_signal(fd, signal.SIGTERM)
        os.close(fd)


def test_a_line_that_is_no_request_ends_the_server_with_status_2():
    out = io.BytesIO()
    assert agent_serve.serve(VERBS, {}, "m", stdin=io.BytesIO(b"not json\n"), stdout=out) == 2
    assert out.getvalue() == b""
