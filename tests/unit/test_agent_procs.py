"""The agent's ``procs-start`` and ``procs-end`` (:mod:`sfclab.live.runtime.agent_proc`), without
root: their inputs are bounded (as the iperf3 request bounds flows, pairs, duration and omitted
seconds) and refused before anything is written; ``procs-end`` answers a long output a page at
a time and the caller (:class:`~sfclab.realize.runtime.process.AgentPrograms`) puts the pages
together; a long wait is asked for in several calls, none ending anything early; the group's
files go with its last page."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from sfclab.errors import SpecError
from sfclab.live.runtime import agent_proc
from sfclab.realize.runtime import process
from sfclab.spec.measurement import IperfRequest
from sfclab.traffic import iperf

GID = "0123456789ab"


def test_the_bounds_are_the_iperf_requests():
    fields = IperfRequest.model_fields

    def bound(name: str, kind: str) -> float:
        return next(getattr(m, kind) for m in fields[name].metadata if hasattr(m, kind))
    assert agent_proc.MAX_PROGRAMS == bound("flows", "le") * bound("pairs", "max_length")
    longest = bound("duration", "le") + bound("omit", "le")
    assert longest + iperf.CLIENT_SLACK_S + iperf.CONNECT_TIMEOUT_MS / 1e3 \
        <= agent_proc.MAX_WAIT_S <= longest + 120
    assert iperf.LISTEN_TIMEOUT_S <= agent_proc.MAX_LISTEN_S


@pytest.mark.parametrize("req, words", [
    ({"argvs": []}, "1 to 2048 programs"),
    ({"argvs": [["true"]] * (agent_proc.MAX_PROGRAMS + 1)}, "1 to 2048 programs"),
    ({"argvs": "true"}, "1 to 2048 programs"),
    ({"argvs": [[]]}, "1 to 256 arguments"),
    ({"argvs": [["x" * 5000]]}, "at most 4096 characters"),
    ({"argvs": [["sleep", 1]]}, "1 to 256 arguments"),
    ({"argvs": [["a"], ["b"]], "listen": [5201]}, "a TCP port"),
    ({"argvs": [["a"]], "listen": [70000]}, "a TCP port"),
    ({"argvs": [["a"]], "listen": [True]}, "a TCP port"),
    ({"argvs": [["a"]], "timeout": 61}, "timeout from 0 to 60"),
    ({"argvs": [["a"]], "timeout": float("nan")}, "timeout from 0 to 60"),
])
def test_procs_start_refuses_a_bad_request_before_anything(monkeypatch, tmp_path, req, words):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    with pytest.raises(SpecError, match=words):
        agent_proc.start_all({"lab": "nolab", "ns": "sfclab:nolab:a", **req})
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("req, words", [
    ({"group": "../../etc/x"}, "a group as procs-start named it"),
    ({"group": GID.upper()}, "a group as procs-start named it"),
    ({"group": GID, "wait": agent_proc.MAX_WAIT_S + 1}, "wait from 0 to 3720"),
    ({"group": GID, "wait": -1}, "wait from 0 to 3720"),
])
def test_procs_end_refuses_a_bad_request_before_anything(monkeypatch, tmp_path, req, words):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    with pytest.raises(SpecError, match=words):
        agent_proc.end_all({"lab": "nolab", **req})
    assert list(tmp_path.iterdir()) == []


def group(d, outputs: list[bytes], ended: bool = True) -> None:
    """A group as its keeper leaves it: programs (PIDs that are not ours: nothing is ever
    signalled) with their output and, when ``ended``, how they ended."""
    n = len(outputs)
    (d / f"{GID}.json").write_text(json.dumps({
        "pids": [4_000_000 + i for i in range(n)], "starts": ["1"] * n,
        "argv0": ["iperf3"] * n, "failed": None}))
    for i, out in enumerate(outputs):
        (d / f"{GID}.{i}.out").write_bytes(out)
        (d / f"{GID}.{i}.err").write_bytes(b"said %d\n" % i)
        if ended:
            status(d, i)


def status(d, i: int) -> None:
    (d / f"{GID}.{i}.status").write_text(json.dumps({"status": i, "cpu_s": 0.5 + i}))


@pytest.fixture
def held(monkeypatch, tmp_path):
    """:class:`AgentPrograms` of group :data:`GID` in ``tmp_path``, its calls answered by the
    agent's verbs here (each call logged)."""
    monkeypatch.setattr(agent_proc, "_procs", lambda lab: tmp_path)
    calls: list[dict[str, Any]] = []

    def call(verb: str, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        calls.append({"verb": verb, **req})
        got = {"procs-end": agent_proc.end_all}[verb](json.loads(json.dumps(req)))
        return json.loads(json.dumps(got))  # as it travels

    p = process.AgentPrograms.__new__(process.AgentPrograms)
    p.call, p.lab, p.group, p._pids, p._ended = call, "lab", GID, [], None
    return p, calls, tmp_path


def test_a_long_output_comes_a_page_at_a_time_and_whole(monkeypatch, held):
    p, calls, d = held
    monkeypatch.setattr(agent_proc, "PAGE_BYTES", 1000)
    outs = [("{\"flow\": %d, \"pad\": \"%s\"}\n" % (i, "x" * 1500)).encode() for i in range(3)]
    group(d, outs)
    got = p.end(0)
    assert [e.stdout.encode() for e in got] == outs
    assert [e.stderr for e in got] == ["said 0\n", "said 1\n", "said 2\n"]
    assert [(e.status, e.cpu_s, e.itself) for e in got] == [(0, 0.5, True), (1, 1.5, True),
                                                           (2, 2.5, True)]
    assert len(calls) >= 5 and all(c["verb"] == "procs-end" for c in calls)
    assert list(d.iterdir()) == []  # the group's files went with its last page
    asked = len(calls)
    assert p.end(0) is got and len(calls) == asked  # ended once: asked again, nothing more


def test_a_long_wait_is_several_calls_that_end_nothing_early(monkeypatch, held):
    p, calls, d = held
    monkeypatch.setattr(process, "WAIT_CHUNK_S", 0.2)
    group(d, [b"{}\n", b"{}\n"], ended=False)
    status(d, 0)
    later = threading.Timer(0.7, status, (d, 1))  # the keeper, once the program ended
    later.start()
    t0 = time.monotonic()
    got = p.end(30)
    later.join()
    assert 0.6 < time.monotonic() - t0 < 5
    assert [e.itself for e in got] == [True, True] and [e.status for e in got] == [0, 1]
    waits = [(c["wait"], c["end"]) for c in calls]
    assert len(waits) >= 3 and all(w <= 0.2 and not e for w, e in waits)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "0123456789AB", "0123456789a", 12, None])
@pytest.mark.parametrize("verb", [agent_proc.read, agent_proc.end])
def test_a_program_id_that_is_not_one_proc_start_made_is_refused_before_any_file(
        verb, bad, monkeypatch, tmp_path):
    """``proc-read`` and ``proc-end`` take the id ``proc-start`` answered (12 hex digits): any
    other is refused with the place, never read as a path."""
    monkeypatch.setattr(agent_proc, "_procs", lambda lab: tmp_path)
    with pytest.raises(SpecError, match="12 hex digits") as e:
        verb({"lab": "x", "id": bad})
    assert e.value.place == "id"
    assert list(tmp_path.iterdir()) == []


def test_a_signal_reaches_the_recorded_process_only_while_it_is_that_process():
    """``_signal`` opens a pidfd, then checks the start time: a record whose start time is not
    the running process's (a PID reused) is never signalled."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        rec = {"pid": p.pid, "start": agent_proc._start_time(p.pid)}
        agent_proc._signal({**rec, "start": "1"}, 15)  # another process's record
        time.sleep(0.2)
        assert p.poll() is None
        agent_proc._signal(rec, 15)
        assert p.wait(timeout=5) == -15
    finally:
        p.kill()
        p.wait()
