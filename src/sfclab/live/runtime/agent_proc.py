"""The agent's verbs for programs in a lab's namespaces on its host (in the agent's one table,
:mod:`sfclab.live.runtime.agent_verbs`): what ``exec`` and ``traffic`` need on a host driven by
its agent (over SSH, or a Kubernetes Node's agent answering requests).

- ``proc-run`` ``{"lab", "ns", "argv", "input", "timeout"}``: run ``argv`` in namespace ``ns``
  (one of the lab's on this host, or null: the host's own context) to its end; answers
  ``{"status", "stdout", "stderr"}`` (each output cut to :data:`MAX_OUTPUT` bytes);
- ``proc-start`` ``{"lab", "ns", "argv"}``: start ``argv`` in ``ns`` (one of the lab's) and
  leave it running, detached: a *keeper* (``python -m sfclab.live.runtime.agent_proc keep``,
  in the same namespace) starts it with its output to files of the lab's state on this host
  (``procs/ID.out``, ``.err``), records its PID and start time (``ID.json``) and, when it
  ends, its exit status; answers ``{"id", "pid"}``;
- ``proc-read`` ``{"lab", "id", "offset", "timeout", "signal"}``: send ``signal`` (when
  given) to the program, if it is still the process recorded (PID and start time), then wait
  up to ``timeout`` seconds for complete lines past byte ``offset`` of its output; answers
  ``{"lines", "offset", "status", "stderr"}`` (``status`` null while it runs);
- ``proc-end`` ``{"lab", "id", "offset", "grace"}``: end it (SIGTERM, SIGKILL after
  ``grace``), answer its last lines, status and standard error, and remove its files;
- ``tools`` ``{}``: where this host has the programs a measurement runs (``sfcgen``), so the
  caller names them by their path there.

A program started so is in one of the lab's namespaces: ``down`` ends it with every process
there, and removes the lab's state with its files.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...errors import LabError, SfclabError
from ...kernel import netns
from ...plan.model import Plan
from ...realize.state import LabState

#: the most of a program's output answered (bytes, each of standard output and error): an
#: answer travels in one object on Kubernetes
MAX_OUTPUT = 256 << 10
#: how long ``proc-start`` waits for the keeper to record the program (seconds)
START_S = 10.0


def _procs(lab: str) -> Path:
    state = LabState(lab)
    if state.plan() is None:
        raise LabError(f"lab '{lab}' has no part on this host")
    d = state.dir / "procs"
    d.mkdir(exist_ok=True)
    return d


def _namespace(lab: str, ns: Any, context_ok: bool) -> str | None:
    """``ns`` if it is one of lab ``lab``'s namespaces here (None: the host's own context,
    where ``context_ok``); :class:`LabError` otherwise."""
    if ns is None and context_ok:
        return None
    d = LabState(lab).plan()
    names = {n.name for n in Plan.from_dict(d).namespaces} if d else set()
    if ns not in names:
        raise LabError(f"namespace {ns!r} is not one of lab '{lab}''s on this host")
    return str(ns)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n[cut]"


def run(req: dict[str, Any]) -> dict[str, Any]:
    lab = str(req["lab"])
    ns = _namespace(lab, req.get("ns"), context_ok=True)
    argv = [str(x) for x in req["argv"]]
    timeout = float(req.get("timeout") or 3600)
    try:
        if ns is None:
            cp = subprocess.run(argv, input=req.get("input"), capture_output=True, text=True,
                                timeout=timeout)
        else:
            cp = netns.run(ns, argv, check=False, input=req.get("input"), timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"command not found: {argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{argv[0]} did not end within {timeout:g} s") from None
    return {"status": cp.returncode, "stdout": _cut(cp.stdout), "stderr": _cut(cp.stderr)}


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (field 22 of its stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _record(d: Path, pid: str) -> dict[str, Any]:
    return json.loads((d / f"{pid}.json").read_text())


def start(req: dict[str, Any]) -> dict[str, Any]:
    lab = str(req["lab"])
    d = _procs(lab)
    ns = _namespace(lab, req.get("ns"), context_ok=False)
    assert ns is not None
    pid = secrets.token_hex(6)
    keeper = netns.popen(ns, [sys.executable, "-m", "sfclab.live.runtime.agent_proc", "keep",
                              str(d), pid, "--", *[str(x) for x in req["argv"]]],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_S
    while not (d / f"{pid}.json").exists():
        if keeper.poll() is not None or time.monotonic() > deadline:
            err = (d / f"{pid}.err").read_text()[-500:] if (d / f"{pid}.err").exists() else ""
            raise LabError(f"{req['argv'][0]} did not start in {ns}: {err.strip() or 'no output'}")
        time.sleep(0.01)
    return {"id": pid, "pid": _record(d, pid)["pid"]}


def _alive(rec: dict[str, Any]) -> bool:
    return _start_time(int(rec["pid"])) == rec["start"]


def _status(d: Path, pid: str) -> int | None:
    try:
        return int((d / f"{pid}.status").read_text())
    except (OSError, ValueError):
        return None


def _lines(d: Path, pid: str, offset: int) -> tuple[list[str], int]:
    """The complete lines of the output past ``offset``, and the offset after them."""
    with open(d / f"{pid}.out", "rb") as f:
        f.seek(offset)
        data = f.read(MAX_OUTPUT)
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return data[:end].decode(errors="replace").split("\n"), offset + end + 1


def read(req: dict[str, Any]) -> dict[str, Any]:
    d = _procs(str(req["lab"]))
    pid, offset = str(req["id"]), int(req.get("offset") or 0)
    rec = _record(d, pid)
    if req.get("signal") is not None and _alive(rec):
        os.kill(int(rec["pid"]), int(req["signal"]))
    deadline = time.monotonic() + float(req.get("timeout") or 0)
    while True:
        lines, after = _lines(d, pid, offset)
        status = _status(d, pid)
        if lines or status is not None or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    return {"lines": lines, "offset": after, "status": status,
            "stderr": _cut((d / f"{pid}.err").read_text(errors="replace").strip())
            if status is not None else ""}


def end(req: dict[str, Any]) -> dict[str, Any]:
    d = _procs(str(req["lab"]))
    pid = str(req["id"])
    rec = _record(d, pid)
    grace = float(req.get("grace") or 1.0)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if _alive(rec):
            os.kill(int(rec["pid"]), sig)
        deadline = time.monotonic() + wait
        while _status(d, pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if _status(d, pid) is not None:
            break
    lines, _ = _lines(d, pid, int(req.get("offset") or 0))
    out = {"lines": lines, "status": _status(d, pid),
           "stderr": _cut((d / f"{pid}.err").read_text(errors="replace").strip())}
    for suffix in (".json", ".out", ".err", ".status"):
        (d / f"{pid}{suffix}").unlink(missing_ok=True)
    return out


def tools(req: dict[str, Any]) -> dict[str, Any]:
    from ...traffic.native import sfcgen_binary  # light start-up: only measurements ask

    try:
        return {"sfcgen": sfcgen_binary()}
    except SfclabError as e:
        return {"sfcgen": None, "why": str(e)}


def keep(d: Path, pid: str, argv: list[str]) -> int:
    """The keeper (see the module): the program started, recorded, waited for, its status
    written."""
    with open(d / f"{pid}.out", "wb") as out, open(d / f"{pid}.err", "wb") as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        except OSError as e:
            err.write(f"cannot run {argv[0]}: {e.strerror}\n".encode())
            err.flush()
            return 1
    tmp = d / f"{pid}.json.tmp"
    tmp.write_text(json.dumps({"pid": proc.pid, "start": _start_time(proc.pid),
                               "argv": argv}))
    os.replace(tmp, d / f"{pid}.json")
    # ended with the lab's processes (down): the program first, its status still written
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    code = proc.wait()
    tmp = d / f"{pid}.status.tmp"
    tmp.write_text(str(code))
    os.replace(tmp, d / f"{pid}.status")
    return 0


VERBS = {"proc-run": run, "proc-start": start, "proc-read": read, "proc-end": end,
         "tools": tools}

if __name__ == "__main__":
    if sys.argv[1:2] == ["keep"] and sys.argv[4:5] == ["--"]:
        sys.exit(keep(Path(sys.argv[2]), sys.argv[3], sys.argv[5:]))
    sys.exit(2)
