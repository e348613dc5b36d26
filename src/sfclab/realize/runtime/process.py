"""A long-running program in one of a lab's namespaces, held by the caller: started, read line
by line, signalled, ended -- on this machine, or on a host driven by its agent.

A measurement's receiver (``sfcgen sink``) lives for the whole measurement: it is started in
the receiving node's namespace, asked for its counters by a signal after each trial (it
answers with one JSON line) and ended at the end.  :meth:`~.base.HostRuntime.spawn` starts one
where the node is and hands back a :class:`Process`:

- :class:`LocalProcess`: this machine (``netns.popen``; the child's PID is this process's own,
  its output read from a pipe);
- :class:`AgentProcess`: a host driven by its agent (over SSH, or a Kubernetes Node's agent
  through its requests).  Each agent call is a fresh process there, so the program is started
  detached by the host agent's ``proc-start`` verb (:mod:`sfclab.live.runtime.agent_proc`), its
  output written to a file of the lab's state on that host, its PID and start time recorded
  (a signal is sent only to the process that is still that one); ``proc-read`` sends a signal
  and returns the complete lines written since the caller's offset (waiting up to a timeout
  for one), ``proc-end`` ends it (SIGTERM, then SIGKILL) and returns what it wrote last.  A
  program left running when the caller dies is in one of the lab's namespaces, so ``down``
  ends it with every other process there.

A measurement's iperf3 servers and clients are programs started *together* and held as one
(:meth:`~.base.HostRuntime.spawn_all` hands back :class:`Programs`): all started in one
namespace, optionally waited for until each holds a listening TCP socket of its own on its
port (:func:`sfclab.kernel.netns.listening`: a port another program holds is not taken for
it), then ended together -- each given up to a time to end on its own, the rest ended
(SIGTERM, SIGKILL after :data:`END_GRACE_S`) -- their whole output, exit status and CPU
seconds handed back (:class:`Ended`).  A failure while they start (one could not start, or
stopped, or they did not all listen in time) ends every one that was started and raises
:class:`StartFailed`.

- :class:`LocalPrograms`: this machine (``netns.popen``, output to files, each reaped with its
  ``rusage``, ended through a pidfd);
- :class:`AgentPrograms`: a host driven by its agent: ``procs-start`` starts them under one
  *keeper* there (:mod:`sfclab.live.runtime.agent_proc`) and waits until they listen,
  ``procs-end`` waits and ends them (by pidfd, each checked to be the process recorded) and
  answers their output, a page at a time when it is long (an answer travels in one object on
  Kubernetes); a wait longer than :data:`WAIT_CHUNK_S` is asked for in several calls, each
  under the time a Kubernetes agent gives one verb.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal as signals
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import LabError, MeasurementError
from ...kernel import netns
from ...kernel.process import process_cpu_seconds, reap


class Process(Protocol):
    """A program started by :meth:`~.base.HostRuntime.spawn` (see the module)."""

    @property
    def pid(self) -> int:
        """Its PID (on its host)."""

    def readline(self, timeout: float) -> str | None:
        """Its next line of output (without the newline); None if none came in ``timeout``
        seconds or it ended."""

    def ask(self, sig: int, timeout: float) -> str | None:
        """Send it ``sig``, then its next line (as :meth:`readline`)."""

    def poll(self) -> int | None:
        """Its exit status once it ended (as last seen), else None."""

    def stderr(self) -> str:
        """What it wrote on its standard error (once it ended: all of it)."""

    def end(self, grace: float) -> list[str]:
        """End it (SIGTERM, SIGKILL after ``grace`` seconds); the lines it wrote last."""


class LocalProcess:
    """A program in namespace ``ns`` of this machine (see the module)."""

    def __init__(self, ns: str, argv: list[str]):
        self._err = tempfile.TemporaryFile()
        self.proc = netns.popen(ns, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=self._err)
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buf = b""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def readline(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                return None
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                return None  # EOF
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def ask(self, sig: int, timeout: float) -> str | None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        return self.readline(timeout)

    def poll(self) -> int | None:
        return self.proc.poll()

    def stderr(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._err.seek(0)
            return self._err.read().decode(errors="replace").strip()
        return ""

    def end(self, grace: float) -> list[str]:
        if self.proc.poll() is None:
            netns.end_processes([self.proc.pid], grace=grace)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signals.SIGKILL)
            self.proc.wait()
        lines = []
        line = self.readline(0.5)
        while line is not None:
            lines.append(line)
            line = self.readline(0.1)
        self._sel.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        with contextlib.suppress(OSError):
            self._err.close()
        return lines


#: an agent call: (verb, request, timeout) -> the agent's answer
Call = Callable[[str, dict[str, Any], float], dict[str, Any]]
#: seconds an agent call may take beyond what it waits for
SLACK_S = 60.0


class AgentProcess:
    """A program in namespace ``ns`` of a host driven by its agent, through ``call`` (see the
    module); ``lab``: whose state holds its output there."""

    def __init__(self, call: Call, lab: str, ns: str, argv: list[str]):
        self.call, self.lab = call, lab
        got = call("proc-start", {"lab": lab, "ns": ns, "argv": argv}, SLACK_S)
        self.id, self.pid = str(got["id"]), int(got["pid"])
        self.offset = 0
        self.lines: list[str] = []
        self.status: int | None = None
        self._stderr = ""

    def _read(self, sig: int | None, timeout: float) -> None:
        got = self.call("proc-read", {"lab": self.lab, "id": self.id, "offset": self.offset,
                                      "timeout": timeout, "signal": sig}, timeout + SLACK_S)
        self.lines += [str(x) for x in got.get("lines", [])]
        self.offset = int(got.get("offset", self.offset))
        if got.get("status") is not None:
            self.status = int(got["status"])
            self._stderr = str(got.get("stderr", ""))

    def readline(self, timeout: float) -> str | None:
        if not self.lines and self.status is None:
            self._read(None, timeout)
        return self.lines.pop(0) if self.lines else None

    def ask(self, sig: int, timeout: float) -> str | None:
        self._read(int(sig), timeout)
        return self.lines.pop(0) if self.lines else None

    def poll(self) -> int | None:
        return self.status

    def stderr(self) -> str:
        return self._stderr

    def end(self, grace: float) -> list[str]:
        got = self.call("proc-end", {"lab": self.lab, "id": self.id, "offset": self.offset,
                                     "grace": grace}, grace + SLACK_S)
        self.status = got.get("status") if got.get("status") is not None else -1
        self._stderr = str(got.get("stderr", ""))
        out, self.lines = self.lines + [str(x) for x in got.get("lines", [])], []
        return out


# --- programs started together and held as one ---------------------------------------------

#: seconds between looks at programs waited for
POLL_S = 0.02
#: seconds a program gets to end after SIGTERM before SIGKILL
END_GRACE_S = 1.0
#: the longest one ``procs-end`` call waits (seconds): a Kubernetes agent gives a verb 600 s
WAIT_CHUNK_S = 300.0


@dataclass
class Ended:
    """How one of :class:`Programs` ended: its PID (on its host), exit ``status`` (negative:
    the signal; None: not known), output, CPU seconds (user + system; None: not known), and
    whether it ended by ``itself`` within the wait (else it was ended)."""

    pid: int
    status: int | None
    stdout: str
    stderr: str
    cpu_s: float | None
    itself: bool


class StartFailed(MeasurementError):
    """Programs of :meth:`~.base.HostRuntime.spawn_all` that did not all start, or did not all
    listen: ``index`` is the first that failed (None: they did not all listen in time),
    ``ended`` how it ended (None: it never ran, or still ran), ``why`` what happened.  Every
    one that was started has been ended."""

    def __init__(self, why: str, index: int | None, ended: Ended | None = None):
        super().__init__(why)
        self.why, self.index, self.ended = why, index, ended


class Programs(Protocol):
    """Programs started by :meth:`~.base.HostRuntime.spawn_all` (see the module)."""

    @property
    def pids(self) -> list[int]:
        """Their PIDs (on their host), in the order given."""

    def end(self, wait: float) -> list[Ended]:
        """Wait up to ``wait`` seconds for every one to end by itself, end the rest; how
        each ended, in the order given.  Called again: the same answer, nothing more done."""


class _Held:
    """One program of :class:`LocalPrograms`: its output in files, reaped with its rusage;
    added to ``owner`` as soon as it runs (so a Ctrl-C right after still finds it)."""

    def __init__(self, ns: str, argv: list[str], owner: list[_Held]):
        self.argv = argv
        self.status: int | None = None
        self.cpu_s: float | None = None
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        try:
            self.popen = netns.popen(ns, argv, stdout=self.out, stderr=self.err,
                                     stdin=subprocess.DEVNULL, text=True)
        except (OSError, subprocess.SubprocessError) as e:
            self.close()
            raise StartFailed(f"cannot start {argv[0]} in {ns}: {e}", len(owner)) from e
        self.pid = self.popen.pid
        owner.append(self)

    def poll(self) -> bool:
        """Reap it if it exited; True once it has."""
        if self.status is not None:
            return True
        try:
            r = reap(self.pid)
        except ChildProcessError:  # reaped elsewhere; status unknown
            r = (self.popen.returncode or 0, self.cpu_s or 0.0)
        if r is None:
            return False
        self.status, self.cpu_s = r
        self.popen.returncode = self.status
        return True

    def output(self) -> tuple[str, str]:
        self.out.seek(0)
        self.err.seek(0)
        return self.out.read(), self.err.read()

    def ended(self, itself: bool) -> Ended:
        return Ended(self.pid, self.status, *self.output(), self.cpu_s, itself)

    def close(self) -> None:
        self.out.close()
        self.err.close()


class LocalPrograms:
    """``argvs`` started together in namespace ``ns`` of this machine (see the module); with
    ``listen``, returned once program *i* listens on TCP port ``listen[i]`` (within
    ``timeout`` seconds)."""

    def __init__(self, ns: str, argvs: list[list[str]], listen: list[int] | None = None,
                 timeout: float = 5.0):
        if not netns.exists(ns):
            raise LabError(f"no network namespace {ns!r}")
        self._held: list[_Held] = []
        self._ended: list[Ended] | None = None
        try:
            for argv in argvs:
                _Held(ns, argv, self._held)
            if listen is not None:
                self._wait_listening(ns, listen, timeout)
        except BaseException:
            self.end(0)
            raise

    @property
    def pids(self) -> list[int]:
        return [h.pid for h in self._held]

    def _wait_listening(self, ns: str, ports: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = set(range(len(self._held)))
        while True:
            for i, h in enumerate(self._held):
                if h.poll():
                    raise StartFailed(f"{h.argv[0]} stopped before listening on port "
                                      f"{ports[i]}", i, h.ended(True))
            pending = {i for i in pending if ports[i] not in netns.listening(self._held[i].pid)}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise StartFailed(f"not listening in {ns} on {sorted(ports[i] for i in pending)} "
                                  f"after {timeout:g} s", None)
            time.sleep(POLL_S)

    def end(self, wait: float) -> list[Ended]:
        if self._ended is not None:
            return self._ended
        deadline = time.monotonic() + wait
        while not all(h.poll() for h in self._held) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        itself = [h.poll() for h in self._held]
        alive = [h for h, done in zip(self._held, itself) if not done]
        for h in alive:  # sampled before it is ended: /proc/PID/stat goes once it is reaped
            h.cpu_s = process_cpu_seconds(h.pid)
        if alive:
            netns.end_processes([h.pid for h in alive], END_GRACE_S)
        for h in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                h.popen.wait(timeout=2)
            if h.popen.returncode is not None:
                h.status = h.popen.returncode
        self._ended = [h.ended(done) for h, done in zip(self._held, itself)]
        for h in self._held:
            h.close()
        return self._ended


def _ended_of(row: dict[str, Any], itself: bool) -> Ended:
    return Ended(int(row.get("pid") or 0),
                 None if row.get("status") is None else int(row["status"]),
                 str(row.get("stdout", "")), str(row.get("stderr", "")),
                 None if row.get("cpu_s") is None else float(row["cpu_s"]), itself)


class AgentPrograms:
    """``argvs`` started together in namespace ``ns`` of a host driven by its agent, through
    ``call`` (see the module); ``lab``: whose state holds their output there."""

    def __init__(self, call: Call, lab: str, ns: str, argvs: list[list[str]],
                 listen: list[int] | None = None, timeout: float = 5.0):
        self.call, self.lab = call, lab
        self._ended: list[Ended] | None = None
        got = call("procs-start", {"lab": lab, "ns": ns, "argvs": argvs, "listen": listen,
                                   "timeout": timeout}, timeout + SLACK_S)
        failed = got.get("failed")
        if failed is not None:
            index = failed.get("index")
            raise StartFailed(str(failed.get("why", "")), None if index is None else int(index),
                              None if failed.get("ended") is None
                              else _ended_of(failed["ended"], True))
        self.group = str(got["group"])
        self._pids = [int(p) for p in got["pids"]]

    @property
    def pids(self) -> list[int]:
        return list(self._pids)

    def end(self, wait: float) -> list[Ended]:
        if self._ended is not None:
            return self._ended
        req: dict[str, Any] = {"lab": self.lab, "group": self.group}
        deadline = time.monotonic() + max(wait, 0.0)
        while True:  # a long wait in calls of at most WAIT_CHUNK_S, ending nothing
            left = max(deadline - time.monotonic(), 0.0)
            last = left <= WAIT_CHUNK_S
            got = self.call("procs-end", {**req, "wait": min(left, WAIT_CHUNK_S), "end": last},
                            min(left, WAIT_CHUNK_S) + SLACK_S)
            if "programs" in got:
                break
        first = got["programs"]
        outs = [[str(r.get("stdout", "")), str(r.get("stderr", ""))] for r in first]
        while got.get("more"):  # the rest of a long output, a page at a time
            got = self.call("procs-end", {**req, "wait": 0, "offsets": got["offsets"]}, SLACK_S)
            for o, r in zip(outs, got["programs"]):
                o[0] += str(r.get("stdout", ""))
                o[1] += str(r.get("stderr", ""))
        self._ended = [_ended_of({**r, "stdout": o[0], "stderr": o[1]}, bool(r.get("itself")))
                       for r, o in zip(first, outs)]
        return self._ended
