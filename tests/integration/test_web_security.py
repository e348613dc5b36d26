"""``sfclab serve`` safe by default, as a real server process on loopback with real requests:
what a page of another site can make a browser send (simple cross-site bodies, a foreign
Origin, a rebinding Host name) is refused on every state-changing route and builds nothing;
another local user without the token is refused and cannot read the token the server made; a
token file others can read, or one that is not a file, is refused at start with exit 2."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sfclab.realize.state import LabState
from tests.integration.weblab import ROOT, Served, free_port, serving, wait_until_serving


def small_lab(name: str) -> dict[str, Any]:
    return {"name": name, "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                                    "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]}


def send(served: Served, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None, token: bool = True) -> tuple[int, Any]:
    h = {**(served.auth if token else {}), **(headers or {})}
    req = urllib.request.Request(served.url + path.lstrip("/"), data=body, method=method,
                                 headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def targets(lab: str, new_lab: str) -> list[tuple[str, dict[str, Any]]]:
    """Every state-changing route with a body that would do something if it were taken."""
    return [("/api/labs", small_lab(new_lab)),
            (f"/api/labs/{lab}/hosts", {"name": "edge2", "cpus": 1, "memory": "64M"}),
            (f"/api/labs/{lab}/chains", {"name": "c1", "attach": "r1", "egress": "dst",
                                         "classifiers": [{"ingress": "src", "proto": "udp"}],
                                         "functions": [{"name": "fw", "kind": "firewall"}]}),
            (f"/api/labs/{lab}/chains/c1/migrate", {"instance": "fw-1"}),
            (f"/api/labs/{lab}/measurements", {"type": "iperf", "from": "src", "to": "dst",
                                               "duration": 1})]


def nothing_changed(served: Served, lab: str, new_lab: str) -> None:
    assert not LabState(new_lab).exists
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{new_lab}:")]
    assert [h["host"] for h in send(served, "GET", f"/api/labs/{lab}/hosts")[1]] == ["local"]
    assert send(served, "GET", f"/api/labs/{lab}/chains")[1] == []
    assert send(served, "GET", "/api/measurements")[1] == []


FORM = b"name=edge2&cpus=1&memory=64M"
MULTIPART = (b'--xyz\r\nContent-Disposition: form-data; name="name"\r\n\r\nedge2\r\n--xyz--\r\n')


@pytest.mark.parametrize("content_type,encode", [
    ("text/plain", lambda body: json.dumps(body).encode()),
    ("application/x-www-form-urlencoded", lambda body: FORM),
    ("multipart/form-data; boundary=xyz", lambda body: MULTIPART),
    (None, lambda body: json.dumps(body).encode()),
])
def test_simple_cross_site_requests_build_nothing(running_lab: Any, lab_name: str,
                                                   tmp_path: Path, content_type: str | None,
                                                   encode: Any) -> None:
    running_lab(small_lab(lab_name))
    new_lab = f"{lab_name}n"
    with serving(tmp_path / "none.db") as served:
        for path, body in targets(lab_name, new_lab):
            headers = {"Content-Type": content_type} if content_type else {}
            # what the audit sent: the token (a program's) and a simple body: 415
            code, answer = send(served, "POST", path, encode(body), headers)
            assert code == 415 and answer["type"] == "Unsupported", (path, code, answer)
            # what a browser sends for another site's form, with the cookie: 403
            cookie = {"Cookie": f"sfclab-token-{served.url.rsplit(':', 1)[1].rstrip('/')}="
                      f"{served.token}", "Origin": "http://evil.example",
                      "Sec-Fetch-Site": "cross-site", **headers}
            code, _ = send(served, "POST", path, encode(body), cookie, token=False)
            assert code == 403, (path, code)
        nothing_changed(served, lab_name, new_lab)


def test_a_foreign_host_or_origin_is_refused(running_lab: Any, lab_name: str,
                                             tmp_path: Path) -> None:
    running_lab(small_lab(lab_name))
    new_lab = f"{lab_name}n"
    json_type = {"Content-Type": "application/json"}
    with serving(tmp_path / "none.db") as served:
        port = served.url.rsplit(":", 1)[1].rstrip("/")
        rebinding = {"Host": f"evil.example:{port}"}
        code, answer = send(served, "GET", "/api/labs", headers=rebinding)
        assert code == 403 and "Host" in answer["error"]
        for origin in ("http://evil.example", f"http://127.0.0.1:{free_port()}"):
            code, answer = send(served, "GET", "/api/labs", headers={"Origin": origin})
            assert code == 403 and "Origin" in answer["error"], origin
        for path, body in targets(lab_name, new_lab):
            data = json.dumps(body).encode()
            assert send(served, "POST", path, data, {**json_type, **rebinding})[0] == 403, path
            code, _ = send(served, "POST", path, data,
                           {**json_type, "Origin": "http://evil.example"})
            assert code == 403, path
        nothing_changed(served, lab_name, new_lab)
        # the server's own page and programs on this machine still get through
        code, made = send(served, "POST", "/api/labs", json.dumps(small_lab(new_lab)).encode(),
                          {**json_type, "Origin": served.url.rstrip("/")})
        assert code == 201 and made["name"] == new_lab, made
        assert send(served, "DELETE", f"/api/labs/{new_lab}")[0] == 200


@contextlib.contextmanager
def server_with_its_own_token(state: Path) -> Iterator[tuple[str, Path]]:
    """``serve`` with no --token-file: the token it makes in ``state``."""
    port = free_port()
    env = dict(os.environ, SFCLAB_STATE_DIR=str(state))
    proc = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "serve", "--listen",
                             f"127.0.0.1:{port}", "--db", str(state / "none.db")], cwd=ROOT,
                            env=env, stderr=subprocess.PIPE, text=True)
    token = state / "serve.token"
    url = f"http://127.0.0.1:{port}/"
    try:

        def probe() -> None:
            req = urllib.request.Request(url + "api/labs", headers={
                "Authorization": f"Bearer {token.read_text().strip()}"})
            urllib.request.urlopen(req, timeout=5).read()

        wait_until_serving(proc, probe, lambda: proc.stderr.read() if proc.stderr else "")
        yield url, token
    finally:
        proc.terminate()
        proc.wait(60)
        err = proc.stderr.read() if proc.stderr else ""
        assert f"the token is in {token} (new)" in err and f"{url}?token=" in err, err


def test_another_local_user_without_the_token_is_refused(lab_name: str) -> None:
    # a state directory anyone may enter, so only the token file's own mode protects it
    state = Path(tempfile.mkdtemp(prefix="sfclab-web-", dir="/tmp"))
    state.chmod(0o755)
    try:
        with server_with_its_own_token(state) as (url, token):
            st = token.stat()
            assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
            read = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(token)],
                                  capture_output=True, text=True)
            assert read.returncode != 0 and "Permission denied" in read.stderr
            lab = json.dumps(small_lab(lab_name))
            for argv in (["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                          url + "api/labs"],
                         ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                          "Content-Type: application/json", "--data-binary", lab,
                          url + "api/labs"]):
                got = subprocess.run(["runuser", "-u", "nobody", "--", *argv],
                                     capture_output=True, text=True, timeout=30)
                assert got.stdout == "401", (argv, got.stdout, got.stderr)
            assert not (state / "labs" / lab_name).exists()
            assert not [n for n in os.listdir("/run/netns")
                        if n.startswith(f"sfclab:{lab_name}:")]
    finally:
        shutil.rmtree(state)


def run_serve(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "serve", "--listen",
                         f"127.0.0.1:{free_port()}", *args], cwd=ROOT, capture_output=True,
                        text=True, timeout=60)
    return cp, time.monotonic() - started


def test_a_token_file_others_can_read_is_refused_at_start(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-others-can-read-0123456789\n")
    token.chmod(0o644)
    cp, _ = run_serve("--token-file", str(token))
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.startswith("sfclab: error: --token-file: expected a token file only its "
                                "owner can read and write (mode 0600), not mode 0644"), cp.stderr


def test_a_token_file_that_never_ends_is_refused_promptly(tmp_path: Path) -> None:
    cp, took = run_serve("--token-file", "/dev/zero")
    assert cp.returncode == 2 and "expected a regular file holding the token" in cp.stderr
    assert took < 15, took  # the start-up of Python and the CLI, not a read without end
