"""The token: required on every request, also on loopback.

Programs send ``Authorization: Bearer TOKEN``.  A person opens the URL ``serve`` prints,
``/?token=TOKEN``, once: the server answers with a redirect to the same address without the
token, setting it as a cookie that is HTTP-only (the page's scripts never see it) and
``SameSite=Strict`` (no other site's page makes the browser send it), named after the port
(cookies do not tell ports apart, so two servers on one machine keep their own).  The page's own
requests then carry the cookie.  A request without a good token gets 401.

A cookie is sent by the browser on its own, so the token alone does not stop a page of another
origin on the same host (``http://127.0.0.1:9999``, which is "same site") from using it: the
Host, Origin, Referer, Sec-Fetch-Site and Content-Type checks of :mod:`.guard` do, before this
check runs.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

QUERY = "token"


class Token:
    def __init__(self, token: str, port: int):
        self.want = token.encode()
        self.cookie = f"sfclab-token-{port}"

    def _good(self, got: str | None) -> bool:
        return got is not None and hmac.compare_digest(got.encode(), self.want)

    def presented(self, request: Request) -> str | None:
        h = request.headers.get("authorization", "")
        if h[:7].lower() == "bearer ":
            return h[7:].strip()
        return request.cookies.get(self.cookie)

    def refusal(self, request: Request) -> Response | None:
        """401 without a good token; for ``GET ?token=GOOD``, the redirect that sets the
        cookie and drops the token from the address."""
        query = request.query_params.get(QUERY)
        if query is not None and request.method in ("GET", "HEAD") and self._good(query):
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != QUERY]
            url = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            r = RedirectResponse(url, status_code=303)
            r.set_cookie(self.cookie, query, httponly=True, samesite="strict", path="/")
            return r
        if self._good(self.presented(request)):
            return None
        return JSONResponse({"error": "expected the server's token (Authorization: Bearer "
                             "TOKEN, or open the address 'sfclab serve' printed)",
                             "type": "Unauthorized"}, status_code=401,
                            headers={"WWW-Authenticate": "Bearer"})
