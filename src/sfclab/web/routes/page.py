"""The web view: ``/`` (the page), ``/static/...`` (its own script and style), ``/vendor/...``
(the pinned npm libraries it draws with: Cytoscape.js, Plotly) and ``/docs`` (the OpenAPI
document in Swagger UI, from the same pinned packages: nothing is fetched from elsewhere)."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter
from fastapi.responses import FileResponse

from ..vendor import STATIC, library

router = APIRouter(include_in_schema=False)


@router.get("/")
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/docs")
def docs() -> FileResponse:
    """Swagger UI, its set-up in ``static/docs.js`` (no inline script: see :mod:`..guard`)."""
    return FileResponse(STATIC / "docs.html", media_type="text/html")


@router.get("/vendor/{name}")
def vendor(name: str) -> FileResponse:
    path = library(name)
    return FileResponse(path, media_type=mimetypes.guess_type(path.name)[0],
                        headers={"Cache-Control": "max-age=86400"})
