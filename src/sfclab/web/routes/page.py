"""The web view: ``/`` (the page), ``/static/...`` (its own script and style) and
``/vendor/...`` (the pinned npm libraries it draws with: Cytoscape.js, Plotly)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from ..vendor import STATIC, library

router = APIRouter(include_in_schema=False)


@router.get("/")
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/vendor/{name}")
def vendor(name: str) -> FileResponse:
    return FileResponse(library(name), media_type="text/javascript",
                        headers={"Cache-Control": "max-age=86400"})
