"""The API on real labs, in process (FastAPI's TestClient): a lab posted, inspected, its live
counters read while packets flow, its chains read from the eBPF maps, a measurement run in the
background with its lost packets placed on the shaper that dropped them, and the lab removed.

The lab is :func:`tests.integration.weblab.web_lab`."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from sfclab.kernel import cpus, netns
from sfclab.realize.state import LabState
from tests.integration.weblab import serving, web_lab
from tests.webclient import YAML, api_client


@pytest.fixture
def client() -> Iterator[TestClient]:
    with api_client() as c:
        yield c


def wait_for(c: TestClient, job: int, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = c.get(f"/api/measurements/{job}").json()
        if d["status"] != "running":
            return d
        time.sleep(0.2)
    raise AssertionError(f"measurement {job} still running after {timeout} s")


def test_a_lab_through_the_api(client: TestClient, lab_name: str) -> None:
    text = yaml.safe_dump(web_lab(lab_name), sort_keys=False)
    try:
        r = client.post("/api/labs", content=text, headers={"content-type": "application/yaml"})
        assert r.status_code == 201, r.text
        assert r.json() == {"name": lab_name, "namespaces": 8, "links": 8, "ovs_bridges": 0,
                            "routes": r.json()["routes"]}
        again = client.post("/api/labs", content=text, headers=YAML)
        assert again.status_code == 409 and "already up" in again.json()["error"]
        assert lab_name in [x["name"] for x in client.get("/api/labs").json()]

        inspected = client.get(f"/api/labs/{lab_name}").json()
        assert list(inspected["nodes"]) == ["src", "r1", "fw1", "fw2", "r2", "nat", "sh", "dst"]
        dst_ip = inspected["nodes"]["dst"]["interfaces"][0]["addresses"][0].split("/")[0]

        # live counters: every interface of the lab, and they move with the packets
        before = client.get(f"/api/labs/{lab_name}/counters").json()
        ifaces = {(i["node"], i["ifname"]) for i in before["interfaces"]}
        plan = LabState(lab_name).plan()
        assert plan is not None
        assert ifaces == {(i["node"], i["name"]) for i in plan["interfaces"]}
        netns.run(f"sfclab:{lab_name}:src", ["ping", "-c", "20", "-i", "0.01", "-q", dst_ip])
        after = client.get(f"/api/labs/{lab_name}/counters").json()
        assert after["time"] > before["time"]
        grew = {(i["node"], i["ifname"]): i["tx_packets"] for i in after["interfaces"]}
        was = {(i["node"], i["ifname"]): i["tx_packets"] for i in before["interfaces"]}
        assert grew[("src", "eth0")] - was[("src", "eth0")] >= 20
        assert grew[("sh", "eth1")] - was[("sh", "eth1")] >= 20  # toward dst, on the route

        # chains: the listing, and a chain's counters read from the data plane
        rows = client.get(f"/api/labs/{lab_name}/chains").json()
        assert {x["chain"] for x in rows} == {"web", "dns"}
        web = client.get(f"/api/labs/{lab_name}/chains/web").json()
        assert set(web["chains"]) == {"web"}
        assert client.get(f"/api/labs/{lab_name}/chains/nochain").status_code == 404

        # a measurement in the background: its progress, its result, where its packets died
        bad = client.post(f"/api/labs/{lab_name}/measurements",
                          json={"type": "rate", "rates": [1000], "to": "nobody"})
        assert bad.status_code == 422 and bad.json()["place"] == "to"
        r = client.post(f"/api/labs/{lab_name}/measurements",
                        json={"type": "rate", "from": "src", "to": "dst",
                              "rates": ["2k", "40k"], "duration": 1})
        assert r.status_code == 202, r.text
        job = wait_for(client, r.json()["id"])
        assert job["status"] == "done", job["error"]
        assert len(job["progress"]) == 2
        result = client.get(f"/api/measurements/{job['id']}/result").json()
        low, high = result["points"]
        # 40 kpps against a shaper of about 10 kpps: most is lost, and at the shaper (what the
        # low rate loses depends on the machine's load: backlog drops when others are busy)
        assert high["loss_ratio"] > 0.2 and high["lost"] > low["lost"]
        counted = {(i["node"], i["ifname"]): i for i in
                   client.get(f"/api/labs/{lab_name}/counters").json()["interfaces"]}
        assert counted[("sh", "eth1")]["qdisc_dropped"] > 0.2 * high["lost"]  # the shaper's
        assert counted[("r1", "eth0")]["qdisc_dropped"] == 0
        loss = client.get(f"/api/labs/{lab_name}/loss").json()
        assert loss["measurement"] == job["id"]
        assert loss["loss_by_node"].get("sh", 0) > 0.2 * high["lost"]  # the shaper's drops
        assert loss["loss_by_reason"].get("QDISC_DROP", 0) > 0

        r = client.delete(f"/api/labs/{lab_name}")
        assert r.status_code == 200 and r.json()[lab_name]["namespaces"] == 8
        assert not LabState(lab_name).exists and not netns.exists(f"sfclab:{lab_name}:src")
        assert client.get(f"/api/labs/{lab_name}/counters").status_code == 404
    finally:
        if LabState(lab_name).exists:
            client.delete(f"/api/labs/{lab_name}")


def test_counters_of_ovs_ports_in_the_root_namespace(client: TestClient, running_lab: Any,
                                                    lab_name: str) -> None:
    """A lab whose OVS bridges have veth ports: their root-side ends are read by their exact
    names, as the bridge's, and nothing else of the root namespace is."""
    running_lab({"name": lab_name, "chain": {"length": 3, "link": "ovs", "port": "veth"}})
    plan = LabState(lab_name).plan()
    assert plan is not None
    roots = {(i["node"], i["name"]) for i in plan["interfaces"] if i["netns"] is None}
    assert roots, "the lab has no root-side interface to read"
    rows = client.get(f"/api/labs/{lab_name}/counters").json()["interfaces"]
    assert {(r["node"], r["ifname"]) for r in rows if r["root"]} == roots
    assert {(r["node"], r["ifname"]) for r in rows} == {
        (i["node"], i["name"]) for i in plan["interfaces"]}
    t = client.get(f"/api/labs/{lab_name}/topology").json()
    assert {n["kind"] for n in t["nodes"]} >= {"ovs-bridge", "host", "router"}


@pytest.mark.serial  # times or counts what the machine's load changes
def test_stopping_the_server_mid_measurement_leaves_the_lab_as_it_was(
        running_lab: Any, lab_name: str, tmp_path: Path) -> None:
    """SIGTERM while a measurement runs: the server ends with status 0 once the measurement has
    unwound: no process left in the lab, the first hop's receive steering as it was, the lab up."""
    lab = running_lab(web_lab(lab_name))
    spaces = [lab.netns(n) for n in web_lab(lab_name)["nodes"]]
    rps_before = cpus.rps_mask(lab.netns("r1"), "eth0")
    with serving(tmp_path / "none.db") as served:
        req = urllib.request.Request(
            f"{served.url}api/labs/{lab_name}/measurements", method="POST",
            data=json.dumps({"type": "rate", "rates": ["2k"], "duration": 60}).encode(),
            headers={"content-type": "application/json", **served.auth})
        assert json.load(urllib.request.urlopen(req, timeout=30))["status"] == "running"
        deadline = time.monotonic() + 30
        while not netns.pids_in(spaces):  # the generator and its sink have started
            assert time.monotonic() < deadline, "the measurement never started"
            time.sleep(0.05)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 30  # stopped, not waited out (60 s)
    assert netns.pids_in(spaces) == {}
    assert cpus.rps_mask(lab.netns("r1"), "eth0") == rps_before
    assert LabState(lab_name).meta()["status"] == "up"
    assert all(netns.exists(ns) for ns in spaces)
