"""``/api/labs/{lab}/hosts``: a running lab's hosts -- list, add, remove (emulated hosts), as
``sfclab host ls | add | rm`` (the library: :mod:`sfclab.live.ops.hostops`)::

    GET    /api/labs/{lab}/hosts                 capacity, use, free, instances per host
    POST   /api/labs/{lab}/hosts                 {"name": "edge2", "cpus": 1, "memory": "256M"}
    DELETE /api/labs/{lab}/hosts/{host}?drain=1  remove a host 'host add' made; with drain its
                                                 functions migrate first

Errors as every route: bad input 422 with the place (``cpus``, ``memory``, ``name``); an unknown
lab or host 404; a host the lab file made, a host with functions (without drain), a lab not up
or its lock held 409.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ...errors import SpecError
from ...spec.quantities import parse_size
from ...live.hosts import capacity
from ...live.ops import hostops
from ..contract import HostName, LabName, Wait, WITH_BODY, answers
from ..errors import NotFound
from ..guard import takes
from ..services import known_lab, lab_plan

router = APIRouter(prefix="/api/labs/{lab}/hosts", tags=["hosts"])

WAIT_S = 10.0
#: more CPUs than any machine sfclab runs on has: a request beyond is a mistake, refused at once
MAX_CPUS = 4096


class NewHost(BaseModel):
    """An emulated host to add."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=32, description="the host's name (letters, digits, '-', "
                      "'_')")
    # the declared bounds of the API's schema; the library checks the request again
    # (live.ops.hostops.check_host_request, as for 'sfclab host add')
    cpus: int = Field(ge=1, le=MAX_CPUS, description="CPUs (a count)")
    memory: Annotated[int, Field(ge=1, le=1 << 50)] | Annotated[str, Field(max_length=32)] = \
        Field(description="memory: bytes, or a size such as '256M'")


@router.get("", summary="the lab's hosts: capacity, use, free, functions on each",
            responses=answers(404, 409, 502))
def list_hosts(lab: LabName) -> list[dict[str, Any]]:
    known_lab(lab)
    return hostops.list_hosts(lab)


@router.post("", status_code=201, summary="add an emulated host with its CPUs and memory",
             responses=answers(404, 409, 502, *WITH_BODY), dependencies=[Depends(takes())])
def add_host(lab: LabName, body: NewHost, wait: Wait = WAIT_S) -> dict[str, Any]:
    known_lab(lab)
    try:
        memory = parse_size(body.memory)
    except ValueError as e:
        raise SpecError(f"expected {e}, got {body.memory!r}", place="memory") from None
    return hostops.add_host(lab, body.name, body.cpus, memory, wait_s=wait)


@router.delete("/{host}", summary="remove a host 'host add' made (drain: migrate its "
               "functions first)", responses=answers(404, 409, 502))
def remove_host(lab: LabName, host: HostName, drain: bool = False,
                wait: Wait = WAIT_S) -> dict[str, Any]:
    state = known_lab(lab)
    names = [h.name for h in capacity.hosts_of(state, lab_plan(lab))]
    if host not in names:
        raise NotFound(f"lab '{lab}' has no host '{host}' (hosts: {', '.join(names)})")
    return hostops.remove_host(lab, host, drain=drain, wait_s=wait)
