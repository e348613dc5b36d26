"""``/api/labs/{lab}/chains``: a running lab's service function chains (list, inspect).

Adding, removing and migrating chains on a running lab are not in the library yet; when
``sfclab.steer`` offers them, they belong here, calling it as these routes call
``steer.chains``::

    POST   /api/labs/{lab}/chains                    add a chain (the lab file's chains: entry)
    DELETE /api/labs/{lab}/chains/{chain}            remove it
    POST   /api/labs/{lab}/chains/{chain}/migrate    move a function instance

Until then they do not exist (404 from the router), rather than pretend.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...steer import chains
from ..errors import NotFound
from ..services import known_lab

router = APIRouter(prefix="/api/labs/{lab}/chains", tags=["chains"])


def _chain_names(lab: str) -> list[str]:
    plan = known_lab(lab).plan() or {}
    steering = plan.get("steering") or {}
    return sorted({d["chain"] for d in steering.get("directions", [])})


@router.get("", summary="the lab's chains: functions, directions, paths, classifier entries")
def list_chains(lab: str) -> list[dict[str, Any]]:
    if not _chain_names(lab):
        return []  # a lab without chains has none to list
    return chains.listing(lab)


@router.get("/{chain}", summary="a chain's classifiers, label stacks, per-hop counters and "
            "shares")
def inspect_chain(lab: str, chain: str) -> dict[str, Any]:
    names = _chain_names(lab)
    if chain not in names:
        raise NotFound(f"lab '{lab}' has no chain '{chain}' (chains: "
                       f"{', '.join(names) or 'none'})")
    return chains.inspect(lab, chain)
