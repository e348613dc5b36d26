"""A native helper that holds eBPF programs for its own life and answers questions a line each.

The protocol of ``sfc-droptrace`` and ``sfc-stall``: started with its arguments, the program
loads and attaches its programs, prints ``ready``, then answers every line written to its
standard input with one line, and ends at end of input (its BPF links go with the process,
however it ends).  :class:`LineHelper` starts it, asks, and ends it; every failure is a
:class:`~sfclab.errors.MeasurementError` naming the helper (``what``).
"""

from __future__ import annotations

import select
import subprocess

from ..errors import MeasurementError


class LineHelper:
    def __init__(self, argv: list[str], what: str, *, timeout: float = 10.0):
        self.argv = argv
        self.what = what
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start it and wait for its ``ready``."""
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as e:
            raise MeasurementError(f"cannot start the {self.what} {self.argv[0]}: "
                                   f"{e.strerror}") from None
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        if first != "ready":
            err = self.finish()
            raise MeasurementError(f"the {self.what} did not start: {err or first or 'no output'}")

    def ask(self, line: str) -> str:
        """Its one-line answer to ``line``."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
            if not ready:
                raise MeasurementError(f"the {self.what} gave no answer within {self.timeout} s")
            return self.proc.stdout.readline()
        except OSError as e:
            raise MeasurementError(f"the {self.what} stopped: {e}") from None

    def finish(self) -> str:
        """End it (end of input; killed by its PID if it does not end in time); its stderr."""
        assert self.proc is not None
        try:
            _out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # by PID: this process is ours
            _out, err = self.proc.communicate()
        return (err or "").strip()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
