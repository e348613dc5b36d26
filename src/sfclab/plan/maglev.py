"""Slot tables by Maglev consistent hashing (Eisenbud et al., NSDI 2016), so that failover and
scaling move only the flows they must.

Pure and root-free.  A chain direction's *slot table* maps ``flow hash % size`` to one of its
paths; a path is named by its *key*, the stable names of its function instances joined
(:func:`path_key`), never by its position, so the same instances give the same table on every
host and after every re-plan.

The model, per direction:

- Each path has a *permutation* of the slots, from two hashes of its key (BLAKE2b with two
  keys, so no host's string hash enters): ``offset = h1 % size``, ``skip = h2 % (size-1) + 1``,
  ``slot j = (offset + j * skip) % size``.  ``size`` is prime, so every permutation visits
  every slot.
- :func:`table` fills the slots in rounds, paths in key order: each round a path earns its
  weight in credit and, per largest weight of credit, takes its next free preferred slot; so
  slots are shared in proportion to the weights.
- :func:`failover` is the table when some paths are out (weight 0): every slot of the *full*
  table (all paths with their planned weights) whose path is still in keeps it; only the slots
  of the paths that are out are given to the Maglev table of the paths left.  So when an
  instance dies exactly its flows move, and when it comes back exactly the slots it had are
  given back to it.  Adding a path (scaling) is a new full table: besides the slots the new
  path takes (its share), Maglev moves a small fraction of the others (measured in
  tests/unit/test_maglev.py: under 2 % of the slots for a fourth instance with 1021 slots).

:data:`SIZE` is the largest prime the data plane's slot array holds (``SFC_MAX_SLOTS``), fixed
for every direction: a table that changed size would move every flow (the slot is ``hash %
size``).  It is at least 100 times the paths of a direction up to ten paths, where Maglev's
shares are within about 1 % of the weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ..spec.limits import SLOTS


def _largest_prime_upto(n: int) -> int:
    def prime(k: int) -> bool:
        return k >= 2 and all(k % d for d in range(2, int(k ** 0.5) + 1))
    while not prime(n):
        n -= 1
    return n


#: slots of every direction's table: the largest prime within the data plane's slot array
SIZE = _largest_prime_upto(SLOTS)


def path_key(instances: Sequence[str]) -> str:
    """A path's stable name: its function instances in chain order (a path through no
    function has the empty key)."""
    return "/".join(instances)


def _hash(key: str, salt: bytes) -> int:
    d = hashlib.blake2b(key.encode(), digest_size=8, key=salt).digest()
    return int.from_bytes(d, "little")


def permutation(key: str, size: int = SIZE) -> tuple[int, int]:
    """(offset, skip) of ``key``'s preference list: slot ``(offset + j * skip) % size`` is its
    ``j``-th choice."""
    return _hash(key, b"sfclab-maglev-offset") % size, \
        _hash(key, b"sfclab-maglev-skip") % (size - 1) + 1


def table(keys: Sequence[str], weights: Sequence[int], size: int = SIZE) -> list[int]:
    """Slot -> index into ``keys`` of the paths with weight > 0, shared by ``weights``.
    Raises ValueError when no weight is left or a key is repeated."""
    if len(set(keys)) != len(keys):
        raise ValueError("path keys must be distinct")
    live = sorted((i for i, w in enumerate(weights) if w > 0), key=lambda i: keys[i])
    if not live:
        raise ValueError("no path with a weight left")
    top = max(weights[i] for i in live)
    perm = {i: permutation(keys[i], size) for i in live}
    nxt = dict.fromkeys(live, 0)
    credit = dict.fromkeys(live, 0)
    entry = [-1] * size
    filled = 0
    while True:
        for i in live:
            credit[i] += weights[i]
            while credit[i] >= top:
                credit[i] -= top
                off, skip = perm[i]
                c = (off + nxt[i] * skip) % size
                while entry[c] >= 0:
                    nxt[i] += 1
                    c = (off + nxt[i] * skip) % size
                entry[c] = i
                nxt[i] += 1
                filled += 1
                if filled == size:
                    return entry


def failover(keys: Sequence[str], planned: Sequence[int], weights: Sequence[int],
             size: int = SIZE, full: Sequence[int] | None = None) -> list[int] | None:
    """The table with ``weights`` (0: the path is out) against the ``planned`` weights: the
    full table's slots whose path is in, the others from the table of the paths left.  None
    when no path is left.  ``full``: the full table when it is already known (the plan's)."""
    if not any(w > 0 for w in weights):
        return None
    full = list(full) if full is not None else table(keys, planned, size)
    if all((w > 0) == (p > 0) for w, p in zip(weights, planned, strict=True)):
        return full
    rest = table(keys, weights, size)
    return [s if weights[s] > 0 else r for s, r in zip(full, rest)]
