"""What every command shares for talking to people: error lines, progress, JSON or text."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any


def fail(msg: str, status: int) -> int:
    """Print ``sfclab: error: MSG`` on stderr and return ``status`` (for ``return fail(...)``)."""
    print(f"sfclab: error: {msg}", file=sys.stderr)
    return status


def progress() -> Callable[[str], None] | None:
    """A progress printer with elapsed seconds when stderr is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    t0 = time.monotonic()
    return lambda m: print(f"  [{time.monotonic() - t0:6.3f}s] {m}", file=sys.stderr)


def emit(data: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    """Print ``data`` as indented JSON, or as what ``text`` makes of it (nothing if empty)."""
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        out = text(data)
        if out:
            print(out)
