"""Classifier entries in integers, for bulk loads (``sfclab chain classify --from-file``).

The compact twin of :func:`sfclab.plan.sfc.entries_of`: one :data:`Row` per combination of
port prefixes of a validated classifier (:class:`~sfclab.spec.classifier_file.Rule`), with the
same meaning as an :class:`~sfclab.plan.steering.EntryRow` -- addresses (32-bit for IPv4,
128-bit for IPv6) and prefix lengths, ports as (value, prefix length of 16), the IP protocol
number (0: any), the priority and the family (4, 6; 0: either) -- but no strings to parse
again, so 100,000 of them are made in a fraction of a second.  Pure.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..spec.ports import port_prefixes
from .labels import FAMILIES, PROTOS

if TYPE_CHECKING:  # light start-up: the agent loads this module with the data plane's maps
    from ..spec.classifier_file import Rule

#: (ingress, src, src_len, dst, dst_len, sport, sport_len, dport, dport_len, proto, priority,
#: family)
Row = tuple[str, int, int, int, int, int, int, int, int, int, int, int]

_ANY_NET = (0, 0)
_ANY_PORT: tuple[tuple[int, int], ...] = ((0, 0),)


@lru_cache(maxsize=4096)
def _blocks(r: tuple[int, int] | None) -> tuple[tuple[int, int], ...]:
    return _ANY_PORT if r is None else tuple(port_prefixes(*r))


def rows_of(r: Rule, *, reverse_at: str | None = None) -> list[Row]:
    """``r``'s entries; with ``reverse_at``, those of the reverse direction of a symmetric
    chain classified at that node (the ends swapped, as ``reversed_classifier`` does)."""
    src, dst, sport, dport, ingress = r.src, r.dst, r.sport, r.dport, r.ingress
    if reverse_at is not None:
        src, dst, sport, dport, ingress = dst, src, dport, sport, reverse_at
    s, sl = src or _ANY_NET
    d, dl = dst or _ANY_NET
    proto, prio, fam = PROTOS[r.proto], r.priority, FAMILIES[r.family]
    return [(ingress, s, sl, d, dl, sp, spl, dp, dpl, proto, prio, fam)
            for sp, spl in _blocks(sport) for dp, dpl in _blocks(dport)]


#: a wildcard mask: prefix lengths of source, destination, ports, and whether proto and family
#: are matched
Mask = tuple[int, int, int, int, bool, bool]


def mask_of(row: Row) -> Mask:
    """A row's wildcard mask, as :func:`sfclab.plan.sfc.mask_key` gives an entry's."""
    return (row[2], row[4], row[6], row[8], row[9] != 0, row[11] != 0)


def entry_count(r: Rule) -> int:
    """How many rows :func:`rows_of` makes of ``r`` (either direction), without making them."""
    return len(_blocks(r.sport)) * len(_blocks(r.dport))


def masks_of(r: Rule, *, reverse: bool = False) -> set[Mask]:
    """The wildcard masks (:func:`mask_of`) of ``r``'s rows, without making them; ``reverse``:
    those of the reverse direction of a symmetric chain."""
    sl = r.src[1] if r.src else 0
    dl = r.dst[1] if r.dst else 0
    sps = {n for _, n in _blocks(r.sport)}
    dps = {n for _, n in _blocks(r.dport)}
    proto = PROTOS[r.proto] != 0
    fam = FAMILIES[r.family] != 0
    if reverse:
        sl, dl, sps, dps = dl, sl, dps, sps
    return {(sl, dl, a, b, proto, fam) for a in sps for b in dps}
