"""Trustworthy packet rates: the generator apart from the chain, loss located, several pairs,
and nothing left attached afterwards (issue: trustworthy packet-rate measurement)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from sfclab.cli import main
from sfclab.spec.measurement import NdrRequest, RateRequest
from sfclab.traffic import measure

#: 20 Mbit/s of 64-byte frames (60 bytes at the qdisc, no FCS)
SHAPER_PPS = 20e6 / 8 / 60


@pytest.fixture
def shaped(running_lab):
    """src - sh (a 20 Mbit/s TBF toward dst) - dst"""
    return running_lab({"nodes": {"src": {"kind": "host"},
                                  "sh": {"kind": "shaper", "rate": "20mbit",
                                         "discipline": "tbf", "toward": "dst"},
                                  "dst": {"kind": "host"}},
                        "links": [{"endpoints": ["src", "sh"]}, {"endpoints": ["sh", "dst"]}]})


def _programs() -> str:
    return subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True).stdout


@pytest.mark.serial  # times or counts what the machine's load changes
def test_ndr_through_a_20mbit_tbf_is_the_shapers_rate(shaped):
    """Trials of 3 s: the shaper's 128 KB burst and 50 ms queue pass about 6,000 packets over
    its rate in any trial, which 3 s spread to a few percent.  The search stops within 5 % of
    the NDR (not the default 1 %): well inside the 15 % the check allows, in 9 trials instead
    of 25 (24 s instead of 74 s on a loaded 2-core machine).  It starts at 1.25 times the
    shaper's rate, above the 1.15 the check allows (a search that ends there is a bound and
    fails): 8 trials, 21 s, where twice the rate took 12 trials, 28 s (the machine alone)."""
    m = measure.run(shaped.name, NdrRequest(size=64, duration=3.0, max_rate=1.25 * SHAPER_PPS,
                                            precision=5.0))
    ndr = m.extra["ndr_pps"]
    assert ndr is not None, m.extra  # a rate, not a lower bound: the sender was not the limit
    assert 0.85 * SHAPER_PPS <= ndr <= 1.15 * SHAPER_PPS
    cores = m.params["cores"]
    assert cores["separated"] and set(cores["generator"]).isdisjoint(cores["chain"])
    assert cores["steered"] == ["sh/eth0"]


@pytest.mark.serial  # times or counts what the machine's load changes
def test_twice_the_shapers_rate_loses_on_the_shaper(shaped):
    """Offered twice what the shaper passes, the sender really sends it, at least 40 % is lost,
    and the locator puts at least 90 % of the lost packets on the shaper."""
    passes = measure.run(shaped.name, RateRequest(size=64, rates=[SHAPER_PPS * 1.5],
                                                  duration=1.0, sink="xdp"))
    rate = passes.extra["points"][0]["received_pps"]
    m = measure.run(shaped.name, RateRequest(size=64, rates=[2 * rate], duration=2.0,
                                             sink="xdp"))
    p = m.extra["points"][0]
    assert not p["generator_limited"] and p["sent_pps"] >= 0.97 * 2 * rate
    assert p["loss_ratio"] >= 0.4
    where = p["located"]
    # the shaper's qdisc drops most; under load part of the overload is dropped a step earlier,
    # in the backlog of the shaper's steered ingress (CPU_BACKLOG, booked to the sender's queue)
    at_shaper = where["loss_by_node"].get("sh", 0) + where.get("backlog_drops", 0)
    assert where["loss_by_node"].get("sh", 0) >= 0.5 * p["lost"], where
    assert at_shaper >= 0.9 * p["lost"], where
    assert where["unaccounted"] <= 0.1 * p["lost"], where
    assert set(where["loss_by_reason"]) <= {"CPU_BACKLOG", "QDISC_DROP", "NO_SOCKET",
                                            "NOT_SPECIFIED", "SOCKET_RCVBUFF"}


@pytest.mark.serial  # times or counts what the machine's load changes
def test_ndr_of_chain5_is_a_rate(running_lab):
    """The search ends on a rate, not on the generator's limit.  It stops within 10 % of the
    NDR (not the default 1 %): the check asks for more than 10 kpps of a chain that passes
    about 70 kpps even on a loaded machine; 10 trials instead of 16 (22 s instead of 39 s)."""
    lab = running_lab({"chain": {"length": 5}})
    m = measure.run(lab.name, NdrRequest(size=64, duration=1.0, method="binary",
                                         precision=10.0))
    assert m.extra["ndr_pps"] is not None and m.extra["ndr_pps"] > 10_000, m.extra
    assert not m.extra["generator_limited"]


@pytest.mark.serial  # times or counts what the machine's load changes
def test_two_pairs_reported_apart_and_summed(running_lab, capsys):
    lab = running_lab({"nodes": {"a1": {"kind": "host"}, "a2": {"kind": "host"},
                                 "r": {"kind": "router"}, "b1": {"kind": "host"},
                                 "b2": {"kind": "host"}},
                       "links": [{"endpoints": ["a1", "r"]}, {"endpoints": ["a2", "r"]},
                                 {"endpoints": ["r", "b1"]}, {"endpoints": ["r", "b2"]}]})
    assert main(["traffic", "rate", lab.name, "--pair", "a1:b1", "--pair", "a2:b2",
                 "--rates", "5k,10k", "--duration", "0.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for p in d["points"]:
        pairs = p["pairs"]
        assert [x["pair"] for x in pairs] == ["a1:b1", "a2:b2"]
        assert p["sent"] == sum(x["sent"] for x in pairs)
        assert p["received"] == sum(x["received"] for x in pairs)
        assert all(x["offered_pps"] == p["offered_pps"] for x in pairs)
        assert all(x["received"] > 0 for x in pairs)
    assert [x["to"] for x in d["params"]["pairs"]] == ["b1", "b2"]


def test_bad_pairs_exit_2_and_start_nothing(running_lab, capsys):
    lab = running_lab({"chain": {"length": 3}})
    for pairs, words in ((["src:nope"], "no node 'nope'"), (["src:src"], "two different"),
                         (["src:dst", "src:dst"], "each pair once"), (["src"], "FROM:TO")):
        argv = ["traffic", "rate", lab.name, "--rates", "1k", "--duration", "0.2"]
        for p in pairs:
            argv += ["--pair", p]
        status = main(argv)
        err = capsys.readouterr().err
        assert status == 2, err
        assert words in err, err
    assert main(["traffic", "rate", lab.name, "--rates", "1k", "--threads", "64"]) == 2
    assert "sending threads" in capsys.readouterr().err


@pytest.mark.serial  # counts the machine's drop counters: other workers' measurements add theirs
def test_the_loss_locator_leaves_nothing_attached(shaped):
    before = _programs().count("count_drop")
    measure.run(shaped.name, RateRequest(size=64, rates=[10_000], duration=0.5))
    for _ in range(50):  # program memory is freed after an RCU grace period
        if _programs().count("count_drop") == before:
            break
        time.sleep(0.1)
    assert _programs().count("count_drop") == before == 0
