"""What the routes share: the background measurements, the counter readers, the default results
database.  One :class:`Services` per application, closed when the server stops."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from ..experiments import DEFAULT_DB
from ..plan.model import Plan
from ..realize.state import LabState, all_labs
from .counters import Counters
from .errors import Clash, NotFound
from .jobs import Jobs


@dataclass
class Services:
    db: str = DEFAULT_DB
    jobs: Jobs = field(default_factory=Jobs)
    counters: Counters = field(default_factory=Counters)

    def close(self) -> None:
        """Stop running measurements (they unwind as on Ctrl-C) and close every socket; no
        lab is changed."""
        self.jobs.close()
        self.counters.close()


def services(request: Request) -> Services:
    s: Services = request.app.state.services
    return s


def known_lab(name: str) -> LabState:
    """The lab's state; a bad name is bad input (422), an unknown one 404."""
    state = LabState(name)
    if not state.exists:
        labs = ", ".join(s.name for s in all_labs()) or "none"
        raise NotFound(f"no lab named '{name}' (labs: {labs})")
    return state


def lab_plan(name: str) -> Plan:
    """The lab's plan (404 for an unknown lab, 409 while it is being built)."""
    d = known_lab(name).plan()
    if d is None:
        raise Clash(f"lab '{name}' has no plan yet (it is being built)")
    return Plan.from_dict(d)
