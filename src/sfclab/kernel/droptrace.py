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
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

from ..errors import MeasurementError
from .linehelper import LineHelper


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
        self.helper = LineHelper([binary, *(f"{n}={p}" for n, p in namespaces.items())],
                                 "drop tracer", timeout=timeout)

    def __enter__(self) -> DropTrace:
        self.helper.start()
        return self

    def counts(self) -> DropCounts:
        """The drops counted since the block began."""
        return _parse(self.helper.ask("dump"))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.helper.running():
            self.helper.finish()


def _parse(line: str) -> DropCounts:
    try:
        d = json.loads(line)
        return DropCounts([Drop(x["netns"], x["reason"], int(x["ifindex"]), int(x["packets"]))
                           for x in d["drops"]], int(d.get("overflow", 0)))
    except (ValueError, KeyError, TypeError) as e:
        raise MeasurementError(f"the drop tracer answered {line.strip()[:200]!r} ({e})") from None
