"""The server side of the lab view's measurement form, without root: the check route (the
command line's words at the place they name, nothing started), the rows a job keeps per trial
(offered, received, loss, where the packets were lost, the interval an NDR/PDR search narrowed
to) and a worker signalled through its pidfd."""

from __future__ import annotations

import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sfclab.errors import SpecError
from sfclab.spec.measurement import from_options
from sfclab.web.jobs import Jobs
from sfclab.web.progress import goals_of, trial_row
from sfclab.web.services import Services
from tests.webclient import api_client, fake_up

ROOT = Path(__file__).resolve().parents[2]
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


# ------------------------------------------------------------------ the check route

@pytest.mark.parametrize("options,request_,place", [
    ({"rates": ["100k", "fast"]}, {"type": "rate", "rates": ["100k", "fast"]}, "rates[1]"),
    ({"rates": ["0"]}, {"type": "rate", "rates": ["0"]}, "rates[0]"),
    ({"size": "32", "rates": ["1k"]}, {"type": "rate", "size": "32", "rates": ["1k"]}, "size"),
    ({"duration": "soon", "rates": ["1k"]}, {"type": "rate", "duration": "soon", "rates": ["1k"]},
     "duration"),
    ({"max_rate": "lots"}, {"type": "ndr", "max_rate": "lots"}, "max_rate"),
    ({"ip": "6", "size": "64", "rate": "1k"},
     {"type": "latency", "ip": "6", "size": "64", "rate": "1k"}, "size"),
])
def test_check_answers_the_command_lines_message_at_its_place(
        client: TestClient, options: dict, request_: dict, place: str) -> None:
    name = fake_up(CHAIN5)
    with pytest.raises(SpecError) as cli:
        from_options({"type": request_["type"], **options})
    r = client.post(f"/api/labs/{name}/measurements/check", json=request_)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["message"] == cli.value.message and body["place"] == place, body
    assert client.get("/api/measurements").json() == []


def test_check_of_a_good_request_fills_the_defaults_and_starts_nothing(
        client: TestClient) -> None:
    name = fake_up(CHAIN5)
    r = client.post(f"/api/labs/{name}/measurements/check",
                    json={"type": "ndr", "from": "src", "to": "dst", "pdr_loss": "1%"})
    assert r.status_code == 200, r.text
    req = r.json()["request"]
    assert req["type"] == "ndr" and req["pdr_loss"] == 1.0 and req["size"] == 64
    assert req["method"] == "mlr" and req["duration"] == 2.0
    assert client.get("/api/measurements").json() == []


def test_check_knows_the_labs_nodes_and_its_path(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    r = client.post(f"/api/labs/{name}/measurements/check",
                    json={"type": "rate", "rates": ["1k"], "to": "nosuch"})
    assert r.status_code == 422 and r.json()["place"] == "to" and "nosuch" in r.json()["error"]
    r = client.post(f"/api/labs/{name}/measurements/check",
                    json={"type": "rate", "rates": ["1k"], "size": 9000})
    assert r.status_code == 422 and "path MTU" in r.json()["error"]
    assert client.post("/api/labs/nolab/measurements/check",
                       json={"type": "iperf"}).status_code == 404


def test_check_is_guarded_as_every_body_route(client: TestClient) -> None:
    name = fake_up(CHAIN5)
    r = client.post(f"/api/labs/{name}/measurements/check", content=b"{}",
                    headers={"content-type": "text/plain"})
    assert r.status_code == 415
    with api_client(token=False) as anonymous:
        assert anonymous.post(f"/api/labs/{name}/measurements/check",
                              json={"type": "iperf"}).status_code == 401
    doc = client.get("/openapi.json").json()["paths"]["/api/labs/{lab}/measurements/check"]
    assert set(doc) == {"post"} and {"200", "404", "413", "415", "422"} <= set(
        doc["post"]["responses"])


# ------------------------------------------------------------------ trial rows

def trial(index: int, offered: float, loss: float, purpose: str = "search",
          **kw: object) -> dict:
    return {"index": index, "purpose": purpose, "offered_pps": offered,
            "effective_pps": offered, "sent_pps": offered, "received_pps": offered * (1 - loss),
            "loss_ratio": loss, "lost": int(offered * loss), "measurement_limited": False, **kw}


def test_a_binary_search_row_carries_the_interval_it_narrowed_to() -> None:
    ev = {**trial(3, 50000, 0.2), "intervals": {"ndr": [20000, 50000], "pdr": [20000, None]},
          "done": ["ndr"], "located": {"loss_by_node": {"sh": 10000}}}
    row = trial_row(ev, [], goals_of({"type": "ndr", "ndr_loss": 0, "pdr_loss": 0.5}))
    assert row["intervals"] == {"ndr": [20000, 50000], "pdr": [20000, None]}
    assert row["done"] == ["ndr"] and row["bracketed"] is False
    assert row["loss_by_node"] == {"sh": 10000} and row["received_pps"] == 40000


def test_an_mlr_row_carries_the_bracket_its_trials_prove() -> None:
    goals = goals_of({"type": "ndr", "ndr_loss": 0, "pdr_loss": 0.5})
    assert goals == {"ndr": 0.0, "pdr": 0.005}
    rows: list[dict] = []
    for i, (load, loss, purpose) in enumerate([(900000, 0.5, "max-rate"), (800000, 0.4, "search"),
                                              (100000, 0.0, "search"), (400000, 0.003, "search"),
                                              (300000, 0.0, "search")]):
        rows.append(trial_row({"index": i, "trial": trial(i, load, loss, purpose)}, rows, goals))
    assert rows[0]["intervals"] == {"ndr": [None, None], "pdr": [None, None]}  # not evidence
    assert rows[1]["intervals"] == {"ndr": [None, 800000], "pdr": [None, 800000]}
    assert rows[3]["intervals"] == {"ndr": [100000, 400000], "pdr": [400000, 800000]}
    assert rows[4]["intervals"] == {"ndr": [300000, 400000], "pdr": [400000, 800000]}
    assert all(r["bracketed"] for r in rows) and rows[4]["index"] == 4


def test_a_rate_curve_row_has_no_interval() -> None:
    row = trial_row(trial(0, 1000, 0.01, "curve"), [], goals_of({"type": "rate"}))
    assert "intervals" not in row and row["loss_ratio"] == 0.01 and row["loss_by_node"] == {}


# ------------------------------------------------------------------ jobs

WORKER = """\
#!{python}
import json, sys, time
request = json.loads(sys.stdin.read())
say = lambda **kw: print(json.dumps(kw), flush=True)
for i, (load, loss) in enumerate([(800000, 0.4), (100000, 0.0)]):
    say(event="progress", data={{"index": i, "trial": {{"index": i, "purpose": "search",
        "offered_pps": load, "effective_pps": load, "sent_pps": load,
        "received_pps": load * (1 - loss), "loss_ratio": loss,
        "located": {{"loss_by_node": {{"sh": int(load * loss)}}}}}}}})
try:
    time.sleep(60)
except KeyboardInterrupt:
    say(event="error", status=499, body={{"error": "stopped", "type": "Stopped"}})
    sys.exit(130)
"""


def test_a_job_keeps_a_row_per_trial_and_is_stopped_through_its_pidfd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prog = tmp_path / "worker"
    prog.write_text(WORKER.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    name = fake_up(CHAIN5)
    sent: list[tuple[int, int]] = []
    real = signal.pidfd_send_signal
    monkeypatch.setattr(signal, "pidfd_send_signal",
                        lambda fd, sig, *a: (sent.append((fd, sig)), real(fd, sig, *a))[1])
    jobs = Jobs(str(prog))
    with api_client(services=Services(db=str(tmp_path / "none.db"), jobs=jobs)) as c:
        job = c.post(f"/api/labs/{name}/measurements", json={"type": "ndr"}).json()
        for _ in range(400):
            d = c.get(f"/api/measurements/{job['id']}").json()
            if len(d["rows"]) == 2:
                break
            time.sleep(0.025)
        assert [r["loss_by_node"] for r in d["rows"]] == [{"sh": 320000}, {"sh": 0}]
        assert d["rows"][1]["intervals"] == {"ndr": [100000, 800000], "pdr": [100000, 800000]}
        fd = jobs.get(job["id"]).pidfd
        assert fd is not None
        stopped = c.delete(f"/api/measurements/{job['id']}").json()
        assert stopped["status"] == "stopped" and stopped["trials"] == 2
        assert sent == [(fd, signal.SIGINT)]
        j = jobs.get(job["id"])
        assert j.pidfd is None and j.proc is not None and j.proc.poll() == 130
        assert len(c.get(f"/api/measurements/{job['id']}").json()["rows"]) == 2
