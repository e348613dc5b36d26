"""One measurement in a process of its own: ``python -m sfclab.web.worker LAB``.

Reads the request (the typed request's JSON form) on stdin, runs it with
:func:`sfclab.traffic.measure.run` and writes one JSON object per line on the stdout it was
given: ``{"event": "progress", "data": ...}`` per trial, then ``{"event": "result", "data":
measurement}`` or ``{"event": "error", "status": HTTP status, "body": error body}``.  Anything
the library or its tools print goes to stderr.  SIGINT interrupts it the way Ctrl-C interrupts
``sfclab traffic``: every context manager unwinds (generators ended, steering restored).  The
worker is a child subreaper (:mod:`sfclab.kernel.process`): a tool whose start the interrupt
cut short, which the measurement never learned the PID of, is still its child, and is ended
by PID before the worker exits; and an interrupt that lands while a child is forked is
raised again rather than lost.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO


def _say(out: TextIO, event: str, **kw: Any) -> None:
    out.write(json.dumps({"event": event, **kw}, default=str) + "\n")
    out.flush()


def main(argv: list[str]) -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints must not corrupt the event stream
    from ..kernel import process  # light start-up: after the streams are set

    process.interrupts_never_lost()
    with process.owning_children():
        return _measure(argv[0], out)


def _measure(lab: str, out: TextIO) -> int:
    """Run the request on stdin on ``lab``, saying how it went on ``out``; the exit status."""
    from ..spec.measurement import validate
    from ..traffic import measure
    from .errors import body, status_of

    try:
        request = validate(json.loads(sys.stdin.read()))
        m = measure.run(lab, request, progress=lambda d: _say(out, "progress", data=d))
    except KeyboardInterrupt:
        _say(out, "error", status=499, body={"error": "stopped", "type": "Stopped"})
        return 130
    except Exception as e:  # every failure is reported on the stream, typed or not
        _say(out, "error", status=status_of(e), body=body(e))
        return 1
    _say(out, "result", data=m.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
