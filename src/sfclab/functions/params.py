"""Parameter types shared by the function kinds: rates, sizes, prefixes, port ranges, argv.

Each is an ``Annotated`` pydantic type, so a bad value in the lab file becomes a validation
error at the key that holds it (``nodes.fw.rules[2].dport``), which the lab core turns into a
``SpecError``.  Values are normalised on the way in: a rate becomes bits per second (int), a
size bytes (int), a prefix an ``IPv4Network``, a port range a ``(first, last)`` tuple.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from ipaddress import IPv4Network, IPv6Network
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from ..errors import SpecError

from ..spec.quantities import MAX_RATE, MAX_SIZE, parse_rate, parse_size  # noqa: F401 - one grammar

def parse_prefix(v: Any) -> IPv4Network:
    """``"198.18.1.0/24"`` or a bare address (a /32).  Host bits must be zero."""
    if not isinstance(v, str):
        raise ValueError("a prefix is a string such as '198.18.1.0/24'")
    try:
        return IPv4Network(v.strip(), strict=True)
    except ValueError as e:
        raise ValueError(f"an IPv4 prefix such as '198.18.1.0/24' ({e})") from None


def parse_prefix46(v: Any) -> IPv4Network | IPv6Network:
    """An IPv4 prefix as :func:`parse_prefix` takes, or an IPv6 one (``"2001:2:0:3::/64"``, a
    bare address: a /128).  Host bits must be zero."""
    if isinstance(v, str) and ":" in v:
        try:
            return IPv6Network(v.strip(), strict=True)
        except ValueError as e:
            raise ValueError(f"an IPv6 prefix such as '2001:2:0:3::/64' ({e})") from None
    try:
        return parse_prefix(v)
    except ValueError:
        raise ValueError("a prefix such as '198.18.1.0/24' or '2001:2:0:3::/64'") from None


def parse_ports(v: Any) -> tuple[int, int]:
    """``80`` → (80, 80); ``"1000-2000"`` → (1000, 2000)."""
    if isinstance(v, bool):
        raise ValueError("a port or port range such as 80 or '1000-2000'")
    if isinstance(v, int):
        lo = hi = v
    elif isinstance(v, str) and re.fullmatch(r"\s*\d+\s*(-\s*\d+\s*)?", v):
        parts = [int(p) for p in v.split("-")]
        lo, hi = parts[0], parts[-1]
    else:
        raise ValueError("a port or port range such as 80 or '1000-2000'")
    if not (0 <= lo <= 65535 and 0 <= hi <= 65535):
        raise ValueError("ports from 0 to 65535")
    if lo > hi:
        raise ValueError("a port range whose first port is not above its last")
    return lo, hi


def parse_argv(v: Any) -> list[str]:
    """``"prog -x"`` (split like a shell would) or ``["prog", "-x"]``; never empty."""
    if isinstance(v, str):
        try:
            argv = shlex.split(v)
        except ValueError as e:
            raise ValueError(f"a command line a shell could split ({e})") from None
    elif isinstance(v, list) and all(isinstance(a, (str, int, float)) for a in v):
        argv = [str(a) for a in v]
    else:
        raise ValueError("a command as a string or a list of strings")
    if not argv or not argv[0]:
        raise ValueError("a command that is not empty")
    return argv


def _fmt_ports(p: tuple[int, int]) -> str | int:
    return p[0] if p[0] == p[1] else f"{p[0]}-{p[1]}"


Rate = Annotated[int, BeforeValidator(parse_rate)]
Size = Annotated[int, BeforeValidator(parse_size)]
Prefix = Annotated[IPv4Network, BeforeValidator(parse_prefix), PlainSerializer(str)]
#: an IPv4 or IPv6 prefix (the kinds that carry IPv6: firewall rules)
Prefix46 = Annotated[IPv4Network | IPv6Network, BeforeValidator(parse_prefix46),
                     PlainSerializer(str)]
Ports = Annotated[tuple[int, int], BeforeValidator(parse_ports), PlainSerializer(_fmt_ports)]
Argv = Annotated[list[str], BeforeValidator(parse_argv)]


#: in an ``exec``, the Python interpreter that runs sfclab itself (its virtualenv's): a
#: function written in Python imports sfclab whatever ``python3`` in ``PATH`` is
PYTHON = "{python}"


def resolve_executable(argv0: str, place: str) -> str:
    """The absolute path of ``argv0`` (searched in ``PATH`` when it has no slash; ``{python}``:
    the interpreter running sfclab, ``sys.executable``), or ``SpecError`` at ``place``."""
    if argv0 == PYTHON:
        if not sys.executable:
            raise SpecError("'{python}' names the Python running sfclab, which cannot tell "
                            "its own path here", place=place)
        return sys.executable
    if "/" in argv0:
        p = Path(argv0)
        if p.is_file() and p.stat().st_mode & 0o111:
            return os.path.abspath(p)   # not resolve(): a venv python is a symlink
        raise SpecError(f"executable not found: {argv0}", place=place)
    found = shutil.which(argv0)
    if not found:
        raise SpecError(f"executable not found in PATH: {argv0}", place=place)
    return found


def neighbour(ctx: Any, peer: str, place: str):
    """The interface toward neighbour ``peer`` or ``SpecError`` at ``place``."""
    try:
        return ctx.interface_toward(peer)
    except KeyError:
        names = sorted({i.peer for i in ctx.interfaces})
        raise SpecError(f"{peer!r} is not a neighbour of node {ctx.node!r} "
                        f"(neighbours: {', '.join(names) or 'none'})", place=place) from None
