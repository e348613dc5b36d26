"""The classifier's flow hash, as the data plane computes it (``sfc_flow_hash`` in
``include/sfc.h``), so a probe can be made to land on a chosen path (``chain trace``).

Pure.  The data plane hashes header fields as it loads them on this little-endian machine:
addresses and ports in network byte order read as native integers.  A symmetric chain hashes
only the server side (forward: destination address and ports; reverse: source address and
ports swapped back), so both directions of a flow pick the same slot.  An IPv6 address is
folded to one word first, the exclusive or of its four words (as the classifier does).  The slot is
``hash % nslots`` of the direction's slot table, whose entries are path-table indices.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

M32 = 0xFFFFFFFF
SEED = 0x5FC1


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (32 - r))) & M32


def mix(h: int, v: int) -> int:
    v = (v * 0xCC9E2D51) & M32
    v = _rotl(v, 15)
    v = (v * 0x1B873593) & M32
    h ^= v
    h = _rotl(h, 13)
    return (h * 5 + 0xE6546B64) & M32


def _be32(a: IPv4Address | IPv6Address) -> int:
    """The address as the data plane loads it: an IPv4 one's word, an IPv6 one folded."""
    b, out = a.packed, 0
    for i in range(0, len(b), 4):
        out ^= int.from_bytes(b[i:i + 4], "little")
    return out


def _be16(port: int) -> int:
    return int.from_bytes(port.to_bytes(2, "big"), "little")


def flow_hash(src: IPv4Address | IPv6Address, dst: IPv4Address | IPv6Address, sport: int, dport: int, proto: int,
              symmetric: int) -> int:
    """``symmetric``: 0 (one-way chain), 1 (forward of a symmetric one), 2 (its reverse)."""
    s, d, sp, dp = _be32(src), _be32(dst), _be16(sport), _be16(dport)
    h = SEED
    if symmetric == 1:
        h = mix(h, d)
        h = mix(h, ((dp << 16) | sp) & M32)
    elif symmetric == 2:
        h = mix(h, s)
        h = mix(h, ((sp << 16) | dp) & M32)
    else:
        h = mix(h, s)
        h = mix(h, d)
        h = mix(h, ((sp << 16) | dp) & M32)
    h = mix(h, proto)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def slot_of(nslots: int, h: int) -> int:
    return h % nslots if nslots else 0
