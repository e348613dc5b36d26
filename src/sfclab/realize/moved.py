"""Lab-file function nodes whose function ``chain migrate`` moved to a clone, as the lab's
views show them.

A lab-file node that was migrated keeps its namespace, links and addresses (the lab's routes
cross it) but no longer runs its function: it is a *transit* node, and its clone
``<node>.m<k>`` is the function now.  The record of it is ``moved/<chain>.json`` in the lab's
state (written by :mod:`sfclab.live.record`: ``{"moved": {node: clone}, "addition": ...}``);
this module only reads its ``moved`` part, for ``inspect`` and ``graph``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from .state import LabState

#: what a migrated lab-file node is shown as
TRANSIT = "transit"


def moved_dir(state: LabState) -> Path:
    """The directory of the lab's ``moved/<chain>.json`` records."""
    return state.dir / "moved"


def moved_nodes(state: LabState) -> dict[str, str]:
    """Lab-file node -> the clone that runs its function now, over every lab-file chain (an
    unreadable record is skipped: the views then show the node as the plan has it)."""
    out: dict[str, str] = {}
    d = moved_dir(state)
    if d.is_dir():
        for p in sorted(d.glob("*.json")):
            with contextlib.suppress(ValueError, KeyError, OSError, TypeError):
                out.update({str(k): str(v)
                            for k, v in dict(json.loads(p.read_text())["moved"]).items()})
    return out

