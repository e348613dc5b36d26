"""HTTP statuses for the library's typed exceptions: the API's half of the CLI's exit codes.

=====================================  ======  ==========================================
exception                              status  CLI equivalent
=====================================  ======  ==========================================
``SpecError`` (bad input, with place)  422     exit 2, ``file:line: place: expected ...``
:class:`NotFound` (unknown lab, ...)   404     exit 2, ``no lab named ...``
``LabError``, :class:`Clash`           409     exit 2, ``already up`` / ``busy``
:class:`Unsupported` (Content-Type)    415     --
other ``SfclabError`` (kernel, tool)   502     exit 1, after rollback
anything else (a bug)                  500     exit 1, ``internal error``
=====================================  ======  ==========================================

The routes look an unknown lab, chain, node, experiment or run up before calling the library
and raise :class:`NotFound`, so what is left of ``LabError`` is the lifecycle refusing a state
(a lab already up, a half-built lab, a lock held): a clash.  Every error body is
``{"error": message, "type": name}`` plus ``file``, ``place``, ``line`` and ``column`` for bad
input.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from pydantic_core import InitErrorDetails
from starlette.exceptions import HTTPException

from ..errors import LabError, SfclabError, SpecError
from ..spec.names import NAME_WORDS
from ..spec.source import format_place
from ..spec.wording import pydantic_error


LOG = logging.getLogger("sfclab.web")


class NotFound(SfclabError):
    """An unknown lab, chain, node, measurement, results database, experiment or run."""

    exit_status = 2


class Unsupported(SfclabError):
    """A body in a media type the route does not take (415)."""

    exit_status = 2


class Clash(SfclabError):
    """A request that collides with what is running (a measurement on the lab, ...)."""

    exit_status = 2


def printable(text: str | None) -> str | None:
    """``text`` with what UTF-8 cannot carry (lone surrogates from a ``\\udXXX`` escape in
    the input) written as escapes, so an error about bad input can always be sent."""
    return None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def body(e: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"error": printable(str(e)), "type": type(e).__name__}
    if isinstance(e, SpecError):
        out.update(message=printable(e.message), file=printable(e.file),
                   place=printable(e.place), line=e.line, column=e.column)
    return out


def allowed_methods(request: Request) -> list[str]:
    """The methods the application's document has for the request's path (HEAD with GET)."""
    methods: set[str] = set()
    for template, ops in request.app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, request.url.path):
            methods |= {m.upper() for m in ops}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


@contextmanager
def validating(what: str, file: str | None = None) -> Iterator[None]:
    """Around a pure validation step (a lab file, a chain file, a measurement request read,
    nothing made yet): an exception other than sfclab's own escaping it is a case the
    library's checks missed, caused by the input, so the request is refused as bad input (422,
    saying so) instead of a 500; its traceback goes to the log, for the bug report."""
    try:
        yield
    except SfclabError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as e:
        LOG.warning("validating %s failed unexpectedly", what, exc_info=True)
        raise SpecError(f"expected {what} sfclab can read (its checks failed on this input: "
                        f"{type(e).__name__}: {e})", file=file) from None


def status_of(e: BaseException) -> int:
    if isinstance(e, SpecError):
        return 422
    if isinstance(e, NotFound):
        return 404
    if isinstance(e, Unsupported):
        return 415
    if isinstance(e, (Clash, LabError)):
        return 409
    if isinstance(e, SfclabError):
        return 502
    return 500


def request_error(e: RequestValidationError) -> SpecError:
    """FastAPI's complaint about a parameter or body, in sfclab's words with the place (the
    parameter's name, or the place inside the body)."""
    errs = [dict(x) for x in e.errors()][:1]
    for x in errs:
        x["loc"] = tuple(p for p in x.get("loc", ()) if p not in ("body", "query", "path"))
    if errs and not errs[0]["loc"] and errs[0].get("type") == "missing":
        return SpecError("expected a request body (a JSON object)")
    if errs and errs[0].get("type") == "string_pattern_mismatch":  # the name rule
        loc = errs[0]["loc"]
        return SpecError(f"expected a name of {NAME_WORDS}, got {errs[0].get('input')!r}",
                         place=format_place(loc) or None)
    try:
        details = cast(list[InitErrorDetails], errs)
        loc, message = pydantic_error(ValidationError.from_exception_data("request", details))
    except (IndexError, KeyError, TypeError, ValueError):  # one pydantic cannot rebuild
        loc = errs[0]["loc"] if errs else ()
        message = f"expected {errs[0].get('msg', 'a valid request') if errs else 'a request'}"
    return SpecError(message, place=format_place(loc) or None)


def install(app: FastAPI) -> None:
    """Answer typed exceptions with their status, FastAPI's own validation with 422 and the
    router's own refusals (an unknown path 404, a method a path has not 405) in the same
    shape, and anything else with 500 and one line (the traceback goes to the log)."""

    async def typed(_r: Request, e: Exception) -> JSONResponse:
        return JSONResponse(body(e), status_code=status_of(e))

    async def invalid(_r: Request, e: Exception) -> JSONResponse:
        assert isinstance(e, RequestValidationError)
        return JSONResponse(body(request_error(e)), status_code=422)

    async def http(r: Request, e: Exception) -> JSONResponse:
        assert isinstance(e, HTTPException)
        if e.status_code == 400:  # FastAPI could not read the body (bytes that are not UTF-8)
            return JSONResponse(body(SpecError("expected a body of JSON text in UTF-8")),
                                status_code=422)
        headers = dict(e.headers or {})
        if e.status_code == 405:  # every method of the path, not only the first route's
            headers["Allow"] = ", ".join(allowed_methods(r))
        return JSONResponse({"error": str(e.detail), "type": type(e).__name__},
                            status_code=e.status_code, headers=headers)

    async def bug(_r: Request, e: Exception) -> JSONResponse:
        return JSONResponse({"error": printable(f"internal error: {type(e).__name__}: {e}"),
                             "type": "InternalError"}, status_code=500)

    app.add_exception_handler(SfclabError, typed)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http)
    app.add_exception_handler(Exception, bug)
