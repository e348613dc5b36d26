"""The native generator and receiver over IPv6, and packet measurements with ``ip: 6``, through
a router of a real dual-stack lab (src - r1 - dst, ``ip: dual``)."""

from __future__ import annotations

import json
import subprocess

import pytest

from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.spec.measurement import NdrRequest, RateRequest
from sfclab.traffic import measure
from sfclab.traffic.native import NativeGenerator

from .labtools import planned


@pytest.fixture
def routed6(running_lab, sfcgen):
    """src - r1 - dst of ip dual; yields (lab, {node: its first IPv6 address})."""
    lab = running_lab({"ip": "dual", "chain": {"length": 3}})
    plan = lab._plan()
    return lab, {n: plan.address_of(n, 6) for n in ("src", "r1", "dst")}


@pytest.mark.serial  # times or counts what the machine's load changes
@pytest.mark.parametrize("sink", ["kernel", "xdp", "tc", "socket"])
def test_ipv6_trial_through_a_router_loses_nothing_with_each_sink(routed6, sink):
    lab, v6 = routed6
    with NativeGenerator(lab.netns("src"), lab.netns("dst"), str(v6["dst"]), flows=4,
                         threads=2, port=7211, sink=sink) as gen:
        t = gen.trial(8_000, 0.5, 84)
    assert t.sent <= 4_000 and 3_960 <= planned(t)
    assert t.received == t.sent and t.lost == 0, t.raw["sink"]
    assert t.raw["sink"]["invalid"] == 0
    assert t.raw["sink"]["per_flow"]["received"] == t.raw["sender"]["per_flow_sent"]
    assert t.raw["sink"]["bytes"] == t.raw["sender"]["bytes"] == 84 * t.raw["sender"]["sent"]
    assert 0 < t.latency_us["p50"] <= t.latency_us["max"]


@pytest.mark.serial  # times or counts what the machine's load changes
@pytest.mark.parametrize("engine", ["packet", "ring", "udp", "xdp"])
def test_every_engine_sends_ipv6_with_a_valid_checksum(routed6, engine):
    """The socket sink takes only datagrams whose UDP checksum is right (IPv6 has no 'no
    checksum'), so every probe counted proves the engine's checksum."""
    lab, v6 = routed6
    with NativeGenerator(lab.netns("src"), lab.netns("dst"), str(v6["dst"]), flows=2,
                         threads=2, port=7212, sink="socket", engine=engine) as gen:
        t = gen.trial(4_000, 0.5, 300)
    assert t.raw["sender"]["engine"] == engine
    assert t.sent <= 2_000 and 1_960 <= planned(t)
    assert t.received == t.sent, (t.raw["sink"], t.raw["sender"])
    assert t.raw["sink"]["bytes"] == 300 * t.received


def test_ipv6_frames_below_84_bytes_and_imix_are_refused(routed6, sfcgen):
    lab, v6 = routed6
    for size, words in (("64", "--size 64: an IPv6 frame with the probe is at least 84 bytes"),
                        ("imix", "--size imix")):
        cp = subprocess.run(["ip", "netns", "exec", lab.netns("src"), sfcgen, "send", "--dst",
                             str(v6["dst"]), "--dport", "7213", "--size", size],
                            capture_output=True, text=True)
        assert cp.returncode == 2 and words in cp.stderr, cp.stderr


def test_traffic_refuses_an_ipv6_size_below_84_with_its_place(routed6, capsys):
    lab, _ = routed6
    assert main(["traffic", "rate", lab.name, "--ip", "6", "--size", "64", "--rates", "1k"]) == 2
    err = capsys.readouterr().err
    assert "--size" in err and "84" in err, err
    assert main(["traffic", "rate", lab.name, "--ip", "5", "--rates", "1k"]) == 2
    assert "--ip" in capsys.readouterr().err


@pytest.mark.serial  # times or counts what the machine's load changes
def test_traffic_rate_with_ip_6_sends_to_the_ipv6_address(routed6, capsys):
    lab, v6 = routed6
    assert main(["traffic", "rate", lab.name, "--ip", "6", "--rates", "5k", "--duration", "0.5",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params"]["ip"] == 6 and d["params"]["dst_ip"] == str(v6["dst"])
    p = d["points"][0]
    assert p["size"] == 84 and p["sent"] > 0 and p["lost"] == 0, p


@pytest.mark.serial  # times or counts what the machine's load changes
def test_ndr_over_ipv6_through_a_router_is_a_rate(routed6):
    """A 10 Mbit/s TBF on the router's egress toward dst passes 10e6 / 8 / 80 pps of 84-byte
    frames (80 bytes at the qdisc, no FCS): the NDR over IPv6 is that rate, not a bound.  The
    search starts at 1.3 times that, above the 1.2 the check allows (a bound there fails)."""
    lab, v6 = routed6
    shaper_pps = 10e6 / 8 / 80
    lab.exec("r1", ["tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "10mbit",
                    "burst", "32kbit", "latency", "20ms"])
    m = measure.run(lab.name, NdrRequest(ip=6, duration=1.0, max_rate=1.3 * shaper_pps,
                                         precision=5))
    assert m.params["dst_ip"] == str(v6["dst"]) and m.params["ip"] == 6
    ndr = m.extra["ndr_pps"]
    assert ndr is not None, m.extra  # a rate, not a lower bound
    assert 0.8 * shaper_pps <= ndr <= 1.2 * shaper_pps, m.extra


@pytest.mark.serial  # counts the machine's drop counters
def test_the_loss_locator_places_ipv6_loss_on_the_router(routed6):
    """A TBF on the router's egress toward dst drops most of an offered rate well above it; the
    locator (family-agnostic: it counts freed buffers by namespace and reason) puts the loss
    on r1."""
    lab, _ = routed6
    lab.exec("r1", ["tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "5mbit",
                    "burst", "32kbit", "latency", "20ms"])
    m = measure.run(lab.name, RateRequest(ip=6, rates=[40_000], duration=1.0, sink="xdp"))
    p = m.extra["points"][0]
    assert p["loss_ratio"] > 0.5, p
    where = p["located"]
    assert where["loss_by_node"].get("r1", 0) >= 0.8 * p["lost"], where


def test_ip_6_in_a_lab_without_ipv6_exits_2_and_starts_nothing(running_lab, capsys):
    lab = running_lab({"chain": {"length": 2}})
    assert main(["traffic", "rate", lab.name, "--ip", "6", "--rates", "1k"]) == 2
    assert "has no IPv6 address" in capsys.readouterr().err
    assert not netns.pids_in([lab.netns("src"), lab.netns("dst")])
