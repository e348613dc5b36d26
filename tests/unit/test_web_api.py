"""The HTTP API in process (FastAPI's TestClient), without root: every route, bad input (422 with
the place), clashes (409), unknown things (404), bugs (500); the token and the origin checks are
in ``test_web_guard.py``.

Labs here are "up" only in the state directory (their plan and meta written as ``up`` writes
them, no kernel object made), which is all the routes that read plans need; the routes that
read the kernel (inspect, counters) and build labs are tested in
``tests/integration/test_web_lab.py``.  Measurements run through a stand-in for the worker
program that speaks its protocol, so starting, following, the one-per-lab rule and stopping
are tested without traffic."""

from __future__ import annotations

import json
import re
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError
from sfclab.realize.state import LabState
from sfclab.web import server
from sfclab.web.jobs import Jobs
from sfclab.web.services import Services
from tests.webclient import YAML, api_client, fake_up
from tests.webresults import LOSS_PER_HOP, make_results_db

ROOT = Path(__file__).resolve().parents[2]
SFC = ROOT / "scenarios" / "sfc-web.yaml"
CHAIN5 = ROOT / "scenarios" / "chain5.yaml"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(d))
    return d


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(db=str(tmp_path / "none.db")) as c:
        yield c




def error(r: object, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text)  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["error"] and body["type"]
    return body


# ------------------------------------------------------------------ the document and the page

def test_openapi_names_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/api/labs", "/api/labs/{lab}", "/api/labs/{lab}/topology",
              "/api/labs/{lab}/counters", "/api/labs/{lab}/loss", "/api/labs/{lab}/chains",
              "/api/labs/{lab}/chains/{chain}", "/api/labs/{lab}/chains/{chain}/migrate",
              "/api/labs/{lab}/hosts", "/api/labs/{lab}/hosts/{host}",
              "/api/labs/{lab}/measurements",
              "/api/measurements", "/api/measurements/{job}", "/api/measurements/{job}/result",
              "/api/results/experiments", "/api/results/experiments/{experiment}",
              "/api/results/experiments/{experiment}/plots",
              "/api/results/experiments/{experiment}/tables", "/api/results/runs/{run}",
              "/api/results/export"):
        assert p in paths, p
    assert set(paths["/api/labs"]) == {"get", "post"}
    assert set(paths["/api/labs/{lab}"]) == {"get", "delete"}
    docs = client.get("/docs")
    assert docs.status_code == 200 and '<script src="/static/docs.js">' in docs.text
    assert "/openapi.json" in client.get("/static/docs.js").text
    assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert assets and all(a.startswith(("/vendor/", "/static/")) for a in assets), assets
    for a in assets:
        assert client.get(a).status_code == 200, a


def test_page_and_its_libraries_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/vendor/cytoscape.min.js" in page.text
    for src in re.findall(r'src="(/[^"]+)"', page.text) + ["/static/style.css"]:
        r = client.get(src)
        assert r.status_code == 200 and len(r.content) > 1000, src
    error(client.get("/vendor/jquery.js"), 404)


# ------------------------------------------------------------------ labs

def test_labs_list_and_unknown_labs(client: TestClient) -> None:
    assert client.get("/api/labs").json() == []
    for method, path in (("GET", "/api/labs/nolab"), ("DELETE", "/api/labs/nolab"),
                         ("GET", "/api/labs/nolab/topology"), ("GET", "/api/labs/nolab/counters"),
                         ("GET", "/api/labs/nolab/loss"), ("GET", "/api/labs/nolab/chains"),
                         ("GET", "/api/labs/nolab/chains/web")):
        body = error(client.request(method, path), 404)
        assert body["error"] == "no lab named 'nolab' (labs: none)", path


def test_a_bad_lab_name_is_bad_input(client: TestClient) -> None:
    body = error(client.get("/api/labs/a:b"), 422)
    assert "a:b" in body["error"]


@pytest.mark.parametrize("text,place,line", [
    ("name: x\nnodes: {a: {kind: hostt}}\n", "nodes.a.kind", 2),
    ("name: x\nnodes: [\n", None, 3),
    ("name: x\nnodes: {a: {kind: host}}\nlinks:\n  - endpoints: [a, b]\n",
     "links[0].endpoints[1]", 4),
    ('{"name": "x", "nodes": {"a": {"kind": "host", "mtu": 1}}}', "nodes.a", 1),
])
def test_up_refuses_a_bad_lab_file_with_its_place(client: TestClient, state: Path, text: str,
                                                  place: str | None, line: int) -> None:
    body = error(client.post("/api/labs", headers=YAML, content=text.encode()), 422)
    assert body["file"] == "<posted lab>" and body["line"] == line
    if place:
        assert body["place"] and body["place"].startswith(place), body
    assert client.get("/api/labs").json() == [] and not (state / "labs" / "x").exists()


def test_up_refuses_bytes_that_are_not_utf8(client: TestClient) -> None:
    body = error(client.post("/api/labs?source=lab.yaml", headers=YAML, content=b"name: x\n\xff\n"), 422)
    assert body["file"] == "lab.yaml" and body["line"] == 2 and "UTF-8" in body["error"]


def test_up_of_a_lab_that_is_up_is_a_clash(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    body = error(client.post("/api/labs", headers=YAML, content=CHAIN5.read_bytes()), 409)
    assert "already up" in body["error"]
    assert [r["name"] for r in client.get("/api/labs").json()] == [name]


def test_up_while_the_lock_is_held_is_a_clash(client: TestClient) -> None:
    with LabState("chain5").locked():
        body = error(client.post("/api/labs", headers=YAML, content=CHAIN5.read_bytes()), 409)
    assert "busy" in body["error"]


def test_topology_of_a_lab_with_chains(client: TestClient) -> None:
    name = fake_up(SFC)
    t = client.get(f"/api/labs/{name}/topology").json()
    assert {n["id"] for n in t["nodes"]} == {"src", "r1", "fw1", "fw2", "r2", "nat", "dst"}
    assert len(t["links"]) == 7 and {lk["kind"] for lk in t["links"]} == {"veth"}
    assert t["groups"] == []  # the plan has no hosts or tenants
    web = [c for c in t["chains"] if c["chain"] == "web" and not c["reverse"]]
    assert sorted(tuple(p["nodes"]) for p in web[0]["paths"]) == [
        ("src", "r1", "fw1", "r2", "nat", "dst"), ("src", "r1", "fw2", "r2", "nat", "dst")]


def test_down_while_a_measurement_runs_is_a_clash(tmp_path: Path) -> None:
    name = fake_up(CHAIN5)
    with fake_worker_client(tmp_path) as c:
        job = c.post(f"/api/labs/{name}/measurements", json={"type": "iperf"}).json()
        body = error(c.delete(f"/api/labs/{name}"), 409)
        assert f"measurement {job['id']} is running" in body["error"]
        c.delete(f"/api/measurements/{job['id']}")
    assert LabState(name).exists


def test_loss_before_any_measurement(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    assert client.get(f"/api/labs/{name}/loss").json()["measurement"] is None


# ------------------------------------------------------------------ chains

def test_chains_list_and_unknown_chain(client: TestClient) -> None:
    name = fake_up(SFC)
    rows = client.get(f"/api/labs/{name}/chains").json()
    assert {r["chain"] for r in rows} == {"web", "dns"}
    web = next(r for r in rows if r["chain"] == "web")
    assert web["functions"] == ["fw1|fw2", "nat"] and web["symmetric"] is True
    body = error(client.get(f"/api/labs/{name}/chains/nochain"), 404)
    assert body["error"] == f"lab '{name}' has no chain 'nochain' (chains: dns, web)"


def test_a_lab_without_chains_has_an_empty_list(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    assert client.get(f"/api/labs/{name}/chains").json() == []
    error(client.get(f"/api/labs/{name}/chains/web"), 404)


VIDEO = {"name": "video", "attach": "r1",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5004}], "egress": "dst",
         "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.2,
                        "memory": "32M"}]}


def test_chain_add_refuses_bad_files_and_no_room_with_the_place(client: TestClient) -> None:
    name = fake_up(SFC)
    bad = dict(VIDEO, functions=[dict(VIDEO["functions"][0], cpu=0)])
    body = error(client.post(f"/api/labs/{name}/chains", json=bad), 422)
    assert body["place"] == "functions[0].cpu" and body["file"] == "<posted chain>"
    huge = dict(VIDEO, functions=[dict(VIDEO["functions"][0], cpu=512)])
    body = error(client.post(f"/api/labs/{name}/chains", json=huge), 422)
    assert "needs 512 CPU" in body["error"] and "largest free host is local" in body["error"]
    assert body["place"].startswith("functions[0]")
    error(client.post(f"/api/labs/{name}/chains", json=[1, 2]), 422)
    error(client.post("/api/labs/nolab/chains", json=VIDEO), 404)
    assert not (LabState(name).dir / "added").exists()  # nothing changed


def test_chain_rm_and_migrate_map_unknown_and_lab_file_chains(client: TestClient) -> None:
    name = fake_up(SFC)
    error(client.delete(f"/api/labs/{name}/chains/nochain"), 404)
    body = error(client.delete(f"/api/labs/{name}/chains/web"), 409)
    assert "lab file" in body["error"]
    error(client.post(f"/api/labs/{name}/chains/web/migrate", json={"instance": "fw"}), 404)
    body = error(client.post(f"/api/labs/{name}/chains/web/migrate",
                             json={"instance": "x", "bogus": 1}), 422)
    assert body["place"] == "bogus"


def test_a_change_on_a_busy_lab_is_409(client: TestClient) -> None:
    from sfclab.live import record

    name = fake_up(SFC)
    with record.lab_lock(LabState(name), 1.0):
        body = error(client.post(f"/api/labs/{name}/chains", params={"wait": 0.1},
                                 json=VIDEO), 409)
    assert "busy" in body["error"]


def test_hosts_list_and_bad_host_requests(client: TestClient) -> None:
    name = fake_up(SFC)
    rows = client.get(f"/api/labs/{name}/hosts").json()
    assert [r["host"] for r in rows] == ["local"] and rows[0]["instances"] == []
    assert rows[0]["free_cpu"] == rows[0]["cpus"]
    for body, place in (({"name": "h2", "cpus": 0, "memory": "64M"}, "cpus"),
                        ({"name": "h2", "cpus": 1, "memory": "lots"}, "memory"),
                        ({"name": "h2", "cpus": 1, "memory": "1M"}, "memory"),
                        ({"name": "a:b", "cpus": 1, "memory": "64M"}, "name"),
                        ({"name": "local", "cpus": 1, "memory": "64M"}, "name"),
                        ({"name": "h2", "cpus": 1.5, "memory": "64M"}, "cpus"),
                        ({"name": "h2", "memory": "64M"}, "cpus")):
        assert error(client.post(f"/api/labs/{name}/hosts", json=body), 422)["place"] == \
            place, body
    error(client.get("/api/labs/nolab/hosts"), 404)
    error(client.delete(f"/api/labs/{name}/hosts/nohost"), 404)
    assert "lab file" in error(client.delete(f"/api/labs/{name}/hosts/local"), 409)["error"]
    assert [r["host"] for r in client.get(f"/api/labs/{name}/hosts").json()] == ["local"]


# ------------------------------------------------------------------ measurements

@pytest.mark.parametrize("request_,place,words", [
    ({"type": "rate", "rates": ["100k", "fast"]}, "rates[1]", "packet rate"),
    ({"type": "speed"}, "type", "expected one of iperf, rate, ndr, latency"),
    ({"type": "rate"}, "rates", "missing key"),
    ({"type": "iperf", "flows": 0}, "flows", "expected"),
    ({"type": "ndr", "ndr_loss": 1, "pdr_loss": 0.5}, None, "PDR loss goal"),
    ({"type": "iperf", "from": "nosuch"}, "from", "nosuch"),
    ({"type": "rate", "rates": [1000], "pairs": ["src:r1", "src:zz"]}, "pairs[1]", "zz"),
    ({"type": "rate", "rates": [1000], "size": 9000}, "size", "path MTU"),
    ({"type": "iperf", "bogus": 1}, "bogus", "unknown key"),
])
def test_a_bad_measurement_request_is_422_with_its_place(client: TestClient, request_: dict,
                                                         place: str | None, words: str) -> None:
    name = fake_up(CHAIN5)
    body = error(client.post(f"/api/labs/{name}/measurements", json=request_), 422)
    assert body["place"] == place and words in body["error"], body
    assert client.get("/api/measurements").json() == []


def test_a_measurement_body_that_is_not_an_object(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    body = error(client.post(f"/api/labs/{name}/measurements", json=[1, 2]), 422)
    assert body["type"] == "SpecError"


def test_a_measurement_on_an_unknown_lab_is_404(client: TestClient) -> None:
    error(client.post("/api/labs/nolab/measurements", json={"type": "iperf"}), 404)
    error(client.get("/api/measurements/7"), 404)
    error(client.get("/api/measurements/7/result"), 404)
    error(client.delete("/api/measurements/7"), 404)


WORKER = """\
#!{python}
# stands in for `python -m sfclab.web.worker LAB`: the same protocol on stdout
import json, signal, sys, time
request = json.loads(sys.stdin.read())
say = lambda **kw: print(json.dumps(kw), flush=True)
if request.get("duration", 0) > 100:
    say(event="error", status=502, body={{"error": "iperf3 exited with status 1", "type": "ToolError"}})
    sys.exit(1)
say(event="progress", data={{"offered_pps": 1000, "received_pps": 990}})
try:
    time.sleep(float(request.get("duration", 1)) * 10)
except KeyboardInterrupt:
    say(event="error", status=499, body={{"error": "stopped", "type": "Stopped"}})
    sys.exit(130)
say(event="result", data={{"type": request["type"], "params": {{"lab": sys.argv[3]}},
                           "metrics": {{"throughput_bps": 1e9}},
                           "points": [{{"offered_pps": 1000, "received_pps": 990, "sent": 1000,
                                        "lost": 10, "located": {{"loss_by_node": {{"r1": 10}},
                                        "loss_by_reason": {{"QDISC_DROP": 10}}}}}}]}})
"""


def fake_worker_client(tmp_path: Path) -> TestClient:
    prog = tmp_path / "worker"
    prog.write_text(WORKER.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return api_client(services=Services(db=str(tmp_path / "none.db"), jobs=Jobs(str(prog))))


def wait_for(c: TestClient, job: int, status: str) -> dict:
    import time

    for _ in range(400):
        d = c.get(f"/api/measurements/{job}").json()
        if d["status"] == status:
            return d
        time.sleep(0.025)
    raise AssertionError(f"measurement {job} never became {status}: {d}")


def test_a_measurement_runs_in_the_background_one_per_lab(tmp_path: Path) -> None:
    name = fake_up(CHAIN5)
    with fake_worker_client(tmp_path) as c:
        r = c.post(f"/api/labs/{name}/measurements",
                   json={"type": "rate", "rates": ["1k"], "duration": 0.05})
        assert r.status_code == 202
        job = r.json()
        assert job["status"] == "running" and job["request"]["rates"] == [1000.0]
        assert job["request"]["from"] == "src"  # the typed request's defaults, filled in
        body = error(c.post(f"/api/labs/{name}/measurements", json={"type": "iperf"}), 409)
        assert f"measurement {job['id']} is still running" in body["error"]
        done = wait_for(c, job["id"], "done")
        assert done["progress"] == [{"offered_pps": 1000, "received_pps": 990}]
        assert c.get(f"/api/measurements/{job['id']}/result").json()["metrics"] == {
            "throughput_bps": 1e9}
        loss = c.get(f"/api/labs/{name}/loss").json()
        assert loss["measurement"] == job["id"] and loss["loss_by_node"] == {"r1": 10}
        assert loss["lost"] == 10 and loss["sent"] == 1000 and loss["dropped"] == 10
        assert [j["id"] for j in c.get(f"/api/measurements?lab={name}").json()] == [job["id"]]


def test_a_measurement_is_stopped_and_a_failure_reported(tmp_path: Path) -> None:
    name = fake_up(CHAIN5)
    with fake_worker_client(tmp_path) as c:
        job = c.post(f"/api/labs/{name}/measurements",
                     json={"type": "iperf", "duration": 5}).json()
        wait_for(c, job["id"], "running")
        body = error(c.get(f"/api/measurements/{job['id']}/result"), 409)
        assert "still running" in body["error"]
        assert c.delete(f"/api/measurements/{job['id']}").json()["status"] == "stopped"
        job = c.post(f"/api/labs/{name}/measurements",
                     json={"type": "iperf", "duration": 200}).json()
        failed = wait_for(c, job["id"], "failed")
        assert failed["error"]["type"] == "ToolError"
        error(c.get(f"/api/measurements/{job['id']}/result"), 404)


def test_the_server_stopping_stops_running_measurements(tmp_path: Path) -> None:
    name = fake_up(CHAIN5)
    with fake_worker_client(tmp_path) as c:
        job = c.post(f"/api/labs/{name}/measurements",
                     json={"type": "iperf", "duration": 5}).json()
        jobs = c.app.state.services.jobs  # type: ignore[attr-defined]
    assert jobs.get(job["id"]).status == "stopped"
    assert jobs.get(job["id"]).proc.poll() is not None


# ------------------------------------------------------------------ results

@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_results_db(tmp_path / "r.db")


def test_results_experiments_and_runs(client: TestClient, db: Path) -> None:
    d = client.get("/api/results/experiments", params={"db": db.name}).json()
    assert [e["name"] for e in d["experiments"]] == ["chains", "curve"]
    assert d["experiments"][0]["counts"]["done"] == 30
    for ref in ("1", "chains"):
        e = client.get(f"/api/results/experiments/{ref}", params={"db": db.name}).json()
        assert e["id"] == 1 and len(e["runs"]) == 30
    run_id = e["runs"][0]["id"]
    run = client.get(f"/api/results/runs/{run_id}", params={"db": db.name}).json()
    assert run["metrics"]["throughput_bps"] > 0 and run["measure"]["type"] == "iperf"
    error(client.get("/api/results/experiments/nosuch", params={"db": db.name}), 404)
    error(client.get("/api/results/runs/999", params={"db": db.name}), 404)


def test_results_from_a_missing_or_foreign_database(client: TestClient, tmp_path: Path) -> None:
    body = error(client.get("/api/results/experiments"), 404)  # the server's default: absent
    assert "none.db" in body["error"]
    foreign = tmp_path / "foreign.db"
    foreign.write_text("not sqlite at all, just text " * 100)
    body = error(client.get("/api/results/experiments", params={"db": foreign.name}), 422)
    assert body["file"] == str(foreign)


@pytest.mark.parametrize("name", ["/etc/passwd", "../r.db", "sub/r.db", ".hidden.db", "r db",
                                  "x" * 129])
def test_results_name_a_database_beside_the_served_one_never_a_path(
        client: TestClient, db: Path, name: str) -> None:
    body = error(client.get("/api/results/experiments", params={"db": name}), 422)
    assert body["place"] == "db"
    assert "expected a name of letters, digits" in body["error"] or "at most 128" in body["error"]
    assert "root:" not in json.dumps(body)  # nothing of the named file is read


def test_results_name_a_database_by_its_file_name(client: TestClient, db: Path) -> None:
    assert client.get("/api/results/experiments", params={"db": db.name}).status_code == 200


def test_results_export(client: TestClient, db: Path) -> None:
    csv = client.get("/api/results/export", params={"db": db.name, "format": "csv",
                                                    "experiment": "curve"})
    assert csv.headers["content-type"].startswith("text/csv")
    assert len(csv.text.strip().splitlines()) == 3  # header + 2 runs
    js = client.get("/api/results/export", params={"db": db.name}).json()
    assert len(js) == 32
    body = error(client.get("/api/results/export", params={"db": db.name, "format": "xml"}), 422)
    assert body["place"] == "format"
    error(client.get("/api/results/export", params={"db": db.name, "experiment": "x"}), 404)


def test_results_plots_carry_intervals_and_the_fit(client: TestClient, db: Path) -> None:
    p = client.get("/api/results/experiments/chains/plots", params={"db": db.name}).json()
    assert p["x"] == "lab.chain.length"
    tp = next(m for m in p["metrics"] if m["metric"] == "throughput_bps")
    assert tp["unit"] == "Gbit/s" and [s["name"] for s in tp["series"]] == [
        "flows 1", "flows 4"]
    s = tp["series"][0]
    assert s["x"] == [2, 3, 4, 5, 6] and s["n"] == [3] * 5
    assert all(lo < m < hi for lo, m, hi in zip(s["ci_low"], s["mean"], s["ci_high"]))
    assert s["mean"][0] == pytest.approx(10, rel=0.03)  # Gbit/s
    assert s["fit"]["loss_ci"][0] < LOSS_PER_HOP < s["fit"]["loss_ci"][1]
    assert len(s["fit"]["x"]) == len(s["fit"]["y"]) and s["fit"]["y"][0] == pytest.approx(
        10, rel=0.03)
    retr = next(m for m in p["metrics"] if m["metric"] == "retransmits")
    assert retr["series"][0]["fit"] is None  # only throughput is fitted
    curve = client.get("/api/results/experiments/curve/plots", params={"db": db.name}).json()
    assert curve["curves_unit"] == "kpps"
    c2 = next(c for c in curve["curves"] if c["name"].startswith("chain length 2,"))
    assert c2["offered"] == [50, 100, 200, 400] and c2["received"] == [50, 100, 200, 300]


def test_results_tables_are_the_reports(client: TestClient, db: Path) -> None:
    blocks = client.get("/api/results/experiments/chains/tables", params={"db": db.name}).json()
    tables = [b for b in blocks if "header" in b]
    heads = [b["text"] for b in blocks if "heading" in b]
    assert "Experiment `chains` (id 1)" in heads
    fit = next(t for t in tables if t["header"][:2] == ["series", "per-hop loss l"])
    assert [r[0] for r in fit["rows"]] == ["flows 1", "flows 4"]
    assert any(re.match(r"[0-9.]+ ± [0-9.]+ Gbit/s \(n=3\)", c) for t in tables
               for r in t["rows"] for c in r)


# ------------------------------------------------------------------ errors and the token

def test_a_bug_is_500_in_one_line(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from sfclab.realize import lifecycle

    def broken() -> list:
        raise RuntimeError("a bug")
    monkeypatch.setattr(lifecycle, "listing", broken)
    body = error(client.get("/api/labs"), 500)
    assert body["error"] == "internal error: RuntimeError: a bug"


@pytest.mark.parametrize("path,place,words", [
    ("/api/measurements/notanumber", "job", "expected a whole number, got 'notanumber'"),
    ("/api/results/runs/1.5", "run", "expected a whole number, got '1.5'"),
    ("/api/results/export?format=xml", "format", "expected one of 'json' or 'csv', got 'xml'"),
])
def test_a_bad_parameter_is_422_in_sfclabs_words(client: TestClient, path: str, place: str,
                                                 words: str) -> None:
    body = error(client.get(path), 422)
    assert body["place"] == place and body["error"] == f"{place}: {words}", body


# the token, the origin checks and the token file: tests/unit/test_web_guard.py


def test_listen_addresses() -> None:
    assert server.listen(None) == server.Listen("127.0.0.1", 8470)
    assert server.listen("127.0.0.2:9000").url == "http://127.0.0.2:9000/"
    assert server.listen(":9001") == server.Listen("127.0.0.1", 9001)
    assert server.listen("[::1]:9002").url == "http://[::1]:9002/"
    for bad in ("127.0.0.1:0", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(SpecError) as e:
            server.listen(bad)
        assert e.value.place == "--listen"


@pytest.mark.parametrize("argv,words", [
    (["serve", "--listen", "0.0.0.0:8470"], "--listen: expected --token-file"),
    (["serve", "--listen", "198.18.0.1"], "--listen: expected --token-file"),
    (["serve", "--listen", "127.0.0.1:99999"], "--listen: expected HOST:PORT"),
    (["serve", "--token-file", "/nonexistent/token"], "--token-file: expected a readable"),
])
def test_serve_refuses_bad_input_before_listening(argv: list[str], words: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("sfclab: error: ") and words in err, err


def test_serve_says_when_the_port_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert main(["serve", "--listen", f"127.0.0.1:{port}"]) == ExitStatus.FAILURE
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in capsys.readouterr().err


# ------------------------------------------------------------------ graph --format html

def test_graph_html_is_one_self_contained_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", str(SFC), "--format", "html"]) == ExitStatus.OK
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r'<script[^>]+src=|<link[^>]+href="(?!data:)', page)  # nothing fetched
    assert "cytoscape" in page and "SfclabGraph" in page
    data = re.search(r'<script type="application/json" id="topology">(.*?)</script>', page, re.S)
    assert data is not None
    topo = json.loads(data.group(1))
    assert topo["lab"] == "sfcweb" and len(topo["nodes"]) == 7 and len(topo["links"]) == 7
    assert {c["chain"] for c in topo["chains"]} == {"web", "dns"}


def test_graph_html_escapes_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text(textwrap.dedent("""\
        name: x
        nodes: {src: {kind: host}, dst: {kind: host}}
        links: [{endpoints: [src, dst]}]
        """))
    assert main(["graph", str(lab), "--format", "html"]) == ExitStatus.OK
    assert "<title>sfclab lab x</title>" in capsys.readouterr().out
