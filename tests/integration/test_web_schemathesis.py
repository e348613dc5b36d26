"""The API against its own OpenAPI document: Schemathesis (pinned in the test extras) drives
``sfclab serve`` -- a real server process on a free loopback port, with a token, over a
running lab -- through every operation with its default checks (no server error, only declared
statuses, declared content types and response schemas, schema-valid input accepted, invalid
input refused, authentication not ignored, 405 with a right ``Allow`` for other methods, ...).

What a generated request may do is bounded, because it runs as root:

- the server has a state directory of its own (the session's), so it knows no lab but the ones
  this test and the run make; ``down --all`` on that directory removes them afterwards;
- ``POST /api/labs`` is tested with a narrower lab schema than the server declares: at most
  three ``host``/``router`` nodes and three links, named with this run's own prefix (namespace
  names are global, and other tests run at the same time), and with positive data only, so a
  mutated body cannot name another lab; a ``tun`` node, the one kind that runs a program the
  file names, is never generated; chain files likewise only name ``firewall`` functions;
- ``schema-valid request rejected`` accepts 422 on the operations whose body the schema cannot
  fully describe (a lab, a chain file, a host, a measurement naming nodes that must exist):
  the document says so (422: bad input, with the place), and every other check stands.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.weblab import ROOT, free_port, wait_until_serving

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ST = Path(sys.executable).with_name("st")
#: the whole Schemathesis run's budget (the test stays under ~90 s)
BUDGET_S = 50
#: operations whose request body says more than a JSON schema can (nodes that must exist)
SEMANTIC_BODIES = ["/api/labs", "/api/labs/{lab}/chains", "/api/labs/{lab}/hosts",
                   "/api/labs/{lab}/measurements", "/api/labs/{lab}/measurements/check",
                   "/api/labs/{lab}/chains/{chain}/migrate"]


def small_lab_schema(prefix: str) -> dict[str, Any]:
    node = {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["kind"],
                       "properties": {"kind": {"enum": [k]}}} for k in ("host", "router")]}
    return {"type": "object", "additionalProperties": False, "required": ["name", "nodes"],
            "properties": {
                "name": {"type": "string", "pattern": f"^{prefix}[a-z0-9]{{0,3}}$"},
                "nodes": {"type": "object", "minProperties": 1, "maxProperties": 3,
                          "propertyNames": {"pattern": "^[a-z][a-z0-9]{0,5}$"},
                          "additionalProperties": node},
                "links": {"type": "array", "maxItems": 3, "items": {
                    "type": "object", "additionalProperties": False, "required": ["endpoints"],
                    "properties": {"endpoints": {"type": "array", "minItems": 2, "maxItems": 2,
                                                 "items": {"type": "string",
                                                           "pattern": "^[a-z][a-z0-9]{0,5}$"}}}}}}}


def narrowed(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The server's document with the lab and chain bodies narrowed as the docstring says."""
    labs = doc["paths"]["/api/labs"]["post"]["requestBody"]["content"]
    for media in labs:
        labs[media]["schema"] = small_lab_schema(prefix)
    chain = doc["paths"]["/api/labs/{lab}/chains"]["post"]["requestBody"]["content"]
    schema = chain["application/json"]["schema"]
    functions = schema["properties"]["functions"]
    entry = functions.get("items", functions)
    entry.setdefault("properties", {})["kind"] = {"enum": ["firewall"]}
    entry["properties"].pop("exec", None)
    return doc


def config(lab: str) -> str:
    """Every operation on a lab is sent the running lab's name (all but removing it: the
    run's own labs it may remove); POST /api/labs only positive data; 422 accepted as the
    answer to schema-valid bodies the schema cannot fully judge."""
    lines = ['[parameters]', f'"path.lab" = "{lab}"', '',
             '[[operations]]', 'include-path = "/api/labs/{lab}"', 'include-method = "DELETE"',
             'parameters = { "path.lab" = "nosuchlab" }', '',
             '[[operations]]', 'include-path = "/api/labs"', 'include-method = "POST"',
             'generation.mode = "positive"', '']
    for path in SEMANTIC_BODIES:
        lines += ['[[operations]]', f'include-path = "{path}"', 'include-method = "POST"',
                  'checks.positive_data_acceptance.expected-statuses = '
                  '["2XX", 401, 403, 404, 409, 422]', '']
    return "\n".join(lines)


@contextlib.contextmanager
def server(tmp_path: Path, token: str) -> Iterator[str]:
    token_file = tmp_path / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, token.encode())
    os.close(fd)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "serve", "--listen",
                             f"127.0.0.1:{port}", "--token-file", str(token_file),
                             "--db", str(tmp_path / "none.db")], cwd=ROOT,
                            stderr=open(tmp_path / "server.log", "w"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, lambda: call(url, token, "GET", "/api/labs"),
                           lambda: (tmp_path / "server.log").read_text())
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def call(url: str, token: str, method: str, path: str, body: Any = None) -> Any:
    req = urllib.request.Request(url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_schemathesis_finds_no_error_and_no_undeclared_answer(tmp_path: Path,
                                                               state_dir: Path) -> None:
    token = secrets.token_urlsafe(24)
    prefix = f"s{secrets.token_hex(2)}"
    env = dict(os.environ, SFCLAB_STATE_DIR=str(state_dir))
    lab = f"{prefix}lab"
    with server(tmp_path, token) as url:
        try:
            made = call(url, token, "POST", "/api/labs", {
                "name": lab, "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                                       "dst": {"kind": "host"}},
                "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]})
            assert made["name"] == lab
            doc = call(url, token, "GET", "/openapi.json")
            (tmp_path / "openapi.json").write_text(json.dumps(narrowed(doc, prefix)))
            (tmp_path / "schemathesis.toml").write_text(config(lab))
            started = time.monotonic()
            run = subprocess.run(
                [str(ST), "--no-color", "--config-file", str(tmp_path / "schemathesis.toml"),
                 "run", str(tmp_path / "openapi.json"), "--url", url,
                 "-H", f"Authorization: Bearer {token}", "--max-time", str(BUDGET_S),
                 "--max-examples", "30", "--workers", "1", "--request-timeout", "30",
                 "--seed", str(secrets.randbits(32)), "--no-shrink"],
                capture_output=True, text=True, timeout=BUDGET_S + 60, env=env, cwd=tmp_path)
            took = time.monotonic() - started
            out = run.stdout + run.stderr
            (tmp_path / "schemathesis.txt").write_text(out)
            assert "ST101" not in out, out[-6000:]  # a server error
            assert "ST103" not in out, out[-6000:]  # a status the document does not declare
            assert run.returncode == 0, out[-6000:]
            operations = sum(len(ops) for ops in doc["paths"].values())
            assert f"Tested: {operations}" in out, out[-3000:]
            assert took < BUDGET_S + 30, took
            # the lab the run was given is still there and whole: nothing broke it
            assert lab in [x["name"] for x in call(url, token, "GET", "/api/labs")]
        finally:
            subprocess.run([sys.executable, "-m", "sfclab.cli", "down", "--all"], cwd=ROOT,
                           env=env, capture_output=True, check=False)
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{prefix}")]
