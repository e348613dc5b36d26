"""The server safe by default, in process: the token on every request (and the page's cookie),
the Host, Origin, Referer and Sec-Fetch-Site checks, JSON-only bodies on state-changing routes,
the security headers, bounded bodies, and the token file's rules.  The same checks against a
real ``sfclab serve`` process are in ``tests/integration/test_web_security.py``."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError
from sfclab.realize.state import LabState
from sfclab.web import server, tokenfile
from sfclab.web.guard import Origins
from tests.webclient import AUTH, TOKEN, YAML, api_client, fake_up

ROOT = Path(__file__).resolve().parents[2]
CHAIN5 = ROOT / "scenarios" / "chain5.yaml"
SFC = ROOT / "scenarios" / "sfc-web.yaml"
COOKIE = "sfclab-token-8470"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(d))
    return d




def state_changing(lab: str) -> list[tuple[str, str]]:
    """Every route that changes something and takes a body."""
    return [("POST", "/api/labs"), ("POST", f"/api/labs/{lab}/chains"),
            ("POST", f"/api/labs/{lab}/chains/web/migrate"), ("POST", f"/api/labs/{lab}/hosts"),
            ("POST", f"/api/labs/{lab}/measurements")]


# ------------------------------------------------------------------ the token

def test_every_request_needs_the_token(tmp_path: Path, state: Path) -> None:
    with api_client(token=False, db=str(tmp_path / "none.db")) as c:
        for path in ("/api/labs", "/", "/docs", "/openapi.json", "/vendor/cytoscape.min.js",
                     "/static/app.js"):
            r = c.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
        assert c.get("/api/labs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = c.post("/api/labs", content=CHAIN5.read_bytes(), headers=YAML)
        assert r.status_code == 401
        assert not (state / "labs").exists()
        assert c.get("/api/labs", headers=AUTH).json() == []


def test_the_page_gets_the_token_as_a_cookie_and_the_address_loses_it(tmp_path: Path) -> None:
    with api_client(token=False, db=str(tmp_path / "none.db")) as c:
        assert c.get("/", params={"token": "wrong-token-0123456789"}).status_code == 401
        r = c.get("/", params={"token": TOKEN, "x": "1"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/?x=1"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}={TOKEN};")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert c.get("/api/labs").status_code == 200  # the browser's own requests pass
        c.cookies.clear()
        # the token in the address logs a page in; it is no way to call the API
        assert c.post("/api/labs", params={"token": TOKEN}, content=b"name: x",
                      headers=YAML).status_code == 401


def test_the_token_is_the_only_secret_the_page_carries() -> None:
    for path in (ROOT / "src/sfclab/web/static").glob("*.js"):
        js = path.read_text()
        assert "sessionStorage" not in js and "localStorage" not in js, path
        assert "Authorization" not in js, path


# ------------------------------------------------------------------ where requests come from

def test_a_foreign_host_is_refused(tmp_path: Path, state: Path) -> None:
    with api_client(db=str(tmp_path / "none.db")) as c:
        for host in ("evil.example:8470", "evil.example", "127.0.0.1:9999", "127.0.0.2:8470",
                     "localhost.evil.example:8470", "user@127.0.0.1:8470", ""):
            r = c.get("/api/labs", headers={"Host": host})
            assert r.status_code == 403 and r.json()["type"] == "Forbidden", host
            r = c.post("/api/labs", headers={"Host": host, **YAML},
                       content=CHAIN5.read_bytes())
            assert r.status_code == 403, host
        assert not (state / "labs").exists()
        for host in ("127.0.0.1:8470", "localhost:8470", "LOCALHOST:8470"):
            assert c.get("/api/labs", headers={"Host": host}).status_code == 200, host


def test_the_wildcard_address_takes_ip_addresses_but_no_names() -> None:
    any4 = Origins("0.0.0.0", 8470)
    assert any4.allows("192.0.2.7:8470") and any4.allows("localhost:8470")
    assert any4.allows("[2001:db8::1]:8470")
    assert not any4.allows("evil.example:8470") and not any4.allows("192.0.2.7:8471")
    six = Origins("::1", 80)
    assert six.allows("[::1]") and six.allows("localhost") and not six.allows("127.0.0.1")
    named = Origins("198.18.0.1", 8470)
    assert named.allows("198.18.0.1:8470") and not named.allows("localhost:8470")


def test_a_foreign_origin_or_referer_is_refused(tmp_path: Path, state: Path) -> None:
    fake_up(SFC)
    with api_client(db=str(tmp_path / "none.db")) as c:
        for origin in ("http://evil.example", "http://127.0.0.1:9999", "https://127.0.0.1:8470",
                       "null", "http://127.0.0.1:8470.evil.example"):
            assert c.get("/api/labs", headers={"Origin": origin}).status_code == 403, origin
            for method, path in state_changing("sfcweb"):
                r = c.request(method, path, headers={"Origin": origin}, json={})
                assert r.status_code == 403, (origin, path)
            # removing takes no body; another origin cannot remove either
            r = c.delete("/api/labs/sfcweb", headers={"Origin": origin})
            assert r.status_code == 403 and LabState("sfcweb").exists, origin
        r = c.post("/api/labs/sfcweb/hosts", headers={"Referer": "http://evil.example/x"},
                   json={"name": "edge2", "cpus": 1, "memory": "64M"})
        assert r.status_code == 403
        for site in ("cross-site", "same-site"):
            r = c.get("/api/labs", headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "cors"})
            assert r.status_code == 403, site
        # a link from elsewhere to the page opens it; the page's own calls pass
        r = c.get("/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
        assert r.status_code == 200
        r = c.get("/api/labs", headers={"Origin": "http://127.0.0.1:8470",
                                        "Sec-Fetch-Site": "same-origin"})
        assert r.status_code == 200
        assert c.get("/api/labs/sfcweb/hosts").json()[0]["host"] == "local"  # nothing added


@pytest.mark.parametrize("headers,content", [
    ({"content-type": "text/plain"}, b'{"name": "edge2", "cpus": 1, "memory": "64M"}'),
    ({"content-type": "application/x-www-form-urlencoded"}, b"name=edge2&cpus=1"),
    ({"content-type": "multipart/form-data; boundary=b"},
     b'--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nedge2\r\n--b--\r\n'),
    ({}, b'{"name": "edge2", "cpus": 1, "memory": "64M"}'),
])
def test_simple_cross_site_bodies_are_refused_on_every_state_changing_route(
        tmp_path: Path, state: Path, headers: dict[str, str], content: bytes) -> None:
    fake_up(SFC)
    with api_client(db=str(tmp_path / "none.db")) as c:
        for method, path in state_changing("sfcweb"):
            r = c.request(method, path, headers=headers, content=content)
            assert r.status_code == 415, (path, r.text)
            assert r.json()["type"] == "Unsupported" and "application/json" in r.json()["error"]
        assert [x["name"] for x in c.get("/api/labs").json()] == ["sfcweb"]
        assert [h["host"] for h in c.get("/api/labs/sfcweb/hosts").json()] == ["local"]
        assert c.get("/api/measurements").json() == []


def test_a_cross_site_form_post_with_the_cookie_fails(tmp_path: Path, state: Path) -> None:
    with api_client(token=False, db=str(tmp_path / "none.db")) as c:
        c.get("/", params={"token": TOKEN})  # the person opened the page: the cookie is set
        assert COOKIE in c.cookies
        form = {"content-type": "application/x-www-form-urlencoded"}
        # what a browser sends for a form on another site, and for one on another port here
        for origin, site in (("http://evil.example", "cross-site"),
                             ("http://127.0.0.1:9999", "same-site")):
            r = c.post("/api/labs", content=CHAIN5.read_bytes(),
                       headers={**form, "Origin": origin, "Sec-Fetch-Site": site})
            assert r.status_code == 403, origin
        # an old browser that sends neither Origin nor Sec-Fetch-Site: the media type stops it
        assert c.post("/api/labs", content=CHAIN5.read_bytes(), headers=form).status_code == 415
        assert c.post("/api/labs", content=CHAIN5.read_bytes(),
                      headers={"content-type": "text/plain"}).status_code == 415
        assert not (state / "labs").exists()


def test_answers_carry_the_safety_headers_and_no_cors(tmp_path: Path) -> None:
    with api_client(db=str(tmp_path / "none.db")) as c:
        for path in ("/", "/api/labs", "/api/labs/nolab"):
            r = c.get(path, headers={"Origin": "http://127.0.0.1:8470"})
            h = r.headers
            assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in h["content-security-policy"]
            assert "script-src 'self';" in h["content-security-policy"]
            assert not [k for k in h if k.lower().startswith("access-control-")], path
        r = c.request("OPTIONS", "/api/labs", headers={"Origin": "http://evil.example",
                                                      "Access-Control-Request-Method": "POST"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        assert "no-store" in c.get("/api/labs").headers["cache-control"]
        docs = c.get("/docs").text
        assert "<script>" not in docs and '<script src="/static/docs.js">' in docs


# ------------------------------------------------------------------ bodies

def test_a_missing_or_broken_body_is_422_on_every_route(tmp_path: Path) -> None:
    fake_up(SFC)
    with api_client(db=str(tmp_path / "none.db")) as c:
        for method, path in state_changing("sfcweb")[1:]:
            for content in (b"", b"\xff\xfe", b"{", b"[]"):
                r = c.request(method, path, content=content,
                              headers={"content-type": "application/json"})
                assert r.status_code == 422, (path, content, r.text)
                assert r.json()["type"] == "SpecError"


def test_a_body_too_large_is_413_before_it_is_read_whole(tmp_path: Path) -> None:
    fake_up(SFC)
    with api_client(db=str(tmp_path / "none.db")) as c:
        big = b'{"name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        r = c.post("/api/labs/sfcweb/hosts", content=big,
                   headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["type"] == "TooLarge"


def test_bad_input_that_utf8_cannot_carry_is_still_422(tmp_path: Path) -> None:
    with api_client(db=str(tmp_path / "none.db")) as c:
        lab = b'{"name": "x", "hosts": {"\\udc00": []}, "nodes": {"a": {"kind": "host"}}}'
        r = c.post("/api/labs", content=lab,
                   headers={"content-type": "application/json"})
        assert r.status_code == 422 and "\\udc00" in r.json()["error"], r.text


@pytest.mark.parametrize("text", [b"? [a, b]\n: c\n", b"name: x\nnodes:\n  ? [a]\n  : {kind: host}\n"])
def test_a_lab_file_the_library_checks_miss_is_still_422(tmp_path: Path, state: Path,
                                                        text: bytes) -> None:
    """YAML mapping keys that are lists once made the lab file's checks raise TypeError (a
    500): whatever escapes validation is bad input, and nothing is made."""
    with api_client(db=str(tmp_path / "none.db")) as c:
        r = c.post("/api/labs", content=text, headers=YAML)
        # (the words are the library's once its checks see such keys; 422 either way)
        assert r.status_code == 422 and r.json()["file"] == "<posted lab>", r.text
    assert not (state / "labs").exists() or not list((state / "labs").iterdir())


def test_a_measurement_type_that_is_not_a_name_is_422(tmp_path: Path) -> None:
    fake_up(CHAIN5)
    with api_client(db=str(tmp_path / "none.db")) as c:
        for t in (["rate"], {"a": 1}, None, 5):
            r = c.post("/api/labs/chain5/measurements", json={"type": t})
            assert r.status_code == 422 and r.json()["place"] == "type", (t, r.text)


def test_a_host_with_more_cpus_than_any_machine_is_422_at_once(tmp_path: Path) -> None:
    fake_up(SFC)
    with api_client(db=str(tmp_path / "none.db")) as c:
        started = time.monotonic()
        r = c.post("/api/labs/sfcweb/hosts", json={"name": "big", "cpus": 100000000000,
                                                   "memory": "64M"})
        assert r.status_code == 422 and r.json()["place"] == "cpus", r.text
        assert time.monotonic() - started < 5


def test_another_method_is_405_naming_every_method_of_the_path(tmp_path: Path) -> None:
    with api_client(db=str(tmp_path / "none.db")) as c:
        r = c.put("/api/labs/x")
        assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, HEAD"
        r = c.request("OPTIONS", "/api/labs")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"


# ------------------------------------------------------------------ the document

def test_the_document_declares_every_answer_and_the_token(tmp_path: Path) -> None:
    with api_client(db=str(tmp_path / "none.db")) as c:
        doc = c.get("/openapi.json").json()
    assert doc["security"] == [{"token": []}, {"cookie": []}]
    assert doc["components"]["securitySchemes"]["cookie"]["name"] == COOKIE
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            got = set(op["responses"])
            assert {"401", "403", "422", "500"} <= got, (method, path)
            if method == "post":
                assert {"413", "415"} <= got and op["requestBody"]["required"], path
                assert set(op["requestBody"]["content"]) <= {"application/json",
                                                            "application/yaml"}, path
            if "{" in path:
                assert "404" in got, (method, path)
    lab = doc["paths"]["/api/labs"]["post"]["requestBody"]["content"]["application/yaml"]
    nodes = lab["schema"]["properties"]["nodes"]["additionalProperties"]["oneOf"]
    assert {n["properties"]["kind"]["const"] for n in nodes} >= {"host", "router", "tun"}
    m = doc["paths"]["/api/labs/{lab}/measurements"]["post"]["requestBody"]["content"]
    assert len(m["application/json"]["schema"]["oneOf"]) == 4
    wait = next(p for p in doc["paths"]["/api/labs/{lab}/hosts"]["post"]["parameters"]
                if p["name"] == "wait")
    assert wait["schema"]["maximum"] == 300


# ------------------------------------------------------------------ the token file

def write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_token_file_others_can_read_or_write_is_refused(tmp_path: Path) -> None:
    for mode in (0o644, 0o640, 0o604, 0o620, 0o602, 0o660):
        f = write(tmp_path / f"t{mode:o}", TOKEN, mode)
        with pytest.raises(SpecError) as e:
            tokenfile.read(f)
        assert e.value.place == "--token-file" and f"{mode:04o}" in e.value.message, mode
    assert tokenfile.read(write(tmp_path / "ok", TOKEN + "\n", 0o600)) == TOKEN
    assert tokenfile.read(write(tmp_path / "ro", TOKEN, 0o400)) == TOKEN


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_token_file_of_another_user_is_refused(tmp_path: Path) -> None:
    f = write(tmp_path / "theirs", TOKEN, 0o600)
    os.chown(f, 65534, 65534)
    with pytest.raises(SpecError) as e:
        tokenfile.read(f)
    assert "owned by the server's user" in e.value.message


def test_a_token_file_that_is_not_a_small_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    big = write(tmp_path / "big", "x" * 5000, 0o600)
    short = write(tmp_path / "short", "abc", 0o600)
    spaced = write(tmp_path / "spaced", "a" * 10 + " " + "b" * 10, 0o600)
    for f, words in (("/dev/zero", "a regular file"), (fifo, "a regular file"),
                     (tmp_path, "a regular file"), (big, "at most 4096 bytes"),
                     (short, "at least 16 characters"), (spaced, "without spaces"),
                     (tmp_path / "missing", "a readable file")):
        started = time.monotonic()
        with pytest.raises(SpecError) as e:
            tokenfile.read(f)
        assert words in e.value.message and time.monotonic() - started < 1, f


def test_the_default_token_file_is_made_once_private_and_reused(state: Path) -> None:
    path = tokenfile.default_path()
    assert path == state / "serve.token"
    token, made = tokenfile.ensure(path)
    assert made and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_uid == os.geteuid()
    assert tokenfile.ensure(path) == (token, False)
    assert [p.name for p in state.iterdir()] == ["serve.token"]  # no temporary file left
    path.chmod(0o644)  # loosened since: refused, not repaired behind the user's back
    with pytest.raises(SpecError):
        tokenfile.ensure(path)


def test_two_servers_starting_together_agree_on_one_token(state: Path) -> None:
    path = tokenfile.default_path()
    got: list[tuple[str, bool]] = []
    threads = [threading.Thread(target=lambda: got.append(tokenfile.ensure(path)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({t for t, _ in got}) == 1 and sum(m for _, m in got) == 1


def test_serve_uses_the_state_directorys_token_unless_given_one(tmp_path: Path,
                                                               state: Path) -> None:
    where = server.listen(None)
    first = server.token(where, None)
    assert first.made and first.path == str(state / "serve.token")
    again = server.token(where, None)
    assert again.token == first.token and not again.made
    mine = write(tmp_path / "mine", TOKEN, 0o600)
    assert server.token(server.listen("0.0.0.0:8470"), str(mine)).token == TOKEN


@pytest.mark.parametrize("mode_or_path,words", [
    (0o644, "--token-file: expected a token file only its owner can read and write"),
    ("/dev/zero", "--token-file: expected a regular file holding the token"),
])
def test_serve_refuses_a_bad_token_file_before_listening(
        tmp_path: Path, mode_or_path: int | str, words: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    f = (str(write(tmp_path / "t", TOKEN, mode_or_path)) if isinstance(mode_or_path, int)
         else mode_or_path)
    assert main(["serve", "--token-file", f, "--listen", "127.0.0.1:1"]) == \
        ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("sfclab: error: ") and words in err, err

