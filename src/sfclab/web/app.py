"""The FastAPI application: routes, error mapping, the guard and the services' lifetime.

``create_app(token, origins, db=DEFAULT_DB)``: every request must carry ``token`` and name one
of ``origins`` (:mod:`.guard`, :mod:`.auth`); the OpenAPI document is at ``/openapi.json``
(:mod:`.contract`: every status and body each route answers) and browsable at ``/docs``.  The
services (background measurements, counter readers) are closed when the application shuts
down, which stops running measurements as Ctrl-C would and changes no lab.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.staticfiles import StaticFiles

from .. import __version__
from ..experiments import DEFAULT_DB
from . import contract, errors
from .auth import Token
from .guard import Guard, Origins
from .routes import chains, hosts, labs, measurements, page, results
from .services import Services
from .vendor import STATIC


def create_app(token: str, origins: Origins, db: str = DEFAULT_DB,
               services: Services | None = None) -> FastAPI:
    svc = services or Services(db=db)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await run_in_threadpool(svc.close)

    app = FastAPI(title="sfclab", version=__version__, lifespan=lifespan, docs_url=None,
                  redoc_url=None,  # /docs is served from the pinned npm package (routes.page)
                  responses=contract.answers(*contract.ALWAYS),
                  description="Labs, chains, measurements and results of sfclab, as the "
                  "library has them (the same validation and errors as the command line). "
                  "Every request needs the server's token; requests from other origins are "
                  "refused.")
    app.state.services = svc
    errors.install(app)
    checked = Token(token, origins.port)
    app.add_middleware(Guard, origins=origins, token=checked)
    for r in (labs.router, chains.router, hosts.router, measurements.router, results.router,
              page.router):
        app.include_router(r)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    contract.secure(app, checked.cookie)
    return app
