"""What an ingress host's watcher knows of the instances other hosts' watchers probe (pure
logic behind a :class:`Clock`, tested with a fake one).

Each peer host (a :class:`Peer`) is known by its last accepted :class:`~.peermsg.Report`:
the instances it said alive and dead, and when it was heard.  A report older than the last
one accepted from that host (same ``epoch``, not a higher ``seq``; or an older ``epoch``: a
watcher started earlier) is refused, so a replayed datagram changes nothing.  A host not heard
for :data:`PEER_TIMEOUT_S` is *lost* (the host or its watcher died): every instance it last
reported is then taken as dead until it is heard again.  An instance no host reported is not in
:meth:`PeerTable.status` (unknown: left in its group, as before any report).
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

from .peermsg import Report

#: a watcher reports its instances at least this often
HEARTBEAT_S = 0.1
#: a host whose watcher was not heard for this long is lost (three heartbeats)
PEER_TIMEOUT_S = 0.3


class Clock(abc.ABC):
    @abc.abstractmethod
    def now(self) -> float:
        """Seconds, monotonic."""


class MonotonicClock(Clock):
    def now(self) -> float:
        return time.monotonic()


@dataclass
class Peer:
    heard: float
    epoch: int
    seq: int
    alive: set[str] = field(default_factory=set)
    dead: set[str] = field(default_factory=set)


class PeerTable:
    def __init__(self, clock: Clock, timeout: float = PEER_TIMEOUT_S):
        self.clock = clock
        self.timeout = timeout
        self.peers: dict[str, Peer] = {}

    def heard(self, r: Report) -> bool:
        """Take report ``r`` in (True) unless it is older than the last one from its host."""
        p = self.peers.get(r.host)
        if p is not None and (r.epoch, r.seq) <= (p.epoch, p.seq):
            return False
        self.peers[r.host] = Peer(self.clock.now(), r.epoch, r.seq, set(r.alive), set(r.dead))
        return True

    def lost(self) -> set[str]:
        """The hosts heard once and not for :attr:`timeout` since."""
        now = self.clock.now()
        return {h for h, p in self.peers.items() if now - p.heard > self.timeout}

    def status(self) -> dict[str, bool]:
        """Each reported instance: alive or not (every instance of a lost host: not); when two
        hosts report one instance (it moved), the one heard last."""
        lost = self.lost()
        out: dict[str, bool] = {}
        for h, p in sorted(self.peers.items(), key=lambda kv: kv[1].heard):
            for i in p.alive | p.dead:
                out[i] = i in p.alive and h not in lost
        return out

    def host_of(self, instance: str) -> str | None:
        """The host that last reported ``instance``."""
        got = [(p.heard, h) for h, p in self.peers.items() if instance in p.alive | p.dead]
        return max(got)[1] if got else None

    def forget(self, keep: set[str]) -> None:
        """Drop the hosts not in ``keep`` (no longer the lab's)."""
        self.peers = {h: p for h, p in self.peers.items() if h in keep}
