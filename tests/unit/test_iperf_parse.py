"""Parsing real iperf3 3.12 output (captured between two namespaces on a veth pair), the
Measurement result shape, and the environment record.

Data in tests/unit/data: ``iperf3_tcp3_flow{1,2,3}.json`` (three TCP client reports of one
3-flow run), ``iperf3_udp3_flow{1,2,3}.json`` (three UDP clients at unlimited rate, heavy loss),
``iperf3_udp_server.json`` (a server's report), ``iperf3_error_refused.json`` (no server: iperf3
3.12 exits 0 and puts the error in JSON) and ``iperf3_error_affinity.stderr`` (a bad ``-A``:
no JSON at all, exit status 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sfclab.errors import MeasurementError, SpecError
from sfclab.traffic import environment as envmod
from sfclab.traffic.iperf import (core_plan, jain_index, load_client_output, parse_flow,
                                  run_iperf, summarize)
from sfclab.traffic.result import Measurement

DATA = Path(__file__).parent / "data"


def client(name: str) -> dict:
    text = (DATA / name).read_text()
    return load_client_output(text, "", 0)


def flows(kind: str):
    return [parse_flow(client(f"iperf3_{kind}3_flow{i}.json")) for i in (1, 2, 3)]


# -- TCP ----------------------------------------------------------------------------------------

def test_tcp_three_flows():
    fl = flows("tcp")
    assert [f.protocol for f in fl] == ["TCP"] * 3
    raw = [client(f"iperf3_tcp3_flow{i}.json")["end"]["sum_received"]["bits_per_second"]
           for i in (1, 2, 3)]
    assert [f.received_bps for f in fl] == raw
    m = summarize(fl)
    assert m["throughput_bps"] == pytest.approx(sum(raw))
    assert m["throughput_bps"] == pytest.approx(6558614950.5 + 14730826872.9 + 6502802581.9)
    assert m["flows"] == 3
    assert m["retransmits"] == 0
    assert m["flow_min_bps"] == min(raw) and m["flow_max_bps"] == max(raw)
    expected = sum(raw) ** 2 / (3 * sum(r * r for r in raw))
    assert m["jain_fairness"] == pytest.approx(expected)
    assert 1 / 3 < m["jain_fairness"] < 0.95  # one flow got twice the others
    assert "udp_loss_ratio" not in m


def test_tcp_flow_details():
    f = flows("tcp")[0]
    assert f.retransmits == 0
    assert f.received_bytes == 1645608960
    assert f.sent_bytes >= f.received_bytes
    assert f.loss_ratio is None
    assert "loss_ratio" not in f.to_dict()


# -- UDP ----------------------------------------------------------------------------------------

def test_udp_loss_against_packets_sent():
    f1 = flows("udp")[0]
    assert f1.protocol == "UDP"
    assert f1.sent_packets == 425460  # sum_sent.packets of the client
    assert f1.received_packets == 423553 - 321297  # receiver's packets minus lost
    assert f1.received_packets * 1400 == f1.received_bytes  # -l 1400
    assert f1.lost_packets == 425460 - 102256
    assert f1.iperf_lost_packets == 321297  # iperf3 misses the tail lost after the last arrival
    assert f1.lost_packets > f1.iperf_lost_packets
    assert f1.loss_ratio == pytest.approx(323204 / 425460)
    assert f1.received_bps == pytest.approx(571556216.53)  # receiver's rate, not sender's
    assert f1.sent_bps > 4 * f1.received_bps
    assert f1.jitter_ms > 0


def test_udp_totals():
    fl = flows("udp")
    m = summarize(fl)
    sent = 425460 + 759650 + 422270
    received = (423553 - 321297) + (758467 - 499477) + (421322 - 315855)
    assert m["udp_sent_packets"] == sent
    assert m["udp_received_packets"] == received
    assert m["udp_lost_packets"] == sent - received
    assert m["udp_loss_ratio"] == pytest.approx((sent - received) / sent)
    assert m["throughput_bps"] == pytest.approx(571556216.53 + 1450140980.26 + 590543448.97)
    assert m["udp_jitter_max_ms"] >= m["udp_jitter_ms"] > 0
    assert 0 < m["jain_fairness"] <= 1
    assert "retransmits" not in m


def test_udp_without_sum_received_falls_back_to_end_sum():
    doc = client("iperf3_udp3_flow1.json")
    del doc["end"]["sum_received"]
    del doc["end"]["sum_sent"]
    f = parse_flow(doc)
    total = doc["end"]["sum"]
    assert f.sent_packets == total["packets"]
    assert f.received_packets == total["packets"] - total["lost_packets"]
    frac = 1 - total["lost_packets"] / total["packets"]
    assert f.received_bps == pytest.approx(total["bits_per_second"] * frac)


def test_server_report_is_valid_json():
    doc = json.loads((DATA / "iperf3_udp_server.json").read_text())
    assert doc["end"]["sum_received"]["lost_packets"] == 321297


# -- failures -----------------------------------------------------------------------------------

def test_error_in_json_fails_even_with_exit_status_zero():
    text = (DATA / "iperf3_error_refused.json").read_text()
    with pytest.raises(MeasurementError, match="unable to connect to server: Connection refused"):
        load_client_output(text, "", 0)


def test_error_without_json_uses_stderr():
    err = (DATA / "iperf3_error_affinity.stderr").read_text()
    with pytest.raises(MeasurementError, match="unable to set CPU affinity") as ei:
        load_client_output("", err, 1)
    assert "status 1" in str(ei.value)


def test_nonzero_exit_with_valid_json_fails():
    text = (DATA / "iperf3_tcp3_flow1.json").read_text()
    with pytest.raises(MeasurementError, match="status -9"):
        load_client_output(text, "", -9)


def test_truncated_json_fails():
    text = (DATA / "iperf3_tcp3_flow1.json").read_text()[:500]
    with pytest.raises(MeasurementError):
        load_client_output(text, "", 0)


def test_empty_end_fails():
    with pytest.raises(MeasurementError, match="no end-of-test"):
        load_client_output(json.dumps({"start": {}, "intervals": [], "end": {}}))


# -- Jain, cores, options -----------------------------------------------------------------------

def test_jain_index():
    assert jain_index([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([7.0]) == 1.0
    assert jain_index([0.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        jain_index([])
    with pytest.raises(ValueError):
        jain_index([1.0, -1.0])


def test_core_plan():
    assert core_plan(3, "none") == [(None, None)] * 3
    plan = core_plan(4, "auto")
    assert len(plan) == 4
    for c, s in plan:
        assert c is not None and s is not None


@pytest.mark.parametrize("kw", [{"flows": 0}, {"duration": 0}, {"duration": 1.5}, {"omit": -1},
                                {"length": 0}, {"affinity": "all"}, {"base_port": 65535,
                                                                     "flows": 2},
                                {"base_port": 0}, {"bitrate": -1}])
def test_bad_options_fail_before_anything_starts(kw):
    with pytest.raises(SpecError):
        run_iperf("no-such-ns-a", "no-such-ns-b", "198.18.0.2", **kw)


# -- Measurement and environment ----------------------------------------------------------------

def test_measurement_to_dict():
    m = Measurement("iperf3", {"flows": 3}, {"throughput_bps": 10, "generator_limited": True,
                                             "retransmits": None},
                    environment={"kernel": {}}, cpu={"all": {}}, raw={"clients": []},
                    extra={"per_flow_bps": [1.0, 2.0]})
    d = m.to_dict()
    assert list(d)[:6] == ["type", "params", "metrics", "environment", "cpu", "raw"]
    assert d["metrics"] == {"throughput_bps": 10.0, "generator_limited": 1.0}
    assert all(isinstance(v, float) for v in d["metrics"].values())
    assert d["per_flow_bps"] == [1.0, 2.0]
    assert Measurement.from_dict(d).to_dict() == d
    json.dumps(d)


def test_measurement_rejects_bad_metrics_and_clashes():
    with pytest.raises(TypeError):
        Measurement("x", {}, {"a": "fast"})
    with pytest.raises(ValueError):
        Measurement("x", {}, {"a": float("nan")})
    with pytest.raises(ValueError):
        Measurement("x", {}, {"a": float("inf")})
    with pytest.raises(ValueError):
        Measurement("x", {}, {}, extra={"metrics": {}})


def test_parse_version_banners():
    assert envmod.parse_version("iperf 3.12 (cJSON 1.7.15)") == "3.12"
    assert envmod.parse_version("nftables v1.0.6 (Lester Gooch #5)") == "1.0.6"
    assert envmod.parse_version("iptables v1.8.9 (nf_tables)") == "1.8.9"
    assert envmod.parse_version("tc utility, iproute2-6.1.0, libbpf 1.1.2") == "6.1.0"
    assert envmod.parse_version("ovs-vswitchd (Open vSwitch) 3.1.0") == "3.1.0"
    assert envmod.parse_version("no digits here") == "unknown"


def test_environment_record():
    env = envmod.environment()
    assert env["kernel"]["release"]
    assert env["cores"] >= 1 and env["memory_bytes"] > 0
    assert set(env["versions"]) == {"sfclab", "python", "iperf3", "ovs-vswitchd", "nft",
                                    "iptables", "tc"}
    assert all(isinstance(v, str) and v for v in env["versions"].values())
    env["versions"]["sfclab"] = "changed"
    assert envmod.environment()["versions"]["sfclab"] != "changed"  # callers get a copy
    assert envmod.tool_version("sfclab-no-such-tool") == "absent"


def test_unknown_namespace_is_a_lab_error():
    from sfclab.errors import LabError

    with pytest.raises(LabError, match="no network namespace"):
        run_iperf("sfct-ipf-no-such-ns-a", "sfct-ipf-no-such-ns-b", "198.18.0.2")
