"""The messages health watchers on hosts driven over SSH send each other (:mod:`.peerwatch`).

A :class:`Report` is what one host's watcher sees of its *own* instances: those alive, those
dead.  It is sent as one UDP datagram at once when one of them changes (``kind`` "change")
and every :data:`sfclab.live.health.peertable.HEARTBEAT_S` (``kind`` "beat").

On the wire: ``MAGIC`` (4 bytes), an HMAC-SHA256 of ``MAGIC`` and the body under the lab's
secret (32 bytes), then the body, compact JSON: ``lab``, ``host`` (the sender), ``epoch`` (the
sender watcher's start, in ns) and ``seq`` (its message count: together they order a sender's
messages, so a replayed one is refused by :class:`~sfclab.live.health.peertable.PeerTable`),
``kind``, ``alive``, ``dead``.  :func:`decode` answers ``None`` for anything that is not a
well-formed report of the lab, signed with its secret, from one of its hosts: a forged,
altered, truncated or foreign datagram is ignored, never raised.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field

MAGIC = b"SFW1"
MAC_LEN = 32
KINDS = ("change", "beat")
MAX_LEN = 60000  # one datagram


@dataclass(frozen=True)
class Report:
    lab: str
    host: str
    epoch: int
    seq: int
    kind: str
    alive: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


def _mac(secret: str, data: bytes) -> bytes:
    return hmac.new(secret.encode(), data, hashlib.sha256).digest()


def encode(r: Report, secret: str) -> bytes:
    body = json.dumps({"lab": r.lab, "host": r.host, "epoch": r.epoch, "seq": r.seq,
                       "kind": r.kind, "alive": sorted(r.alive), "dead": sorted(r.dead)},
                      separators=(",", ":"), sort_keys=True).encode()
    return MAGIC + _mac(secret, MAGIC + body) + body


def _names(v: object) -> list[str] | None:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        return None
    return list(v)


def decode(data: bytes, lab: str, secret: str, hosts: set[str]) -> Report | None:
    """The report in ``data`` if it is one of lab ``lab``, signed with ``secret``, from one of
    ``hosts``; else None."""
    if len(data) <= len(MAGIC) + MAC_LEN or len(data) > MAX_LEN or not data.startswith(MAGIC):
        return None
    mac, body = data[len(MAGIC):len(MAGIC) + MAC_LEN], data[len(MAGIC) + MAC_LEN:]
    if not secret or not hmac.compare_digest(mac, _mac(secret, MAGIC + body)):
        return None
    try:
        d = json.loads(body)
    except ValueError:
        return None
    if not isinstance(d, dict) or d.get("lab") != lab or d.get("host") not in hosts:
        return None
    epoch, seq, kind = d.get("epoch"), d.get("seq"), d.get("kind")
    alive, dead = _names(d.get("alive")), _names(d.get("dead"))
    if not isinstance(epoch, int) or not isinstance(seq, int) or kind not in KINDS \
            or alive is None or dead is None:
        return None
    return Report(lab, d["host"], epoch, seq, kind, alive, dead)
