"""``serve``: listen until Ctrl-C or SIGTERM, then stop what the server started; labs stay.

``listen("127.0.0.1:8470")`` parses and checks the address; :func:`token` is the token every
request must carry: from ``--token-file`` (required to listen anywhere but loopback), or the
state directory's ``serve.token``, made at the first start (:mod:`.tokenfile`).
:func:`serve` binds the socket itself, so a port in use is one clear error, then runs
uvicorn in the foreground.  uvicorn turns SIGINT and SIGTERM into a graceful shutdown: requests
in flight finish, then the application's services close (running measurements are interrupted
and unwind), and ``serve`` returns.  It never brings a lab up or down on its own.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SfclabError, SpecError
from . import DEFAULT_HOST, DEFAULT_PORT
from . import tokenfile
from .guard import Origins, is_loopback


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
        return f"http://{host}:{self.port}/"

    @property
    def origins(self) -> Origins:
        return Origins(self.host, self.port)


@dataclass(frozen=True)
class Secret:
    """The token, the file it is in, and whether this start made that file."""

    token: str
    path: str
    made: bool


def listen(text: str | None) -> Listen:
    """``HOST:PORT``, ``HOST`` or ``:PORT`` (defaults 127.0.0.1 and 8470)."""
    if not text:
        return Listen(DEFAULT_HOST, DEFAULT_PORT)
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(DEFAULT_PORT)
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(f"expected HOST:PORT with a port from 1 to 65535, got {text!r}",
                        place="--listen")
    return Listen(host, int(port))


def token(where: Listen, token_file: str | None) -> Secret:
    """The token to require: ``token_file``'s, or the state directory's (made if missing);
    a non-loopback address needs ``token_file`` (a token chosen to be shared)."""
    if token_file is None:
        if not is_loopback(where.host):
            raise SpecError(f"expected --token-file to listen on {where.host}, which is not "
                            "loopback (anyone who reaches it could build and remove labs)",
                            place="--listen")
        path = tokenfile.default_path()
        secret, made = tokenfile.ensure(path)
        return Secret(secret, str(path), made)
    return Secret(tokenfile.read(token_file), token_file, False)


def bind(where: Listen) -> socket.socket:
    family = socket.AF_INET6 if ":" in where.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((where.host, where.port))
    except OSError as e:
        sock.close()
        raise SfclabError(f"cannot listen on {where.host}:{where.port}: {e.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def serve(where: Listen, token: str, db: str,
          ready: Callable[[Listen], None] | None = None) -> None:
    """Serve in the foreground until SIGINT or SIGTERM."""
    import uvicorn  # light start-up: only serve needs the server

    from .app import create_app

    sock = bind(where)
    app = create_app(token, where.origins, db=db)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    if ready is not None:
        ready(where)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again for the
    # handlers it found: these note it, so asking the server to stop is a clean exit (0)
    stopped_by: list[int] = []
    before = {sig: signal.signal(sig, lambda s, _f: stopped_by.append(s))
              for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        sock.close()
