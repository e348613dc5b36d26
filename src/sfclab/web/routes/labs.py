"""``/api/labs``: list, inspect, up (from a posted lab file), down; a lab's topology, its live
interface counters and the per-node loss of its last measurement.

``POST /api/labs`` takes the lab file itself as the body (``Content-Type: application/yaml``, or
``application/json``: anything else is 415), validated exactly as ``sfclab up FILE`` validates
it: a bad file is 422 with the file, line and place; a lab of that name already up, or one being
built or removed, is 409.  Its declared schema is :func:`..contract.lab_file_schema`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool

from ...plan.model import Plan
from ...realize import containers, lifecycle
from ...realize.inspect import inspect
from ...realize.kinds import load_lab_text
from ...realize.moved import moved_nodes
from ...spec.source import decode
from ..contract import LabName, WITH_BODY, answers, json_body, lab_file_schema
from ..errors import Clash, validating
from ..guard import JSON, YAML, takes
from ..services import Services, known_lab, services
from ..topology import topology

router = APIRouter(prefix="/api/labs", tags=["labs"])

LAB_FILE = json_body(lab_file_schema(), YAML, JSON)


@router.get("", summary="list labs")
def list_labs() -> list[dict[str, Any]]:
    return lifecycle.listing()


def _up(text: str, source: str) -> dict[str, Any]:
    with validating("a lab file", source):
        lab = load_lab_text(text, source)
    plan = lifecycle.up(lab)
    return {"name": plan.lab, "namespaces": len(plan.namespaces),
            "links": len({i.link for i in plan.interfaces}),
            "ovs_bridges": len(plan.ovs_bridges), "routes": len(plan.routes)}


@router.post("", status_code=201, summary="build a lab from a posted lab file",
             openapi_extra=LAB_FILE, responses=answers(409, 502, *WITH_BODY),
             dependencies=[Depends(takes(YAML, JSON))])
async def up(request: Request, source: Annotated[str, Query(
        max_length=200, description="the file name errors give")] = "<posted lab>") -> dict[str, Any]:
    data = await request.body()  # bounded by the guard (spec.source.MAX_BYTES)
    return await run_in_threadpool(_up, decode(data, source), source)


@router.get("/{lab}", summary="a lab's nodes, interfaces, addresses, routes and bridges",
            responses=answers(404, 502))
def inspect_lab(lab: LabName) -> dict[str, Any]:
    known_lab(lab)
    return inspect(lab)


@router.delete("/{lab}", summary="remove a lab completely", responses=answers(404, 409, 502))
def down(lab: LabName, s: Services = Depends(services)) -> dict[str, Any]:
    known_lab(lab)
    job = s.jobs.running(lab)
    if job is not None:
        raise Clash(f"measurement {job.id} is running on lab '{lab}'; stop it first "
                    f"(DELETE /api/measurements/{job.id})")
    s.counters.forget(lab)
    return {lab: lifecycle.down(lab).to_dict()}


@router.get("/{lab}/topology", summary="the lab as a graph: nodes, groups, links, chains "
            "(a migrated lab-file node as transit, moved to its clone)",
            responses=answers(404, 409))
def lab_topology(lab: LabName) -> dict[str, Any]:
    state = known_lab(lab)
    plan = state.plan()
    if plan is None:
        raise Clash(f"lab '{lab}' has no plan yet (it is being built)")
    shown = containers.states(lab, Plan.from_dict(plan)) if plan.get("containers") else {}
    return topology(plan, moved_nodes(state), shown)


@router.get("/{lab}/counters", summary="cumulative packet, byte and drop counters of every "
            "interface of the lab, with the time they were read", responses=answers(404, 502))
def counters(lab: LabName, s: Services = Depends(services)) -> dict[str, Any]:
    known_lab(lab)
    return s.counters.read(lab)


def trials(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result.get("points") or result.get("trials") or [])


@router.get("/{lab}/loss", summary="where the last finished measurement's packets were lost, "
            "per node (summed over its trials)", responses=answers(404))
def loss(lab: LabName, s: Services = Depends(services)) -> dict[str, Any]:
    known_lab(lab)
    job = s.jobs.last_done(lab)
    if job is None or job.result is None:
        return {"lab": lab, "measurement": None, "loss_by_node": {}, "loss_by_reason": {},
                "lost": 0, "sent": 0, "dropped": 0, "unaccounted": 0}
    by_node: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    lost = sent = unaccounted = 0
    for t in trials(job.result):
        where = t.get("located") or {}
        unaccounted += int(where.get("unaccounted") or 0)
        for n, c in (where.get("loss_by_node") or {}).items():
            by_node[n] = by_node.get(n, 0) + int(c)
        for r, c in (where.get("loss_by_reason") or {}).items():
            by_reason[r] = by_reason.get(r, 0) + int(c)
        lost += int(t.get("lost") or 0)
        sent += int(t.get("sent") or 0)
    return {"lab": lab, "measurement": job.id, "type": job.result.get("type"),
            "loss_by_node": by_node, "loss_by_reason": by_reason, "lost": lost, "sent": sent,
            "dropped": sum(by_node.values()), "unaccounted": unaccounted}
