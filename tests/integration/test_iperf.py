"""iperf3 between two fresh namespaces joined by a veth pair (needs root and iperf3).

The ``veth_pair`` fixture (conftest) is a two-node lab: sender 198.18.0.1, receiver 198.18.0.2;
it checks that no process is left in them and always removes the lab.
"""

from __future__ import annotations

import shutil

import pytest

from sfclab.errors import MeasurementError
from sfclab.kernel import netns
from sfclab.traffic.iperf import run_iperf

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")

SRC_IP, DST_IP = "198.18.0.1", "198.18.0.2"


@pytest.fixture
def pair(veth_pair):
    return veth_pair


def test_tcp_three_flows(pair):
    src, dst = pair
    m = run_iperf(src, dst, DST_IP, flows=3, duration=2).to_dict()
    assert m["type"] == "iperf3"
    met = m["metrics"]
    assert met["throughput_bps"] > 0
    assert met["flows"] == 3
    assert len(m["per_flow_bps"]) == 3 and all(r > 0 for r in m["per_flow_bps"])
    assert sum(m["per_flow_bps"]) == pytest.approx(met["throughput_bps"])
    assert 0 < met["jain_fairness"] <= 1
    assert "retransmits" in met
    assert [f["port"] for f in m["per_flow"]] == [5201, 5202, 5203]
    assert m["cpu"]["all"]["busy"] > 0
    assert len(m["cpu"]["process_cpu_s"]) == 6
    assert all(v is not None and v >= 0 for v in m["cpu"]["process_cpu_s"].values())
    assert m["environment"]["versions"]["iperf3"] != "absent"
    assert len(m["raw"]["clients"]) == 3


def test_udp_three_flows(pair):
    src, dst = pair
    m = run_iperf(src, dst, DST_IP, flows=3, duration=2, udp=True, bitrate="50M",
                  length=1200, affinity="none", base_port=5301).to_dict()
    met = m["metrics"]
    assert met["throughput_bps"] > 0
    assert len(m["per_flow_bps"]) == 3
    assert 0 < met["jain_fairness"] <= 1
    for key in ("udp_loss_ratio", "udp_lost_packets", "udp_sent_packets",
                "udp_received_packets", "udp_jitter_ms"):
        assert key in met
    assert 0 <= met["udp_loss_ratio"] <= 1
    assert met["udp_sent_packets"] >= met["udp_received_packets"] > 0
    assert all(f["client_core"] is None for f in m["per_flow"])


def test_zerocopy_and_omit(pair):
    src, dst = pair
    m = run_iperf(src, dst, DST_IP, flows=1, duration=1, omit=1, zerocopy=True).to_dict()
    assert m["metrics"]["throughput_bps"] > 0
    assert m["metrics"]["jain_fairness"] == 1.0
    argv_ok = m["raw"]["clients"][0]["start"]["test_start"]
    assert argv_ok["omit"] == 1 and argv_ok["duration"] == 1


def test_unreachable_server_fails_and_leaves_nothing(pair):
    src, dst = pair
    with pytest.raises(MeasurementError, match="unable to connect") as ei:
        run_iperf(src, dst, "198.19.255.1", flows=3, duration=2)
    assert "flow 0" in str(ei.value)
    assert netns.pids_in([src, dst]) == {}


def test_port_in_use_fails_and_leaves_nothing(pair):
    src, dst = pair
    blocker = netns.popen(dst, ["iperf3", "-s", "-p", "5402"])
    try:
        with pytest.raises(MeasurementError, match="port 5402.*Address already in use"):
            run_iperf(src, dst, DST_IP, flows=3, duration=2, base_port=5400)
        assert set(netns.pids_in([src, dst])) == {blocker.pid}
    finally:
        netns.end_processes([blocker.pid])
        blocker.wait(timeout=5)
