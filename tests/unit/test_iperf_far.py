"""``traffic iperf`` between nodes of hosts reached through their agents, without root: the
request's path (:func:`sfclab.traffic.measure.iperf`) with the lab's runtime faked behind its
interface (``reached_as``, ``tools``, ``spawn_all``), so what is asked of each host is seen:
the servers started together in the receiver's namespace on its host and held until they
listen, then the clients in the sender's on its, each program as that host's iperf3 takes it
and not pinned there; the clients ended before the servers; the result of a run here, with a
warning; on a failure every group started is ended; a bad request starts nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sfclab.errors import LabError, MeasurementError, SpecError
from sfclab.plan.build import build_plan
from sfclab.realize.runtime.process import Ended, StartFailed
from sfclab.realize.state import LabState
from sfclab.spec.measurement import from_options
from sfclab.traffic import measure

DATA = Path(__file__).parent / "data"
CLIENTS = [(DATA / f"iperf3_tcp3_flow{i}.json").read_text() for i in (1, 2, 3)]
SERVER = (DATA / "iperf3_udp_server.json").read_text()
REFUSED = (DATA / "iperf3_error_refused.json").read_text()


class FakePrograms:
    """What ``spawn_all`` hands back: ends with the outputs it was given."""

    def __init__(self, log: list[Any], argvs: list[list[str]], outputs: list[str]):
        self.log, self.argvs, self.outputs = log, argvs, outputs
        self.waits: list[float] = []

    @property
    def pids(self) -> list[int]:
        return [100 + i for i in range(len(self.argvs))]

    def end(self, wait: float) -> list[Ended]:
        self.log.append(("end", self.argvs[0][1], wait))
        self.waits.append(wait)
        return [Ended(100 + i, 0, out, "", 0.25, True) for i, out in enumerate(self.outputs)]


class FakeRuntime:
    """A runtime of hosts reached through their agents, as :class:`~sfclab.traffic.place.Place`
    uses it; ``versions``: iperf3's on each host; ``clients``: each client's output;
    ``refuse``: a :class:`StartFailed` the servers' ``spawn_all`` raises."""

    here = False

    def __init__(self, versions: dict[str, str], clients: list[str],
                 refuse: StartFailed | None = None):
        self.versions, self.clients, self.refuse = versions, clients, refuse
        self.log: list[Any] = []
        self.held: list[FakePrograms] = []

    def reached_as(self, host: Any) -> str:
        return host.name

    def tools(self, host: str) -> dict[str, Any]:
        self.log.append(("tools", host))
        return {"sfcgen": None, "why": "not built", "iperf3": self.versions[host]}

    def spawn_all(self, host: str, ns: str, argvs: list[list[str]], *,
                  listen: list[int] | None = None, timeout: float = 5.0) -> FakePrograms:
        self.log.append(("spawn_all", host, ns, argvs, listen))
        server = argvs[0][1] == "-s"
        if server and self.refuse is not None:
            raise self.refuse
        p = FakePrograms(self.log, argvs, [SERVER] * len(argvs) if server
                         else self.clients[:len(argvs)])
        self.held.append(p)
        return p


@pytest.fixture
def far(monkeypatch, tmp_path, ssh_lab):
    """Lab ``far`` (``ssh_lab`` of tests/unit/conftest.py: a on host h1, b on host h2,
    each reached over SSH, a link between them); its plan served to the measurement, its
    runtime the fake's."""
    plan = build_plan(ssh_lab, cpus=[0])
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(measure, "load_plan", lambda lab: (LabState(lab), plan))

    def use(rt: FakeRuntime) -> FakeRuntime:
        monkeypatch.setattr(measure, "runtime_at", lambda state, plan, host: rt)
        return rt
    return plan, use


def request(**kw: Any) -> Any:
    return from_options({"type": "iperf", "from": "a", "to": "b", "duration": 1, **kw})


def test_iperf_between_far_nodes_is_run_there_through_the_runtime(far):
    plan, use = far
    rt = use(FakeRuntime({"h1": "3.7", "h2": "3.12"}, CLIENTS))
    m = measure.iperf("far", request(flows=3)).to_dict()
    spawned = [e for e in rt.log if e[0] == "spawn_all"]
    assert [(host, ns) for _, host, ns, _, _ in spawned] == \
        [("h2", plan.netns_of("b")), ("h1", plan.netns_of("a"))]  # servers first, together
    (_, _, _, servers, listen), (_, _, _, clients, no_listen) = spawned
    assert listen == [5201, 5202, 5203] and no_listen is None
    assert [s[:6] for s in servers] == [["iperf3", "-s", "-1", "-J", "-p", str(p)]
                                        for p in listen]
    b = str(plan.address_of("b"))
    assert [c[:5] for c in clients] == [["iperf3", "-c", b, "-p", str(p)] for p in listen]
    # each as the iperf3 of its host takes it (3.12 on h2, 3.7 on h1), and pinned nowhere
    assert all("--idle-timeout" in s for s in servers)
    assert not any("--connect-timeout" in c for c in clients)
    assert not any("-A" in argv for argv in servers + clients)
    # the clients are waited for (the test's length and slack), then the servers ended
    ends = [e for e in rt.log if e[0] == "end"]
    assert [who for _, who, _ in ends][:2] == ["-c", "-s"]
    assert ends[0][2] > measure_slack() and ends[1][2] <= 3.0
    # the result of a run here
    raw = [float(x) for x in (m["raw"]["clients"][i]["end"]["sum_received"]["bits_per_second"]
                              for i in range(3))]
    assert m["type"] == "iperf3" and m["metrics"]["throughput_bps"] == pytest.approx(sum(raw))
    assert m["metrics"]["flows"] == 3 and m["per_flow_bps"] == raw
    assert [(f["client_core"], f["server_core"]) for f in m["per_flow"]] == [(None, None)] * 3
    assert [f["client_cpu_s"] for f in m["per_flow"]] == [0.25] * 3
    assert m["params"]["from"] == "a" and m["params"]["to"] == "b" and m["params"]["path"]
    assert len(m["raw"]["servers"]) == 3 and "unparsed" not in m["raw"]["servers"][0]
    (w,) = m["warnings"]
    assert "h1, h2" in w and "not pinned to cores" in w
    assert sorted(e[1] for e in rt.log if e[0] == "tools") == ["h1", "h2"]  # once each


def measure_slack() -> float:
    from sfclab.traffic import iperf

    return iperf.CLIENT_SLACK_S + iperf.CONNECT_TIMEOUT_MS / 1e3


def test_a_flow_that_fails_there_fails_the_run_and_everything_started_is_ended(far):
    _, use = far
    rt = use(FakeRuntime({"h1": "3.12", "h2": "3.12"}, [CLIENTS[0], REFUSED]))
    with pytest.raises(MeasurementError, match=r"flow 1 \(port 5202\): .*unable to connect"):
        measure.iperf("far", request(flows=2, affinity="none"))
    assert len(rt.held) == 2 and all(p.waits for p in rt.held)  # clients and servers ended


def test_servers_that_stop_before_listening_fail_with_iperf3s_words(far):
    _, use = far
    said = '{"error": "error - unable to start listener for connections: Address in use"}'
    rt = use(FakeRuntime({"h1": "3.12", "h2": "3.12"}, CLIENTS, refuse=StartFailed(
        "iperf3 stopped before listening on port 5202", 1, Ended(7, 1, said, "", 0.0, True))))
    with pytest.raises(MeasurementError, match=r"iperf3 server 1 \(port 5202\) stopped before "
                                               r"listening: error - unable to start listener"):
        measure.iperf("far", request(flows=2))
    assert rt.held == []  # no client was started
    rt = use(FakeRuntime({"h1": "3.12", "h2": "3.12"}, CLIENTS,
                         refuse=StartFailed("not listening", None)))
    with pytest.raises(MeasurementError, match=r"not listening on \[5201, 5202\] after 5 s"):
        measure.iperf("far", request(flows=2))


@pytest.mark.parametrize("kw, error", [({"to": "nosuch"}, LabError),
                                       ({"to": "a"}, SpecError)])
def test_a_bad_request_starts_nothing(far, kw, error):
    _, use = far
    rt = use(FakeRuntime({"h1": "3.12", "h2": "3.12"}, CLIENTS))
    with pytest.raises(error) as e:
        measure.iperf("far", request(**kw))
    assert e.value.exit_status == 2
    assert [x for x in rt.log if x[0] == "spawn_all"] == []


def test_no_iperf3_on_a_host_is_said_before_anything_starts(far):
    _, use = far
    rt = use(FakeRuntime({"h1": "3.12", "h2": "absent"}, CLIENTS))
    with pytest.raises(MeasurementError, match="iperf3 is not installed on host h2"):
        measure.iperf("far", request())
    assert [x for x in rt.log if x[0] == "spawn_all"] == []
