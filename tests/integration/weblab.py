"""The lab of the web tests: two chains (web over a weighted pool of two firewalls and a NAT;
dns over one firewall) and, off the chains' classifiers (TCP 80-8080, UDP 53), a 5 Mbit/s
shaper before ``dst`` that drops most of a 40 kpps stream of 64-byte frames; and ``sfclab serve``
run as a command, with a token, for the tests that need a server of their own."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.labtools import free_port

ROOT = Path(__file__).resolve().parents[2]


def web_lab(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                  "fw1": {"kind": "firewall", "rules": []},
                  "fw2": {"kind": "firewall", "rules": []}, "r2": {"kind": "router"},
                  "nat": {"kind": "nat", "outside": "sh"},
                  "sh": {"kind": "shaper", "rate": "5mbit", "discipline": "htb",
                         "toward": "dst"},
                  "dst": {"kind": "host"}},
        "links": [{"endpoints": list(e)} for e in (
            ("src", "r1"), ("r1", "fw1"), ("r1", "fw2"), ("fw1", "r2"), ("fw2", "r2"),
            ("r2", "nat"), ("nat", "sh"), ("sh", "dst"))],
        "groups": {"fwpool": {"instances": ["fw1", "fw2"], "weights": [1, 3]}},
        "chains": {
            "web": {"classifiers": [{"ingress": "src", "proto": "tcp", "dport": "80-8080"}],
                    "functions": ["fwpool", "nat"], "egress": "dst"},
            "dns": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 53}],
                    "functions": ["fw1"], "egress": "dst"}}}


#: how long a starting ``sfclab serve`` may take to answer: its imports alone took over 10 s on
#: a 2-core machine at a load average of 14 (the suite's three workers and other jobs beside)
READY_WITHIN = 120.0


def wait_until_serving(proc: subprocess.Popen[Any], probe: Any, log: Any) -> None:
    """Call ``probe()`` until it returns without ``OSError`` (the server answers); fail with the
    server's own words (``log()``) if it exits first or does not answer within ``READY_WITHIN``
    seconds, instead of going on against a server that is not there."""
    deadline = time.monotonic() + READY_WITHIN
    while True:
        try:
            probe()
            return
        except OSError:
            pass
        assert proc.poll() is None, log()
        assert time.monotonic() < deadline, f"no answer within {READY_WITHIN:.0f} s"
        time.sleep(0.05)


@dataclass(frozen=True)
class Served:
    """A running ``sfclab serve``: its address and the token every request needs."""

    url: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def page(self, rest: str = "") -> str:
        """The address a person opens once: the page, with the token (then a cookie)."""
        path, _, fragment = rest.partition("#")
        sep = "&" if "?" in path else "?"
        return f"{self.url}{path}{sep}token={self.token}" + (f"#{fragment}" if fragment else "")


def token_file(directory: Path, token: str | None = None) -> Path:
    """A token file as ``serve`` takes it: the server's user's, mode 0600."""
    path = directory / f"token-{secrets.token_hex(3)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (token or secrets.token_urlsafe(24)).encode() + b"\n")
    os.close(fd)
    return path


@contextlib.contextmanager
def serving(db: Path, token_path: Path | None = None) -> Iterator[Served]:
    """``sfclab serve`` on a free loopback port, with a token (``token_path``, or a new file
    beside ``db``); SIGTERM at the end must stop it cleanly."""
    port = free_port()
    token_path = token_path or token_file(db.parent)
    token = token_path.read_text().strip()
    proc = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "serve", "--listen",
                             f"127.0.0.1:{port}", "--db", str(db), "--token-file",
                             str(token_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    served = Served(f"http://127.0.0.1:{port}/", token)
    try:
        req = urllib.request.Request(served.url + "api/labs", headers=served.auth)
        wait_until_serving(proc, lambda: urllib.request.urlopen(req, timeout=5).read(),
                           lambda: proc.stderr.read() if proc.stderr else "")
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        err = proc.stderr.read() if proc.stderr else ""
        assert code == 0, err
        assert "serving " + served.url in err
