"""Port ranges as the data plane matches them: a range of 16-bit ports as (value, prefix
length) blocks, one classifier entry each.  Pure, and light to import (no models): the agent
of a host driven over SSH loads it with the data plane's maps on every call."""

from __future__ import annotations


def port_prefixes(lo: int, hi: int) -> list[tuple[int, int]]:
    """The range lo..hi as (value, prefix length) blocks of 16-bit ports (ranges to prefixes):
    at most 32 blocks, one data-plane entry each."""
    out: list[tuple[int, int]] = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while size > hi - lo + 1:
            size //= 2
        out.append((lo, 16 - size.bit_length() + 1))
        lo += size
    return out
