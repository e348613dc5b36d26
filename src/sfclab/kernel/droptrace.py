"""The kernel's packet drops in given namespaces, by reason and interface (``sfc-droptrace``).

:class:`DropTrace` runs ``native/build/sfc-droptrace`` (an eBPF program on the tracepoint
``skb:kfree_skb``, attached by a BPF link that the process holds) for the life of a ``with``
block; :meth:`DropTrace.counts` returns the drops counted so far.  Nothing is pinned: when the
process ends, however it ends, the program and its link go with it.

    with DropTrace({"r1": "/run/netns/sfclab:lab:r1"}, binary) as trace:
        ...                                   # traffic
        for d in trace.counts().drops:        # Drop(netns="r1", reason="QDISC_DROP", ...)
            ...
"""

from __future__ import annotations

import json
import select
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

from ..errors import MeasurementError


@dataclass(frozen=True)
class Drop:
    netns: str  # the name the namespace was given
    reason: str  # the kernel's drop reason without its prefix, e.g. "QDISC_DROP"
    ifindex: int  # the interface the packet was on (0: none)
    packets: int


@dataclass
class DropCounts:
    drops: list[Drop] = field(default_factory=list)
    overflow: int = 0  # drops that found no counter slot (counted, not located)

    def minus(self, earlier: DropCounts) -> DropCounts:
        """The drops since ``earlier`` (counters only grow)."""
        before = Counter({(d.netns, d.reason, d.ifindex): d.packets for d in earlier.drops})
        out = [Drop(d.netns, d.reason, d.ifindex, d.packets - before[(d.netns, d.reason,
                                                                      d.ifindex)])
               for d in self.drops]
        return DropCounts([d for d in out if d.packets > 0], self.overflow - earlier.overflow)

    def by(self, attr: str) -> dict[str, int]:
        total: Counter[str] = Counter()
        for d in self.drops:
            total[str(getattr(d, attr))] += d.packets
        return dict(total)

    @property
    def total(self) -> int:
        return sum(d.packets for d in self.drops) + self.overflow


class DropTrace:
    """Count drops in ``namespaces`` (name -> namespace file) while the block runs."""

    def __init__(self, namespaces: dict[str, str], binary: str, *, timeout: float = 10.0):
        self.namespaces = namespaces
        self.binary = binary
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> DropTrace:
        argv = [self.binary, *(f"{n}={p}" for n, p in self.namespaces.items())]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as e:
            raise MeasurementError(f"cannot start the drop tracer {self.binary}: "
                                   f"{e.strerror}") from None
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        if first != "ready":
            err = self._finish()
            raise MeasurementError(f"the drop tracer did not start: {err or first or 'no output'}")
        return self

    def counts(self) -> DropCounts:
        """The drops counted since the block began."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout
        try:
            self.proc.stdin.write("dump\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
            if not ready:
                raise MeasurementError(f"the drop tracer gave no counts within {self.timeout} s")
            line = self.proc.stdout.readline()
        except OSError as e:
            raise MeasurementError(f"the drop tracer stopped: {e}") from None
        return _parse(line)

    def _finish(self) -> str:
        assert self.proc is not None
        try:
            _out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # by PID: this process is ours
            _out, err = self.proc.communicate()
        return (err or "").strip()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._finish()


def _parse(line: str) -> DropCounts:
    try:
        d = json.loads(line)
        return DropCounts([Drop(x["netns"], x["reason"], int(x["ifindex"]), int(x["packets"]))
                           for x in d["drops"]], int(d.get("overflow", 0)))
    except (ValueError, KeyError, TypeError) as e:
        raise MeasurementError(f"the drop tracer answered {line.strip()[:200]!r} ({e})") from None
