"""``shaper``: iperf3 through the node stays within ±10 % of the configured rate."""

import json
import time

import pytest

from tests.integration.chains import chain


def _iperf(lab, seconds=3):
    """TCP's rate through the lab over ``seconds`` after the first (omitted: slow start)."""
    srv = lab.popen("dst", ["iperf3", "-s", "-1", "-p", "5201"])
    deadline = time.monotonic() + 10
    while not lab.exec("dst", ["ss", "-Hltn", "sport = :5201"]).stdout.strip():
        assert srv.poll() is None and time.monotonic() < deadline, "iperf3 -s did not listen"
        time.sleep(0.02)
    out = lab.exec("src", ["iperf3", "-c", str(lab.address("dst")), "-p", "5201", "-t",
                           str(seconds), "-O", "1", "-J"], timeout=seconds + 30).stdout
    srv.communicate(timeout=10)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"]


@pytest.mark.parametrize("discipline,rate,bps", [
    ("htb", "50mbit", 50e6), ("htb", "500mbit", 500e6), ("tbf", "50mbit", 50e6),
    ("tbf", "500mbit", 500e6)])
@pytest.mark.serial  # times or counts what the machine's load changes
def test_shaper_holds_rate(tmp_path, discipline, rate, bps):
    with chain("shaper", {"rate": rate, "discipline": discipline, "toward": "dst"},
               tmp_path) as lab:
        got = _iperf(lab)
        info = lab.inspect()["nodes"]["fn"]
        assert info["interfaces"]["eth1"]["kind"] == discipline
        assert abs(got - bps) <= 0.10 * bps, f"{got / 1e6:.1f} Mbit/s for {rate}"


def test_overhead_only_does_not_limit(tmp_path):
    with chain("shaper", {"overhead_only": True}, tmp_path) as lab:
        got = _iperf(lab)
        info = lab.inspect()["nodes"]["fn"]
        assert set(info["interfaces"]) == {"eth0", "eth1"}
        assert info["rate_bps"] == 10**12
        assert got > 1e9
