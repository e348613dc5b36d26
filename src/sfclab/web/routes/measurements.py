"""``/api/labs/{lab}/measurements`` and ``/api/measurements``: start a measurement in the
background, follow its progress, fetch its result, stop it.

The body is the typed measurement request (:mod:`sfclab.spec.measurement`), written as an
experiment file's ``measure:`` section::

    {"type": "rate", "from": "src", "to": "dst", "size": 64, "rates": ["100k", "max"]}

It is validated before anything starts, with the same words as the command line and experiment
files (422 with the place, e.g. ``rates[1]``), and checked against the lab as ``sfclab traffic``
checks it (nodes, a path between them, the frame size against the path MTU).  ``POST`` answers
202 with the measurement's id; ``GET /api/measurements/{id}`` shows its status and one progress
entry per trial (``progress``, as the measurement reported it) and the page's row of each
(``rows``: offered, received, loss, where the packets were lost, the interval an NDR/PDR search
narrowed to); ``/result`` is the measurement once done (409 while it runs); ``DELETE`` stops it.

``POST /api/labs/{lab}/measurements/check`` runs the same checks and starts nothing: 200 with
the request as it would run (every default filled in), or the 422 that ``POST`` would answer.
The page's form asks it as a person types, so the form shows the command line's words at the
field the place names.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends

from ...errors import LabError, SpecError
from ...spec.measurement import MODELS, AnyRequest, PacketRequest, RequestInvalid, to_file_form, validate
from ...spec.source import format_place
from ...traffic.measure import Endpoints
from ..contract import LabName, WITH_BODY, answers, json_body, measurement_schema
from ..errors import Clash, NotFound, validating
from ..guard import takes
from ..services import Services, known_lab, services

router = APIRouter(tags=["measurements"])

EXAMPLE = {"type": "rate", "from": "src", "to": "dst", "size": 64, "rates": ["50k", "100k"],
           "duration": 1}


def check(lab: LabName, body: Any) -> AnyRequest:
    """The request, valid and possible on ``lab`` (or 422 with the place, 404 for the lab)."""
    if not isinstance(body.get("type"), str):  # validate() looks the type up in a table
        raise SpecError(f"expected one of {', '.join(MODELS)}, got {body.get('type')!r}",
                        place="type")
    try:
        with validating("a measurement request"):
            r = validate(body)
    except RequestInvalid as e:
        raise SpecError(e.message, place=format_place(e.loc) or None) from None
    plan = known_lab(lab).plan() or {}
    nodes = [n["node"] for n in plan.get("namespaces", [])]
    pairs = r.pairs_or_one()
    for i, p in enumerate(pairs):
        for node, key in ((p.from_, "from"), (p.to, "to")):
            if node not in nodes:
                place = f"pairs[{i}]" if isinstance(r, PacketRequest) and r.pairs else key
                raise SpecError(f"expected a node of lab '{lab}' with a namespace "
                                f"({', '.join(nodes)}), got '{node}'", place=place)
        try:
            ends = Endpoints(lab, p.from_, p.to, r.ip if isinstance(r, PacketRequest) else 4)
        except LabError as e:  # no path between them: the request asks the impossible
            raise SpecError(str(e), place="to") from None
        if isinstance(r, PacketRequest):
            ends.check_size(r.size)
    return r


@router.post("/api/labs/{lab}/measurements", status_code=202, summary="start a measurement",
             openapi_extra=json_body(measurement_schema()),
             responses=answers(404, 409, 502, *WITH_BODY), dependencies=[Depends(takes())])
def start(lab: LabName, body: dict[str, Any] = Body(..., examples=[EXAMPLE]),
          s: Services = Depends(services)) -> dict[str, Any]:
    r = check(lab, body)
    return s.jobs.start(lab, to_file_form(r)).to_dict()


@router.post("/api/labs/{lab}/measurements/check", summary="check a measurement request, "
             "start nothing", openapi_extra=json_body(measurement_schema()),
             responses=answers(404, *WITH_BODY), dependencies=[Depends(takes())])
def check_only(lab: LabName, body: dict[str, Any] = Body(..., examples=[EXAMPLE])
               ) -> dict[str, Any]:
    return {"valid": True, "request": to_file_form(check(lab, body))}


@router.get("/api/measurements", summary="measurements started by this server")
def listing(lab: LabName | None = None, s: Services = Depends(services)) -> list[dict[str, Any]]:
    return [j.to_dict(full=False) for j in s.jobs.listing(lab)]


@router.get("/api/measurements/{job}", summary="a measurement's status, progress and result",
            responses=answers(404))
def get(job: int, s: Services = Depends(services)) -> dict[str, Any]:
    return s.jobs.get(job).to_dict()


@router.get("/api/measurements/{job}/result", summary="a finished measurement's result",
            responses=answers(404, 409))
def result(job: int, s: Services = Depends(services)) -> dict[str, Any]:
    j = s.jobs.get(job)
    if j.status == "running":
        raise Clash(f"measurement {job} is still running ({len(j.progress)} trials so far)")
    if j.result is None:
        raise NotFound(f"measurement {job} has no result ({j.status}: "
                       f"{(j.error or {}).get('error', 'no error recorded')})")
    return j.result


@router.delete("/api/measurements/{job}", summary="stop a running measurement (as Ctrl-C)",
               responses=answers(404))
def stop(job: int, s: Services = Depends(services)) -> dict[str, Any]:
    return s.jobs.stop(job).to_dict(full=False)
