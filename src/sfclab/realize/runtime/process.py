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
from typing import Any, Protocol

from ...kernel import netns


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
