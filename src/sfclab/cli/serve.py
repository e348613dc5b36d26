"""``sfclab serve``: the HTTP API and the web view, in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .status import ExitStatus

EXAMPLES = """\
examples:
  sfclab serve                                  the page and the API on http://127.0.0.1:8470/
  sfclab serve --db results.db --listen 127.0.0.1:8471
  (elsewhere than loopback, a token file of yours, mode 0600:  sfclab serve --listen 0.0.0.0:8470
   --token-file F)
  (while it runs:  curl -s -H "Authorization: Bearer $(cat /run/sfclab/serve.token)" \\
   http://127.0.0.1:8470/api/labs; the API's own page: /docs)
"""


def cmd_serve(a: argparse.Namespace) -> int:
    from ..web import server  # light start-up: FastAPI only to serve

    where = server.listen(a.listen)
    secret = server.token(where, a.token_file)

    def ready(w: server.Listen) -> None:
        made = " (new)" if secret.made else ""
        print(f"sfclab: serving {w.url} (API {w.url}docs; Ctrl-C to stop; labs are left as "
              f"they are)\nsfclab: the token is in {secret.path}{made}; every request needs it "
              f"(Authorization: Bearer TOKEN)\nsfclab: open {w.url}?token={secret.token} once "
              "in a browser on this machine", file=sys.stderr, flush=True)
    server.serve(where, secret.token, a.db, ready=ready)
    return ExitStatus.OK


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    from ..experiments import DEFAULT_DB

    sp = add("serve", cmd_serve, "serve the HTTP API and the web view (labs, chains, "
             "measurements, results) until Ctrl-C", "sfclab serve",
             json_flag=False)
    sp.epilog = EXAMPLES
    sp.add_argument("--listen", metavar="HOST:PORT",
                    help="address to listen on (default 127.0.0.1:8470; any other host needs "
                    "--token-file)")
    sp.add_argument("--token-file", metavar="FILE",
                    help="the token every request must carry (Authorization: Bearer), in FILE: "
                    "a regular file of yours, mode 0600 (default: serve.token in the state "
                    "directory, made at the first start)")
    sp.add_argument("--db", default=DEFAULT_DB,
                    help="results database the results routes read (default %(default)s)")
