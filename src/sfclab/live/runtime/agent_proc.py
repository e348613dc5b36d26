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
- ``procs-start`` ``{"lab", "ns", "argvs", "listen", "timeout"}``: start the programs
  ``argvs`` together in ``ns`` (one of the lab's) under one keeper
  (``python -m sfclab.live.runtime.agent_proc keep-all``, in the same namespace), which starts
  each with its output to files of the lab's state here (``procs/GROUP.I.out``, ``.err``),
  records their PIDs and start times (``GROUP.json``), reaps each and writes its exit status
  and CPU seconds (``GROUP.I.status``); with ``listen`` (a TCP port per program), answer once
  each holds a listening socket of its own on its port.  Answers ``{"group", "pids"}``, or
  ``{"failed": {"index", "why", "ended"}}`` when one could not start, stopped before it
  listened, or they did not all listen within ``timeout`` (``index`` null): every one started
  is then ended and its files removed;
- ``procs-end`` ``{"lab", "group", "wait", "end", "offsets"}``: wait up to ``wait`` seconds for
  every program of the group to end by itself, then end the rest (SIGTERM, SIGKILL after a
  second; each through a pidfd, checked to be the process recorded), unless ``end`` is false:
  then, with some still running, answer only ``{"running"}``.  Answers ``{"programs", "more",
  "offsets"}``: each program's ``pid``, ``status``, ``cpu_s``, whether it ended by
  ``itself``, and its ``stdout`` and ``stderr`` -- at most :data:`PAGE_BYTES` of output in
  all per answer; with ``more``, ask again with the ``offsets`` answered for the rest.  The
  group's files are removed with the last page;
- ``tools`` ``{}``: where this host has the programs a measurement runs (``sfcgen``: its
  path, so the caller names it there; ``iperf3``: its version, or ``absent``).

Bounded inputs: at most :data:`MAX_PROGRAMS` programs a group (the most iperf3 flows of one
request: 128 flows x 16 pairs), of :data:`MAX_ARGS` arguments of at most
:data:`MAX_ARG_CHARS` characters; ``wait`` at most :data:`MAX_WAIT_S` (the longest iperf3
request's duration and omitted seconds, a minute to spare), ``timeout`` at most
:data:`MAX_LISTEN_S`; a group is named by the 12 hexadecimal digits ``procs-start`` gave it.

A program started so is in one of the lab's namespaces: ``down`` ends it with every process
there, and removes the lab's state with its files.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...errors import LabError, SfclabError, SpecError
from ...kernel import netns
from ...plan.model import Plan
from ...realize.state import LabState

#: the most of a program's output answered (bytes, each of standard output and error): an
#: answer travels in one object on Kubernetes
MAX_OUTPUT = 256 << 10
#: how long ``proc-start`` waits for the keeper to record the program (seconds)
START_S = 10.0
#: the most programs one ``procs-start`` holds: the most iperf3 flows of one request (128
#: flows x 16 pairs, :class:`sfclab.spec.measurement.IperfRequest`)
MAX_PROGRAMS = 128 * 16
#: the most arguments of one program, and characters of one argument
MAX_ARGS = 256
MAX_ARG_CHARS = 4096
#: the longest ``procs-end`` waits (seconds): the longest iperf3 request's duration (3600 s)
#: and omitted seconds (60), a minute to spare
MAX_WAIT_S = 3600.0 + 60.0 + 60.0
#: the longest ``procs-start`` waits for its programs to listen (seconds)
MAX_LISTEN_S = 60.0
#: the most output (bytes) one ``procs-end`` answers: on Kubernetes an answer is one object,
#: its JSON escaped twice; the rest comes a page at a time
PAGE_BYTES = 256 << 10
#: what ``procs-end`` gives a program to end after SIGTERM before SIGKILL (seconds)
END_GRACE_S = 1.0
#: a group's name, as ``procs-start`` made it, and a program's id, as ``proc-start`` made it
GROUP = re.compile(r"[0-9a-f]{12}")


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


def _runs(pid: int, start: str | None) -> bool:
    """Process ``pid``, started at ``start``, still runs (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return stat[0] != "Z" and stat[19] == start


def _id(req: dict[str, Any]) -> str:
    """The request's program id (what ``proc-start`` answered: 12 hex digits, the stem of the
    program's files), else :class:`SpecError`: never a path."""
    pid = req.get("id")
    if not isinstance(pid, str) or not GROUP.fullmatch(pid):
        raise SpecError(f"expected a program id of 12 hex digits, got {pid!r}", place="id")
    return pid


def _record(d: Path, pid: str) -> dict[str, Any]:
    return json.loads((d / f"{pid}.json").read_text())


def _signal(rec: dict[str, Any], sig: int) -> None:
    """``sig`` to the recorded process through a pidfd opened first, then checked to be that
    process (its start time): a PID reused since is never reached."""
    try:
        fd = os.pidfd_open(int(rec["pid"]))
    except (ProcessLookupError, OSError):
        return
    try:
        if _alive(rec):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


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
    pid, offset = _id(req), int(req.get("offset") or 0)
    rec = _record(d, pid)
    if req.get("signal") is not None:
        _signal(rec, int(req["signal"]))
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
    pid = _id(req)
    rec = _record(d, pid)
    grace = float(req.get("grace") or 1.0)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        _signal(rec, sig)
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
    from ...traffic.environment import tool_version  # light start-up: only measurements ask
    from ...traffic.native import sfcgen_binary

    try:
        out: dict[str, Any] = {"sfcgen": sfcgen_binary()}
    except SfclabError as e:
        out = {"sfcgen": None, "why": str(e)}
    return {**out, "iperf3": tool_version("iperf3")}


# --- programs started together: procs-start, procs-end, the group's keeper -----------------

def _argvs(req: dict[str, Any]) -> list[list[str]]:
    argvs = req.get("argvs")
    if not isinstance(argvs, list) or not 1 <= len(argvs) <= MAX_PROGRAMS:
        raise SpecError(f"expected 1 to {MAX_PROGRAMS} programs, got "
                        f"{len(argvs) if isinstance(argvs, list) else argvs!r}")
    for a in argvs:
        if not (isinstance(a, list) and 1 <= len(a) <= MAX_ARGS
                and all(isinstance(x, str) and len(x) <= MAX_ARG_CHARS for x in a)):
            raise SpecError(f"expected a program as 1 to {MAX_ARGS} arguments of at most "
                            f"{MAX_ARG_CHARS} characters, got {str(a)[:200]}")
    return argvs


def _ports(listen: Any, n: int) -> list[int] | None:
    if listen is None:
        return None
    if not (isinstance(listen, list) and len(listen) == n
            and all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535
                    for p in listen)):
        raise SpecError(f"expected a TCP port (1-65535) for each of the {n} programs, got "
                        f"{str(listen)[:200]}")
    return listen


def _seconds(req: dict[str, Any], key: str, most: float) -> float:
    x = req.get(key) or 0
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
            or not 0 <= x <= most:
        raise SpecError(f"expected {key} from 0 to {most:g} seconds, got {x!r}")
    return float(x)


def _group(req: dict[str, Any]) -> str:
    gid = req.get("group")
    if not isinstance(gid, str) or not GROUP.fullmatch(gid):
        raise SpecError(f"expected a group as procs-start named it, got {str(gid)[:40]!r}")
    return gid


def _write(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _ended_status(d: Path, gid: str, i: int) -> dict[str, Any] | None:
    """Program ``i``'s exit status and CPU seconds, once its keeper reaped it."""
    try:
        return dict(json.loads((d / f"{gid}.{i}.status").read_text()))
    except (OSError, ValueError):
        return None


def _tail(path: Path, most: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - most, 0))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _row(d: Path, gid: str, rec: dict[str, Any], i: int) -> dict[str, Any]:
    """Program ``i`` as it ended: its last output (a failure's words)."""
    st = _ended_status(d, gid, i) or {}
    return {"pid": rec["pids"][i], "status": st.get("status"), "cpu_s": st.get("cpu_s"),
            "stdout": _tail(d / f"{gid}.{i}.out"), "stderr": _tail(d / f"{gid}.{i}.err")}


def _remove(d: Path, gid: str, rec: dict[str, Any] | None) -> None:
    """The group's files, once its keeper is gone (for 2 s at most: it exits once it wrote
    how its last program ended), so nothing of the group is left when this answers."""
    pid, start = (rec or {}).get("keeper") or (0, None)
    deadline = time.monotonic() + 2.0
    while pid and _runs(pid, start) and time.monotonic() < deadline:
        time.sleep(0.01)
    for f in d.glob(f"{gid}.*"):
        f.unlink(missing_ok=True)


def _end_group(d: Path, gid: str, rec: dict[str, Any], wait: float,
               end: bool = True) -> list[bool] | None:
    """Wait up to ``wait`` seconds for every program of group ``gid`` to end by itself; end
    the rest (unless not ``end``: then None while some run).  Which ended by themselves."""
    pids, starts = rec["pids"], rec["starts"]
    deadline = time.monotonic() + wait
    pending = [i for i in range(len(pids)) if _ended_status(d, gid, i) is None]
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [i for i in pending if _ended_status(d, gid, i) is None]
    if pending and not end:
        return None
    itself = [i not in pending for i in range(len(pids))]
    start_of = {pids[i]: starts[i] for i in pending}
    netns.end_processes([pids[i] for i in pending], END_GRACE_S,
                        owned=lambda pid: _start_time(pid) == start_of[pid])
    deadline = time.monotonic() + 5.0  # the keeper reaps them and writes how they ended
    while pending and time.monotonic() < deadline:
        time.sleep(0.01)
        pending = [i for i in pending if _ended_status(d, gid, i) is None]
    return itself


def _wait_listening(d: Path, gid: str, rec: dict[str, Any], ports: list[int],
                    timeout: float) -> dict[str, Any] | None:
    """None once program *i* of the group holds a listening socket on ``ports[i]``, each;
    else the failure (the first that ended before it listened, or the time ran out)."""
    deadline = time.monotonic() + timeout
    pending = list(range(len(ports)))
    while True:
        for i in range(len(ports)):
            if _ended_status(d, gid, i) is not None:
                return {"index": i, "why": f"{rec['argv0'][i]} stopped before listening on "
                        f"port {ports[i]}", "ended": _row(d, gid, rec, i)}
        pending = [i for i in pending if ports[i] not in netns.listening(rec["pids"][i])]
        if not pending:
            return None
        if time.monotonic() > deadline:
            return {"index": None, "why": f"not listening on {[ports[i] for i in pending]} "
                    f"after {timeout:g} s", "ended": None}
        time.sleep(0.02)


def start_all(req: dict[str, Any]) -> dict[str, Any]:
    lab = str(req["lab"])
    argvs = _argvs(req)
    listen = _ports(req.get("listen"), len(argvs))
    timeout = _seconds(req, "timeout", MAX_LISTEN_S)
    d = _procs(lab)
    ns = _namespace(lab, req.get("ns"), context_ok=False)
    assert ns is not None
    gid = secrets.token_hex(6)
    _write(d / f"{gid}.argv", argvs)
    rec: dict[str, Any] | None = None
    try:
        with open(d / f"{gid}.keeper", "wb") as said:
            keeper = netns.popen(ns, [sys.executable, "-m", "sfclab.live.runtime.agent_proc",
                                      "keep-all", str(d), gid],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=said, start_new_session=True)
        deadline = time.monotonic() + START_S
        while not (d / f"{gid}.json").exists():
            if keeper.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"{argvs[0][0]} did not start in {ns}: "
                               f"{_tail(d / f'{gid}.keeper', 500).strip() or 'no output'}")
            time.sleep(0.01)
        rec = dict(json.loads((d / f"{gid}.json").read_text()))
        failed = rec.get("failed")
        if failed is None and listen is not None:
            failed = _wait_listening(d, gid, rec, listen, timeout)
        if failed is not None:
            _end_group(d, gid, rec, 0)
            _remove(d, gid, rec)
            return {"failed": failed}
    except BaseException:
        with contextlib.suppress(Exception):
            if rec is not None:
                _end_group(d, gid, rec, 0)
            _remove(d, gid, rec)
        raise
    return {"group": gid, "pids": rec["pids"]}


def _page(path: Path, offset: int, most: int) -> tuple[str, int, bool]:
    """Up to ``most`` bytes of ``path`` from ``offset``: the text, the offset after it, and
    whether more is left."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(offset)
            data = f.read(max(most, 0))
    except OSError:
        return "", offset, False
    return data.decode(errors="replace"), offset + len(data), offset + len(data) < size


def _offsets(offsets: Any, key: str, n: int) -> list[int]:
    at = offsets.get(key) if isinstance(offsets, dict) else None
    if at is None and not offsets:
        return [0] * n
    if not (isinstance(at, list) and len(at) == n
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in at)):
        raise SpecError(f"expected the {key} offsets procs-end answered ({n}, from 0), got "
                        f"{str(at)[:200]}")
    return at


def end_all(req: dict[str, Any]) -> dict[str, Any]:
    lab = str(req["lab"])
    gid = _group(req)
    wait = _seconds(req, "wait", MAX_WAIT_S)
    d = _procs(lab)
    rec = dict(json.loads((d / f"{gid}.json").read_text()))
    n = len(rec["pids"])
    offsets = req.get("offsets") or {}
    out_at, err_at = _offsets(offsets, "out", n), _offsets(offsets, "err", n)
    itself: list[bool] | None = [True] * n
    if not offsets:
        itself = _end_group(d, gid, rec, wait, end=req.get("end", True) is not False)
        if itself is None:
            return {"running": sum(_ended_status(d, gid, i) is None for i in range(n))}
    left, more, rows = PAGE_BYTES, False, []
    for i in range(n):
        st = _ended_status(d, gid, i) or {}
        row = {"pid": rec["pids"][i], "status": st.get("status"), "cpu_s": st.get("cpu_s"),
               "itself": bool(itself and itself[i])}
        for key, at, suffix in (("stdout", out_at, "out"), ("stderr", err_at, "err")):
            row[key], at[i], cut = _page(d / f"{gid}.{i}.{suffix}", at[i], left)
            left -= len(row[key].encode())
            more = more or cut
        rows.append(row)
    if not more:
        _remove(d, gid, rec)
    return {"programs": rows, "more": more, "offsets": {"out": out_at, "err": err_at}}


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


def keep_all(d: Path, gid: str) -> int:
    """The keeper of a group (see the module): its programs started, recorded, each reaped
    with its rusage and how it ended written; SIGTERM (``down``) is passed on to those still
    running.  One that cannot start ends those started before it (recorded as ``failed``)."""
    argvs = json.loads((d / f"{gid}.argv").read_text())
    running: dict[int, int] = {}  # PID -> index, until reaped (so never a PID reused)

    def pass_on(*_: object) -> None:
        for pid in list(running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, pass_on)
    pids: list[int] = []
    failed = None
    for i, argv in enumerate(argvs):
        with open(d / f"{gid}.{i}.out", "wb") as out, open(d / f"{gid}.{i}.err", "wb") as err:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            except OSError as e:
                failed = {"index": i, "why": f"cannot run {argv[0]}: {e.strerror}",
                          "ended": None}
                break
        running[proc.pid] = i
        pids.append(proc.pid)
    _write(d / f"{gid}.json", {"pids": pids, "starts": [_start_time(p) for p in pids],
                               "argv0": [a[0] for a in argvs], "failed": failed,
                               "keeper": [os.getpid(), _start_time(os.getpid())]})
    if failed is not None:
        pass_on()
    while running:
        try:
            pid, status, ru = os.wait4(-1, 0)
        except ChildProcessError:
            break
        i = running.pop(pid, -1)
        if i >= 0:
            _write(d / f"{gid}.{i}.status", {"status": os.waitstatus_to_exitcode(status),
                                             "cpu_s": ru.ru_utime + ru.ru_stime})
    return 0


VERBS = {"proc-run": run, "proc-start": start, "proc-read": read, "proc-end": end,
         "procs-start": start_all, "procs-end": end_all, "tools": tools}

if __name__ == "__main__":
    if sys.argv[1:2] == ["keep"] and sys.argv[4:5] == ["--"]:
        sys.exit(keep(Path(sys.argv[2]), sys.argv[3], sys.argv[5:]))
    if sys.argv[1:2] == ["keep-all"] and len(sys.argv) == 4 and GROUP.fullmatch(sys.argv[3]):
        sys.exit(keep_all(Path(sys.argv[2]), sys.argv[3]))
    sys.exit(2)
