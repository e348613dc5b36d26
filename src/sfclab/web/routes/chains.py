"""``/api/labs/{lab}/chains``: a running lab's service function chains -- list, inspect, and
changed on the running lab through the library's entry points (:mod:`sfclab.live`), exactly
as ``sfclab chain add | rm | migrate`` change them::

    POST   /api/labs/{lab}/chains                    add a chain: the body is a chain file as
                                                     JSON (live.request.chain_from_dict,
                                                     live.ops.add.add_chain); 201
    DELETE /api/labs/{lab}/chains/{chain}            remove an added chain (remove_chain)
    POST   /api/labs/{lab}/chains/{chain}/migrate    move one of its instances make-before-
                                                     break: {"instance", "to", "conntrack"}
                                                     (live.ops.migrate.migrate)

Errors as every route: a bad chain file or a placement refusal is 422 with the place
(``functions[0].cpu``, ...); an unknown lab, chain, instance or host 404; a lab-file chain
(not removable), a lab not up, or the lab's lock held past ``wait`` seconds 409.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from ...live.ops import add as chain_add
from ...live.hosts import capacity
from ...live.ops import chains, migrate
from ...live import record, request
from ..contract import ChainName, LabName, Wait, WITH_BODY, answers, chain_file_schema, json_body
from ..errors import NotFound, validating
from ..guard import takes
from ..services import known_lab, lab_plan

router = APIRouter(prefix="/api/labs/{lab}/chains", tags=["chains"])

#: how long a change waits for another command on the lab before 409
WAIT_S = 10.0
EXAMPLE = {"name": "video", "attach": "r1",
           "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5004}], "egress": "dst",
           "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.2,
                          "memory": "32M"}]}


def _chain_names(lab: LabName) -> list[str]:
    plan = known_lab(lab).plan() or {}
    steering = plan.get("steering") or {}
    return sorted({d["chain"] for d in steering.get("directions", [])})


@router.get("", summary="the lab's chains: functions, directions, paths, classifier entries",
            responses=answers(404, 502))
def list_chains(lab: LabName) -> list[dict[str, Any]]:
    if not _chain_names(lab):
        return []  # a lab without chains has none to list
    return chains.listing(lab)


@router.post("", status_code=201, summary="add a chain of new functions (a chain file as "
             "JSON): placed on the lab's hosts, wired, then switched on",
             openapi_extra=json_body(chain_file_schema()),
             responses=answers(404, 409, 502, *WITH_BODY), dependencies=[Depends(takes())])
def add_chain(lab: LabName, body: dict[str, Any] = Body(..., examples=[EXAMPLE]),
              wait: Wait = WAIT_S) -> dict[str, Any]:
    known_lab(lab)
    with validating("a chain file", "<posted chain>"):
        req = request.chain_from_dict(lab, body, source="<posted chain>")
    return chain_add.add_chain(replace(req, wait_s=wait))


@router.get("/{chain}", summary="a chain's classifiers, label stacks, per-hop counters and "
            "shares", responses=answers(404, 502))
def inspect_chain(lab: LabName, chain: ChainName) -> dict[str, Any]:
    names = _chain_names(lab)
    if chain not in names:
        raise NotFound(f"lab '{lab}' has no chain '{chain}' (chains: "
                       f"{', '.join(names) or 'none'})")
    return chains.inspect(lab, chain)


@router.delete("/{chain}", summary="remove a chain added on the running lab, and its "
               "functions", responses=answers(404, 409, 502))
def remove_chain(lab: LabName, chain: ChainName, wait: Wait = WAIT_S) -> dict[str, Any]:
    names = _chain_names(lab)
    if chain not in names:
        raise NotFound(f"lab '{lab}' has no chain '{chain}' (chains: "
                       f"{', '.join(names) or 'none'})")
    return chain_add.remove_chain(request.RemoveChain(lab, chain, wait_s=wait))


class Migration(BaseModel):
    """Which instance goes where."""

    model_config = ConfigDict(extra="forbid")
    instance: str = Field(description="a function instance of the chain, e.g. fw-1")
    to: str | None = Field(None, description="the target host (default: the same host)")
    conntrack: bool = Field(True, description="move connection-tracking entries")


@router.post("/{chain}/migrate", summary="move an instance make-before-break (clone, switch, "
             "drain, stop)", responses=answers(404, 409, 502, *WITH_BODY),
             dependencies=[Depends(takes())])
def migrate_instance(lab: LabName, chain: ChainName, body: Migration,
                     wait: Wait = WAIT_S) -> dict[str, Any]:
    state = known_lab(lab)
    got = record.load_addition(state, chain)
    if got is None:
        raise NotFound(f"lab '{lab}' has no added chain '{chain}' (added: "
                       f"{', '.join(record.additions(state)) or 'none'})")
    instances = [n.node for n in got[0].nodes]
    if body.instance not in instances:
        raise NotFound(f"chain '{chain}' has no instance '{body.instance}' (instances: "
                       f"{', '.join(instances)})")
    if body.to is not None:
        hosts = [h.name for h in capacity.hosts_of(state, lab_plan(lab))]
        if body.to not in hosts:
            raise NotFound(f"lab '{lab}' has no host '{body.to}' (hosts: {', '.join(hosts)})")
    return migrate.migrate(request.MigrateInstance(lab, body.instance, body.to, wait_s=wait,
                                                   conntrack=body.conntrack))

