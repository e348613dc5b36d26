"""Units people read: prefixes by magnitude, quantities from metric names, flagged intervals."""

from __future__ import annotations

import math

from sfclab.experiments.plots import loss_onset
from sfclab.experiments.report import ordered_metrics, too_wide
from sfclab.experiments.stats import summarize
from sfclab.experiments.units import (MAX_VALUE_WORDS, axis_label, point_words, scale,
                                     value_words)


def test_bit_rates_take_the_prefix_of_their_largest_value() -> None:
    sc = scale("throughput_bps", [1.631e10, 9.4e9])
    assert sc.unit == "Gbit/s"
    assert sc.format(1.631e10) == "16.31 Gbit/s"
    assert scale("throughput_bps", [2.5e8]).unit == "Mbit/s"
    assert axis_label("throughput_bps", sc) == "throughput (Gbit/s)"


def test_packet_rates_times_and_ratios() -> None:
    assert scale("received_pps", [2.1e6]).format(2.1e6) == "2.1 Mpps"
    assert scale("ndr_pps", [42_759]).format(42_759) == "42.76 kpps"
    assert scale("latency_p99_us", [350.0]).format(350.0) == "350 µs"
    assert scale("latency_p99_us", [3500.0]).format(3500.0) == "3.5 ms"
    assert scale("jitter_ms", [0.02]).format(0.02) == "20 µs"
    assert scale("loss_ratio", [0.0123]).format(0.0123) == "1.23 %"
    assert scale("cpu.all.softirq", [41.0]).format(41.0) == "41 %"
    assert scale("retransmits", [12.0]).format(12.0) == "12"
    assert scale("throughput_bps", [math.nan]).format(math.nan) == "–"


def test_the_measured_quantity_comes_first_and_cpu_apart() -> None:
    names = sorted(["cpu.all.busy", "cpu.cores.cpu0.busy", "jain_fairness", "retransmits",
                    "throughput_bps", "flow_min_bps"])
    shown, cpu = ordered_metrics(names)
    assert shown[0] == "throughput_bps"
    assert "cpu.all.busy" not in shown and cpu == ["cpu.all.busy"]
    assert "cpu.cores.cpu0.busy" not in shown + cpu


def test_an_interval_wider_than_half_the_mean_is_flagged() -> None:
    assert too_wide(summarize([1.0, 10.0]))          # n = 2, far apart
    assert not too_wide(summarize([10.0, 10.1, 9.9]))
    assert not too_wide(summarize([10.0]))           # no interval at all: nothing to flag


def test_loss_onset_is_the_first_offered_rate_that_loses() -> None:
    pts = [(100.0, 100.0), (200.0, 200.0), (300.0, 250.0), (400.0, 250.0)]
    assert loss_onset(pts) == 300.0
    assert loss_onset([(100.0, 100.0)]) is None


def test_words_of_metrics_environments_and_options() -> None:
    from sfclab.experiments.units import env_value, env_words, metric_words, option_words, reading
    assert metric_words("latency_p99_9_us") == "latency p99.9"
    assert metric_words("ndr10pct_latency_p50_us") == "latency p50 at 10 % of the NDR"
    assert metric_words("cpu.cores.cpu1.busy") == "CPU busy (core 1)"
    assert reading("cpu.process_cpu_s.client0", 0.84) == "CPU time of client0 840 ms"
    assert metric_words("flow_max_bps") == "fastest flow"
    assert (env_words("load"), env_value("load", [12.94, 13.52, 11.5])) == (
        "load average (1, 5, 15 min)", "12.9, 13.5, 11.5")
    assert env_words("versions.iperf3") == "iperf3 version"
    assert env_value("memory_bytes", 8 * 2 ** 30) == "8.0 GiB"
    assert option_words("duration", 2.0) == "duration 2 s"
    assert option_words("rates", ["50k", "max"]) == "offered rates 50k, max pps"
    assert option_words("zerocopy", False) == "zerocopy no"
    assert option_words("pairs", []) is None


def test_a_swept_node_table_is_written_short_and_bounded() -> None:
    fw = {"kind": "firewall", "backend": "iptables", "generate": {"count": 25,
                                                                   "type": "stateful"}}
    words = point_words({"lab.nodes": {"r1": fw, "r2": fw}, "measure.flows": 4})
    assert words == ("nodes {r1, r2: {kind: firewall, backend: iptables, generate: "
                     "{count: 25, type: stateful}}}, flows 4")
    assert "'" not in words
    many = {f"r{i}": {"kind": "firewall", "rules": [f"rule {i}"]} for i in range(50)}
    long = value_words(many)
    assert len(long) == MAX_VALUE_WORDS and long.endswith("…")
    assert value_words([1, "a"]) == "[1, a]" and value_words(True) == "True"
