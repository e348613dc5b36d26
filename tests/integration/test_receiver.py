"""A receiver that cannot be starved, and the chain's first hop off the generator's core
(issue 23, items 1, 2 and 7): real labs, real kernel counters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sfclab.kernel import netns
from sfclab.spec.measurement import RateRequest
from sfclab.traffic import cores, measure
from sfclab.traffic.cpu import process_cpu_seconds

pytestmark = pytest.mark.serial  # times or counts what the machine's load changes

BENCH = Path(__file__).resolve().parents[2] / "bench"
SOFTIRQ = Path(__file__).resolve().parents[2] / "native" / "build" / "sfc-softirq"
#: 30 Mbit/s of 64-byte frames (60 bytes at the qdisc, no FCS)
SHAPER_PPS = 30e6 / 8 / 60
FW = {"kind": "firewall", "rules": []}


def steered_lab(running_lab, egress_forwarder: bool = False):
    """src - f1 - r1 - f2 - r2 - f3 - dst, the chain steered by labels (bench_sfc_paths (a)):
    dst's eth0 receives plain IPv4 from f3's proxy and runs no XDP program.  With
    ``egress_forwarder``, a router r3 before dst pops the last label in XDP and dst's end keeps
    GRO off (the lab file's), so dst's eth0 runs the data plane's forwarder for NAPI."""
    names = ["src", "f1", "r1", "f2", "r2", "f3", *(["r3"] if egress_forwarder else []), "dst"]
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f1": FW, "f2": FW, "f3": FW}
    links = [{"endpoints": [a, b]} for a, b in zip(names, names[1:])]
    if egress_forwarder:
        links[-1] = {"endpoints": [names[-2], {"node": "dst", "gro": False}]}
    return running_lab({
        "nodes": {n: kinds.get(n, {"kind": "router"}) for n in names},
        "links": links,
        "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                          "dport": measure.BASE_PORT}],
                         "functions": ["f1", "f2", "f3"], "egress": "dst"}}})


def _xdp_on(ns: str, ifname: str) -> bool:
    cp = netns.run(ns, ["ip", "-d", "link", "show", "dev", ifname], check=False)
    return "prog/xdp" in cp.stdout


def _sysfs(ns: str, ifname: str, attr: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifname}/{attr}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _gro(ns: str, ifname: str) -> str:
    out = netns.run(ns, ["ethtool", "-k", ifname]).stdout
    return next(line.split(":")[1].strip() for line in out.splitlines()
                if line.startswith("generic-receive-offload"))


def test_chain5_default_receiver_never_reports_zero(running_lab):
    """The issue: at 1 Mpps through chain5 the socket receiver, starved by the chain's softirq
    on its core, counted 0 in 6 of 6 runs.  The default receiver counts in the softirq that
    delivers to dst: it counts, and nothing is lost in dst itself (the socket receiver's
    namespace lost thousands in its backlog)."""
    lab = running_lab({"chain": {"length": 5}})
    for _ in range(2):
        m = measure.run(lab.name, RateRequest(size=64, rates=[450e3, 1e6], duration=1.0))
        for p in m.extra["points"]:
            assert p["received"] > 0 and p["received_pps"] > 0, p
            # every rate over the one trial window (RFC 2544), the same in the JSON
            assert abs(p["received_pps"] - p["received"] / p["window_s"]) <= \
                0.02 * p["received_pps"], p
            assert p["received"] <= p["sent"] and p["received_pps"] <= p["sent_pps"], p
            assert p["located"]["loss_by_node"].get("dst", 0) == 0, p["located"]
            assert "SOCKET_RCVBUFF" not in p["located"]["loss_by_reason"], p["located"]
            assert not p["located"].get("receiver_drops"), p["located"]


def test_overloaded_htb_shaper_holds_the_loss_not_the_receiver(running_lab):
    """A 30 Mbit/s HTB shaper offered twice its rate of 64-byte frames: at least 90 % of the
    lost packets are placed on the shaper, none on the receiver (in the issue 40 % were placed
    on the socket receiver's own buffer)."""
    lab = running_lab({"nodes": {"src": {"kind": "host"},
                                 "sh": {"kind": "shaper", "rate": "30mbit",
                                        "discipline": "htb", "toward": "dst"},
                                 "dst": {"kind": "host"}},
                       "links": [{"endpoints": ["src", "sh"]}, {"endpoints": ["sh", "dst"]}]})
    m = measure.run(lab.name, RateRequest(size=64, rates=[2 * SHAPER_PPS], duration=2.0))
    p = m.extra["points"][0]
    assert not p["generator_limited"] and p["loss_ratio"] >= 0.3, p
    where = p["located"]
    at_shaper = where["loss_by_node"].get("sh", 0) + where.get("backlog_drops", 0)
    assert at_shaper >= 0.9 * p["lost"], where
    assert where["loss_by_node"].get("dst", 0) == 0, where
    assert where["receiver_drops"] == {}, where
    # what arrives is what the shaper passes (its queue's growth over the window included)
    assert abs(p["received_pps"] - SHAPER_PPS) <= 0.05 * SHAPER_PPS, p


def test_socket_receiver_drops_are_the_measurements_own(running_lab):
    """With --sink socket a drop at the receiver's socket buffer (SOCKET_RCVBUFF at dst) is
    reported as the receiver's (``receiver_drops``), never as the chain's loss."""
    lab = running_lab({"chain": {"length": 2}})
    with measure.PacketSetup(lab.name, RateRequest(size=64, rates=[300e3], duration=1.0,
                                                   sink="socket")) as setup:
        assert setup.gen is not None
        # a stopped sink cannot read: its 32 MB buffer overflows after some 40,000 probes
        pid = setup.natives[0].sink_pid  # type: ignore[attr-defined]
        wake = threading.Timer(0.9, os.kill, (pid, signal.SIGCONT))  # before the drain asks
        os.kill(pid, signal.SIGSTOP)
        wake.start()
        try:
            t = setup.gen.trial(100e3, 1.0, 64)
        finally:
            wake.cancel()
            os.kill(pid, signal.SIGCONT)
    assert t.located is not None
    own = t.located["receiver_drops"].get("dst", {})
    assert own.get("SOCKET_RCVBUFF", 0) > 0, t.located
    assert "SOCKET_RCVBUFF" not in t.located["loss_by_reason"], t.located
    assert t.located["loss_by_node"].get("dst", 0) < own["SOCKET_RCVBUFF"], t.located


@pytest.mark.parametrize("forwarder", [False, True], ids=["no-program", "forwarder"])
def test_default_receiver_counts_on_a_steered_labs_egress(running_lab, forwarder):
    """Where dst's eth0 runs the data plane's XDP program (`--sink xdp` cannot attach there),
    the default receiver counts at tcx ingress, behind it; where it runs none (the egress of a
    chain, fed by a function's proxy), in XDP.  Either way it loses nothing at low rate."""
    lab = steered_lab(running_lab, forwarder)
    assert _xdp_on(lab.netns("dst"), "eth0") == forwarder
    with measure.PacketSetup(lab.name, RateRequest(size=64, rates=[20e3],
                                                   duration=1.0)) as setup:
        assert setup.gen is not None
        t = setup.gen.trial(20e3, 1.0, 64)
    assert t.raw["receiver"]["sink"] == "kernel"
    where = t.raw["receiver"]["where"]
    if forwarder:
        assert where == [{"dev": "eth0", "mode": "tcx"}]
    else:
        assert where[0] == {"dev": "eth0", "mode": "native"}, where
    assert t.raw["receiver"]["own_drops"] == 0 and not t.raw["receiver"]["saturated"]
    assert t.sent > 15_000 and t.received >= 0.99 * t.sent, (t.sent, t.received, t.located)
    assert t.located is not None and "TC_INGRESS" not in t.located["loss_by_reason"]


@pytest.mark.skipif(not SOFTIRQ.exists(), reason="native/build/sfc-softirq is not built")
def test_steered_first_hop_runs_off_the_generators_core(running_lab):
    """f1's NAPI (it runs the data plane's XDP program) is threaded and pinned to the chain's
    core: its kernel thread does the first hop's work there, the generator's core spends
    (almost) no time in network softirqs, and all is undone afterwards."""
    layout = cores.layout()
    if not layout.separated:
        pytest.skip("one online core: nothing to separate")
    sys.path.insert(0, str(BENCH))
    from softirq_clock import SoftirqClock

    lab = steered_lab(running_lab)
    ns = lab.netns("f1")
    gro_before = _gro(ns, "eth0")
    with SoftirqClock() as clock, measure.PacketSetup(
            lab.name, RateRequest(size=64, rates=[100e3], duration=1.0)) as setup:
        assert setup.gen is not None
        first = setup.layout.placement()["first_hop"]["napi_threads"]
        assert [n["interface"] for n in first] == ["f1/eth0"], setup.layout
        (pid,) = first[0]["kthreads"]
        assert set(os.sched_getaffinity(pid)) == set(layout.chain)
        assert _sysfs(ns, "eth0", "threaded") == "1"
        cpu0 = process_cpu_seconds(pid) or 0.0
        a = clock.read()
        t = setup.gen.trial(100e3, 1.0, 64)
        b = clock.read()
        worked = (process_cpu_seconds(pid) or 0.0) - cpu0
    assert t.raw["placement"]["first_hop"]["napi_threads"] == first
    assert t.received > 0.5 * t.sent, (t.sent, t.received)
    assert worked > 0.05, worked  # the first hop's poll ran in the pinned thread
    gen_ns = sum(b[c] - a[c] for c in layout.generator)
    chain_ns = sum(b[c] - a[c] for c in layout.chain)
    assert gen_ns <= 0.05 * chain_ns, (a, b)
    assert _sysfs(ns, "eth0", "threaded") == "0"
    assert _gro(ns, "eth0") == gro_before
    assert "f1/eth0: threaded NAPI off" in setup.layout.restored


def test_first_hop_restored_when_the_measurement_fails(running_lab):
    """An exception inside the measurement (as Ctrl-C would raise) still restores the first
    hop: GRO turned on for threaded NAPI goes off again, threaded NAPI too."""
    lab = running_lab({"chain": {"length": 3}})
    if not cores.layout().separated:
        pytest.skip("one online core: nothing is pinned")
    ns = lab.netns("r1")
    assert _gro(ns, "eth0") == "off" and _sysfs(ns, "eth0", "threaded") == "0"
    setup = measure.PacketSetup(lab.name, RateRequest(size=64, rates=[1e3], duration=0.2))
    with pytest.raises(KeyboardInterrupt):
        with setup:
            assert _sysfs(ns, "eth0", "threaded") == "1" and _gro(ns, "eth0") == "on"
            raise KeyboardInterrupt
    assert _gro(ns, "eth0") == "off" and _sysfs(ns, "eth0", "threaded") == "0"
    assert setup.layout.restored == ["r1/eth0: threaded NAPI off", "r1/eth0: GRO off"]


KINDS = {
    "routed": {"chain": {"length": 3}},
    "bridged": {"nodes": {"src": {"kind": "host"}, "sw": {"kind": "linux-bridge"},
                          "dst": {"kind": "host"}},
                "links": [{"endpoints": ["src", "sw"]}, {"endpoints": ["sw", "dst"]}]},
    "ovs": {"nodes": {"src": {"kind": "host"}, "br": {"kind": "ovs-bridge"},
                      "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "br"]}, {"endpoints": ["br", "dst"]}]},
    "hosts-vxlan": {"hosts": {"h1": {}, "h2": {}},
                    "underlay": {"subnet": "198.19.254.0/24", "mtu": 1500},
                    "nodes": {"src": {"kind": "host", "host": "h1"},
                              "dst": {"kind": "host", "host": "h2"}},
                    "links": [{"endpoints": ["src", "dst"], "attach": "bridge"}]},
    # the tunnel end hands frames into dst by bpf_redirect_peer, past its veth's XDP
    "hosts-shortbridge": {"hosts": {"h1": {}, "h2": {}},
                          "underlay": {"subnet": "198.19.254.0/24", "mtu": 1500},
                          "nodes": {"src": {"kind": "host", "host": "h1"},
                                    "dst": {"kind": "host", "host": "h2"}},
                          "links": [{"endpoints": ["src", "dst"], "attach": "shortbridge"}]},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_default_receiver_counts_in_every_lab_kind(running_lab, kind):
    """The in-kernel receiver attaches to the receiving node's interfaces whatever the lab
    kind, counts every probe of a gentle trial, and leaves nothing attached."""
    lab = running_lab(KINDS[kind])
    with measure.PacketSetup(lab.name, RateRequest(size=64, rates=[5e3],
                                                   duration=1.0)) as setup:
        assert setup.gen is not None
        t = setup.gen.trial(5e3, 1.0, 64)
    where = t.raw["receiver"]["where"]
    assert where and all(w["mode"] in ("native", "generic", "tcx") for w in where), where
    assert t.sent > 4_000 and t.received == t.sent, (kind, t.sent, t.received, t.located)
    assert not _xdp_on(lab.netns("dst"), where[0]["dev"])
