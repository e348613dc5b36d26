"""Text that may reach the kernel or a program: no NUL anywhere in a document.

Every string of a lab or chain file can end up an argv element (``exec``), a path (``state``,
``key``), a kernel name (interfaces, namespaces, nftables sets) or a mark.  C sees a string up
to its first NUL, so ``"prog\\0--evil"`` would be checked as one thing and run as another (or
be refused by the kernel at ``up``, after ``validate`` said yes).  :func:`refuse_nul` walks
the whole parsed document, keys and values, before anything else is read from it.
"""

from __future__ import annotations

from typing import Any

from .source import Document


def nul_place(data: Any) -> tuple[Any, ...] | None:
    """The place of a string (key or value) in ``data`` holding a NUL, or None."""
    todo: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while todo:
        place, v = todo.pop()
        if isinstance(v, str):
            if "\0" in v:
                return place
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and "\0" in k:
                    return place + (k,)
                todo.append((place + (k,), x))
        elif isinstance(v, (list, tuple)):
            todo.extend((place + (i,), x) for i, x in enumerate(v))
    return None


def refuse_nul(doc: Document, data: Any, prefix: tuple[Any, ...] = ()) -> None:
    """Raise a located SpecError at a string of ``data`` that holds a NUL."""
    place = nul_place(data)
    if place is not None:
        raise doc.error("expected text without a NUL character (\\0)", prefix + place)
