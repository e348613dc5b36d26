"""``/api/results``: experiments and runs of a results database (list, show, export), and what
the page draws from them (plot data, the report's tables).

Every route takes ``db``: the file name of a results database in the directory of the one
``serve --db`` names (that one by default), never a path; the file is opened read-only.  A missing file, experiment or run is 404; a file that is not an sfclab database
is 422, as ``sfclab results`` says.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse, Response

from ...experiments.compare import MAX_SIDES
from ...experiments.report import MAX_PLOTTED_METRICS
from .. import results
from ..contract import answers
from ..services import Services, services

DbName = Annotated[str | None, Query(max_length=128, pattern=results.DB_NAME.pattern,
                                     description="the file name of a results "
                                   "database beside the one 'serve --db' names (default: that "
                                   "one); never a path")]
router = APIRouter(prefix="/api/results", tags=["results"], responses=answers(404))


def _db(db: str | None, s: Services) -> str:
    return s.db if db is None else results.beside(s.db, db)


@router.get("/experiments", summary="experiments with their run counts")
def experiments(db: DbName = None, s: Services = Depends(services)) -> dict[str, Any]:
    path = _db(db, s)
    with results.open_store(path) as st:
        return {"db": path, "experiments": [results.describe(st, e) for e in st.experiments()]}


@router.get("/experiments/{experiment}", summary="an experiment (id or name) and its runs")
def experiment(experiment: str, db: DbName = None,
               s: Services = Depends(services)) -> dict[str, Any]:
    with results.open_store(_db(db, s)) as st:
        e = results.experiment(st, experiment)
        return results.clean({**results.describe(st, e), "spec": e.spec,
                              "runs": [r.to_dict() for r in st.runs(e.id, with_metrics=True)]})


@router.get("/experiments/{experiment}/plots", summary="series with 95 % intervals, fits and "
            "offered-vs-received curves of an experiment")
def plots(experiment: str, db: DbName = None,
          s: Services = Depends(services)) -> dict[str, Any]:
    with results.open_store(_db(db, s)) as st:
        return results.plots(st, results.experiment(st, experiment))


@router.get("/experiments/{experiment}/tables", summary="the report's tables and notes of an "
            "experiment")
def tables(experiment: str, db: DbName = None,
           s: Services = Depends(services)) -> list[dict[str, Any]]:
    with results.open_store(_db(db, s)) as st:
        return results.tables(st, results.experiment(st, experiment))


@router.get("/runs/{run}", summary="one run in full: parameters, metrics, environment, raw "
            "outputs")
def run(run: int, db: DbName = None, s: Services = Depends(services)) -> dict[str, Any]:
    with results.open_store(_db(db, s)) as st:
        r = results.run(st, run)
        return results.clean({**r.to_dict(), "measure": r.measure, "lab": r.lab,
                              "environment": st.run_environment(r.id), "raw": st.raw(r.id)})


@router.get("/export", summary="every run (or one experiment's) as JSON or CSV")
def export(format: Literal["json", "csv"] = "json", experiment: str | None = None,
           db: DbName = None, s: Services = Depends(services)) -> Response:
    with results.open_store(_db(db, s)) as st:
        if experiment is not None:
            results.experiment(st, experiment)
        text = st.export(format, experiment)
    if format == "csv":
        return PlainTextResponse(text, media_type="text/csv")
    return Response(text, media_type="application/json")


@router.get("/compare", summary="two or more experiments or run sets side by side: series, "
            "ratios to the first with 95 % intervals, environment differences, published "
            "figures and the labs they ran on")
def compare(side: Annotated[list[str], Query(min_length=2, max_length=MAX_SIDES,
                                             description="an experiment (id or name) or "
                                             "EXPERIMENT:RUNS (run ids, 12-20,25); the first is "
                                             "the baseline")],
            metric: Annotated[list[str] | None, Query(max_length=MAX_PLOTTED_METRICS)] = None,
            db: DbName = None, s: Services = Depends(services)) -> dict[str, Any]:
    with results.open_store(_db(db, s)) as st:
        return results.comparison(st, side, metric)
