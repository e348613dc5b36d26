"""The token: required on every request when ``serve`` was given ``--token-file`` (and it must
be given to listen anywhere but loopback).  Clients send ``Authorization: Bearer TOKEN``; the
page, opened as ``/?token=TOKEN``, keeps it and sends it the same way; ``?token=`` is accepted
on any request too, and answering one sets the token as a strict same-site, HTTP-only cookie so
the browser's own requests (scripts, download links) carry it.  Requests without it get 401."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from ..errors import SpecError

MIN_TOKEN = 16
COOKIE = "sfclab-token"


def read_token(path: str) -> str:
    """The token in ``path`` (surrounding white space removed); a missing, unreadable or short
    token is bad input on ``--token-file``."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"expected a readable text file holding the token, got {path!r} "
                        f"({getattr(e, 'strerror', None) or e})", place="--token-file") from None
    if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
        raise SpecError(f"expected a token of at least {MIN_TOKEN} characters without spaces in "
                        f"{path!r}", place="--token-file")
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def presented(request: Request) -> str | None:
    h = request.headers.get("authorization", "")
    if h.lower().startswith("bearer "):
        return h[7:].strip()
    return request.query_params.get("token") or request.cookies.get(COOKIE)


def install(app: FastAPI, token: str | None) -> None:
    """Refuse every request without ``token`` (no check at all when it is None)."""
    if token is None:
        return
    want = token.encode()

    @app.middleware("http")
    async def check(request: Request,
                    call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        got = presented(request)
        if got is None or not hmac.compare_digest(got.encode(), want):
            return JSONResponse({"error": "expected a token (Authorization: Bearer TOKEN)",
                                 "type": "Unauthorized"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        response = await call_next(request)
        if request.query_params.get("token") and request.cookies.get(COOKIE) != got:
            response.set_cookie(COOKIE, got, httponly=True, samesite="strict")
        return response
