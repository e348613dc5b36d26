"""Quantities of lab files, one grammar for every layer: rates (bits per second, tc's units) and
sizes (bytes).  Function parameters (:mod:`sfclab.functions.params`), hosts' memory and links'
``rate`` all read them here."""

from __future__ import annotations

import re
from typing import Any

_RATE_UNITS = {
    "bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
    "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9, "tbps": 8 * 10**12,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
    "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
}
_NUM_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


#: the largest rate tc is asked to shape (1 Tbit/s) and the largest size (1 TiB)
MAX_RATE = 10**12
MAX_SIZE = 2**40


def parse_rate(v: Any) -> int:
    """``"50mbit"`` → 50_000_000 (bits per second; tc units, ``mbps`` is megabytes/s)."""
    if isinstance(v, bool):
        raise ValueError("a rate with a unit such as '50mbit'")
    if isinstance(v, (int, float)):
        bits = float(v)
    elif isinstance(v, str):
        m = _NUM_UNIT.match(v)
        unit = m.group(2).lower() if m else None
        if not m or unit not in _RATE_UNITS:
            raise ValueError(f"a rate such as '50mbit' or '1gbit' (units: "
                             f"{', '.join(_RATE_UNITS)})")
        bits = float(m.group(1)) * _RATE_UNITS[unit]
    else:
        raise ValueError("a rate such as '50mbit'")
    if not bits > 0:
        raise ValueError("a rate greater than 0")
    if not bits <= MAX_RATE:  # also inf and nan
        raise ValueError("a rate of at most 1tbit (what tc shapes here)")
    if bits < 8:
        raise ValueError("a rate of at least 8 bit/s")
    return int(bits)


def format_rate(bits: float) -> str:
    """50_000_000 → ``"50 Mbit/s"``: a rate in the unit people read (the inverse, for display,
    of :func:`parse_rate`)."""
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:.4g} {unit}"
    return f"{bits:.4g} bit/s"


def parse_size(v: Any) -> int:
    """``"64kb"`` → 65536 bytes; ``"256M"`` → 268435456; a bare int is bytes."""
    if isinstance(v, bool):
        raise ValueError("a size is a number of bytes or a string such as '64M'")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str):
        m = _NUM_UNIT.match(v)
        unit = m.group(2).lower() if m else None
        if not m or unit not in _SIZE_UNITS:
            raise ValueError("a size such as '64kb' or '256M'")
        x = float(m.group(1)) * _SIZE_UNITS[unit]
        if not x <= MAX_SIZE:  # also inf and nan
            raise ValueError("a size of at most 1T")
        n = int(x)
    else:
        raise ValueError("a size is a number of bytes or a string such as '64M'")
    if n <= 0:
        raise ValueError("a size greater than 0")
    if n > MAX_SIZE:
        raise ValueError("a size of at most 1T")
    return n


