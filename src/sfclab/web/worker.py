"""One measurement in a process of its own: ``python -m sfclab.web.worker LAB``.

Reads the request (the typed request's JSON form) on stdin, runs it with
:func:`sfclab.traffic.measure.run` and writes one JSON object per line on the stdout it was
given: ``{"event": "progress", "data": ...}`` per trial, then ``{"event": "result", "data":
measurement}`` or ``{"event": "error", "status": HTTP status, "body": error body}``.  Anything
the library or its tools print goes to stderr.  SIGINT interrupts it the way Ctrl-C interrupts
``sfclab traffic``: every context manager unwinds (generators ended, steering restored).
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
    from ..spec.measurement import validate  # light start-up: after the streams are set
    from ..traffic import measure
    from .errors import body, status_of

    try:
        request = validate(json.loads(sys.stdin.read()))
        m = measure.run(argv[0], request, progress=lambda d: _say(out, "progress", data=d))
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
