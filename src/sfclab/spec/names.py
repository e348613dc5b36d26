"""The name rule for labs, nodes and interfaces, in one place.

A lab or node name is letters, digits, ``_``, ``.`` or ``-``, starting with a letter or digit;
a lab name is at most 32 characters, a node name at most 48.  Names never contain ``:``, the
separator of the names sfclab derives from them (namespaces ``sfclab:<lab>:<node>``, marks
``sfclab:<lab>:<node>:link<N>``), so two different (lab, node) pairs never derive one name.
Every name that arrives from outside (a file, the command line) is checked here before any path
or kernel name is built from it.

An interface name follows the kernel's rule (``dev_valid_name``: 1 to 15 bytes, not ``.`` or
``..``, no ``/``, ``:`` or white space), narrowed to :data:`IFNAME_RE`, and is none of
:data:`RESERVED_IFNAMES`: ``lo`` is in every namespace already, and a device named ``all`` or
``default`` cannot register (its sysctl folder ``net/ipv4/conf/<name>`` is the kernel's own).
"""

from __future__ import annotations

import re

from ..errors import SpecError

#: ``\Z``, not ``$``: ``$`` also matches before a final line break, and ``"a\n"`` is no name
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}\Z")
LAB_NAME_MAX = 32
NODE_NAME_MAX = 48
NAME_WORDS = "letters, digits, '_', '.' or '-', starting with a letter or digit"
RESERVED_IFNAMES = frozenset({"lo", "all", "default"})
IFNAME_WORDS = (f"an interface name of 1 to 15 {NAME_WORDS}, other than "
                f"{', '.join(sorted(RESERVED_IFNAMES))}")


def ifname_problem(name: object) -> str | None:
    """What is wrong with ``name`` as an interface name sfclab makes, or None."""
    if not isinstance(name, str) or not IFNAME_RE.match(name) or name in RESERVED_IFNAMES:
        return IFNAME_WORDS
    return None


def lab_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a lab name, or None."""
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > LAB_NAME_MAX:
        return f"a lab name of {NAME_WORDS}, at most {LAB_NAME_MAX} characters"
    return None


def check_lab_name(name: str, place: str = "lab") -> str:
    """Return ``name`` if it is a valid lab name, else raise a :class:`SpecError` at ``place``."""
    problem = lab_name_problem(name)
    if problem:
        raise SpecError(f"expected {problem}, got {name!r}", place=place)
    return name


def node_name_ok(name: str) -> bool:
    return NAME_RE.match(name) is not None and len(name) <= NODE_NAME_MAX
