"""What changes between two invocations of one experiment on one host, recorded with its
environment so a comparison can list it: the commit of the sfclab source tree that ran (with
``+dirty`` when its tracked files differ from that commit; ``unknown`` outside a git checkout)
and the load average at the start (``/proc/loadavg``: 1, 5 and 15 minutes)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from ..traffic.environment import environment

SOURCE = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def commit() -> str:
    head = _git("rev-parse", "--short=12", "HEAD")
    if not head:
        return "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return head + ("+dirty" if dirty else "")


def load(path: str = "/proc/loadavg") -> list[float] | None:
    try:
        return [float(v) for v in Path(path).read_text().split()[:3]]
    except (OSError, ValueError):
        return None


def invocation() -> dict[str, Any]:
    """``{"commit": ..., "load": [1, 5, 15 min]}`` for this invocation's environment record."""
    return {"commit": commit(), "load": load()}


def recorded_environment() -> dict[str, Any]:
    """The host environment (:func:`sfclab.traffic.environment.environment`) with this
    invocation's commit and load: what ``sfclab run`` records once per invocation."""
    return {**invocation(), **environment()}
