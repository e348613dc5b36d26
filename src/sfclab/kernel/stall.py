"""How long given threads were kept from running once they had work (``sfc-stall``).

A thread is *held* from the moment it is woken, or preempted while runnable, until it runs
(``bpf/sched_stall.bpf.c``; the wake-up is timed in the waker's context, so one that reaches
its core late counts too).  :class:`StallMeter` runs ``native/build/sfc-stall`` over some thread
ids for the life of a ``with`` block; each :meth:`StallMeter.read` returns, per thread, the
longest hold since the previous read (one still going on counts until now) and the holds so
far.  Nothing is pinned: when the process ends, however it ends, the programs go with it.

    with StallMeter([napi_tid], binary) as meter:
        meter.read()                      # start
        ...                               # a trial
        longest = meter.read()[napi_tid].longest_s
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ..errors import MeasurementError
from .linehelper import LineHelper

ENV_BINARY = "SFCLAB_STALL"
#: the most threads one meter watches (the program's map)
MAX_THREADS = 64


def stall_binary() -> str:
    """``$SFCLAB_STALL``, else ``native/build/sfc-stall`` of this checkout."""
    return os.environ.get(ENV_BINARY) or str(
        Path(__file__).resolve().parents[3] / "native" / "build" / "sfc-stall")


@dataclass(frozen=True)
class Holds:
    longest_s: float  # the longest hold since the previous read
    total_s: float  # all holds since the meter started
    count: int


class StallMeter:
    """Watch ``tids`` (thread ids) while the block runs."""

    def __init__(self, tids: list[int], binary: str | None = None, *, timeout: float = 10.0):
        if not 0 < len(tids) <= MAX_THREADS:
            raise ValueError(f"a stall meter watches 1 to {MAX_THREADS} threads")
        self.tids = list(tids)
        self.helper = LineHelper([binary or stall_binary(), *map(str, tids)], "stall meter",
                                 timeout=timeout)

    def __enter__(self) -> StallMeter:
        self.helper.start()
        return self

    def read(self) -> dict[int, Holds]:
        """Per thread id, the holds since the previous read (the first: since the start)."""
        return parse(self.helper.ask("read"))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.helper.running():
            self.helper.finish()


def parse(line: str) -> dict[int, Holds]:
    """``TID:MAX:TOTAL:COUNT ...`` (nanoseconds) -> tid -> :class:`Holds`."""
    out: dict[int, Holds] = {}
    try:
        for field in line.split():
            tid, longest, total, count = (int(x) for x in field.split(":"))
            out[tid] = Holds(longest / 1e9, total / 1e9, count)
    except ValueError:
        raise MeasurementError(f"the stall meter answered {line.strip()[:200]!r}") from None
    if not out:
        raise MeasurementError("the stall meter answered nothing")
    return out
