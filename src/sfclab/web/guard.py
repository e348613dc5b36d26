"""What every request passes before a route sees it, and the headers every answer carries.

The server builds labs as root, so a request must come from someone who holds the token *and*
mean it.  :class:`Guard` checks, in this order:

1. **Host** (403): the address the client asked for is one the server listens on -- the
   listening address itself, ``localhost`` when that is loopback, any IP address when it is
   the wildcard (``0.0.0.0``, ``::``) -- with its port.  A name that resolves to the server only
   because an attacker's DNS says so (DNS rebinding) is refused.
2. **Origin** (403), when present, names one of those addresses over ``http``; without Origin,
   a state-changing request's **Referer**, when present, must too; a browser's
   ``Sec-Fetch-Site`` of ``cross-site`` or ``same-site`` is refused except for a plain page
   navigation (a link to the page), so another site's page (another port on this host is the
   "same site") cannot use the browser's cookie.
3. **The token** (401, :mod:`.auth`).
4. **Size** (413): the body is read up to its bound (:data:`BODY_LIMITS`), never further.
5. **Content-Type** (415), by each route that takes a body (:func:`takes`, a dependency, so a
   method the path does not have is still 405): it must say ``application/json`` -- or
   ``application/yaml`` for a lab file -- which a page of another origin cannot send without
   a CORS preflight, which this server never allows.

Every answer carries ``X-Content-Type-Options: nosniff``, a Content-Security-Policy with
``frame-ancestors 'none'`` (no framing: no clickjacking), ``Referrer-Policy: no-referrer`` and
``Cross-Origin-Resource-Policy: same-origin``; API answers are not cached.  No
``Access-Control-Allow-*`` header is ever sent.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..spec.source import MAX_BYTES as LAB_FILE_BYTES
from .auth import Token
from .errors import Unsupported

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON = "application/json"
YAML = "application/yaml"
#: path -> the most bytes its body may have (the rest: :data:`BODY_LIMIT`)
BODY_LIMITS: dict[str, int] = {"/api/labs": LAB_FILE_BYTES}
BODY_LIMIT = 1024 * 1024
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
LOCAL_NAMES = ("localhost",)

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"content-security-policy", CSP.encode()), (b"referrer-policy", b"no-referrer"),
           (b"cross-origin-resource-policy", b"same-origin")]


@dataclass(frozen=True)
class Origins:
    """The addresses a client may name: the listening host (and ``localhost`` for loopback,
    any IP address for the wildcard) with the listening port."""

    host: str
    port: int

    def _name_ok(self, name: str) -> bool:
        name = name.lower().strip("[]")
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            ip = None
        listen = ipaddress.ip_address(self.host) if _is_ip(self.host) else None
        if listen is not None and listen.is_unspecified:
            return ip is not None or name in LOCAL_NAMES
        if name == self.host.lower():
            return True
        if ip is not None and listen is not None:
            return ip == listen
        return name in LOCAL_NAMES and is_loopback(self.host)

    def allows(self, netloc: str) -> bool:
        """``netloc`` (``host:port`` as in a Host header or a URL) names this server."""
        try:
            parts = urlsplit(f"http://{netloc}")
            port = parts.port or 80
            name = parts.hostname or ""
        except ValueError:
            return False
        if parts.username is not None or parts.path or not name:
            return False
        return port == self.port and self._name_ok(name)

    def allows_url(self, url: str) -> bool:
        try:
            parts = urlsplit(url)
        except ValueError:
            return False
        return parts.scheme == "http" and self.allows(parts.netloc)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse(status: int, kind: str, message: str) -> Response:
    return JSONResponse({"error": message, "type": kind}, status_code=status)


def cross_origin(origins: Origins, request: Request) -> Response | None:
    """403 for a request from elsewhere than this server's own pages, or None."""
    h = request.headers
    host = h.get("host", "")
    if not origins.allows(host):
        return refuse(403, "Forbidden", f"expected a Host header naming this server "
                      f"(port {origins.port}), got {host[:100]!r}")
    origin = h.get("origin")
    if origin is not None and not origins.allows_url(origin):
        return refuse(403, "Forbidden", f"expected no Origin or this server's own, got "
                      f"{origin[:100]!r} (requests from other sites' pages are refused)")
    if origin is None and request.method not in SAFE:
        referer = h.get("referer")
        if referer is not None and not origins.allows_url(referer):
            return refuse(403, "Forbidden", "expected no Referer or a page of this server on a "
                          "request that changes something")
    site = h.get("sec-fetch-site")
    navigation = request.method == "GET" and h.get("sec-fetch-mode") == "navigate"
    if site in ("cross-site", "same-site") and not navigation:
        return refuse(403, "Forbidden", f"expected a request from this server's own page, "
                      f"not one of another site (Sec-Fetch-Site: {site})")
    return None


def takes(*media: str) -> Callable[[Request], None]:
    """A route dependency: 415 unless the body is declared as one of ``media``."""
    accepted = media or (JSON,)

    def check(request: Request) -> None:
        given = request.headers.get("content-type", "")
        if given.split(";", 1)[0].strip().lower() not in accepted:
            got = repr(given[:100]) if given else "none"
            raise Unsupported(f"expected Content-Type {' or '.join(accepted)}, got {got}")
    return check


class Guard:
    """The checks above as ASGI middleware around the application."""

    def __init__(self, app: ASGIApp, origins: Origins, token: Token):
        self.app = app
        self.origins = origins
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = scope["path"].startswith("/api/") or scope["path"] == "/openapi.json"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in HEADERS if k not in present]
                if api:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        request = Request(scope)
        refusal = cross_origin(self.origins, request) or self.token.refusal(request)
        if refusal is None and request.method in WITH_BODY:
            limit = BODY_LIMITS.get(scope["path"].rstrip("/"), BODY_LIMIT)
            body, refusal = await read_bounded(receive, Headers(scope=scope), limit)
            if refusal is None:
                receive = replay(body, receive)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


async def read_bounded(receive: Receive, headers: Headers,
                       limit: int) -> tuple[bytes, Response | None]:
    """The whole body, or 413 as soon as it is known to exceed ``limit`` bytes."""
    too_big = refuse(413, "TooLarge", f"expected a body of at most {limit} bytes")
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        return b"", too_big
    data = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        data += message.get("body", b"")
        if len(data) > limit:
            return b"", too_big
        if not message.get("more_body", False):
            break
    return bytes(data), None


def replay(body: bytes, then: Receive) -> Receive:
    """A ``receive`` that hands the application the body already read, then passes on what
    the server's own says (the client going away)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive
