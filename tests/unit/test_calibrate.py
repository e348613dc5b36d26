"""Calibration's pure parts: sizes from the command line, their bounds, the ceiling for a frame
size, the stored file (host and kernel must match), and the experiments' size choice."""

from __future__ import annotations

import pytest

from sfclab.errors import SpecError
from sfclab.experiments import live
from sfclab.traffic import calibrate
from sfclab.traffic.environment import environment

CAL = {"sizes": {"64": {"ceiling_pps": 1_000_000.0}, "1518": {"ceiling_pps": 100_000.0}}}


def test_sizes_parse_sorted_and_distinct():
    assert calibrate.parse_sizes("1518, 64,64") == [64, 1518]
    assert calibrate.parse_sizes(None) == [64, 512, 1518]


@pytest.mark.parametrize("text", ["", "64,x", "-64", ",".join(["64"] * 17)])
def test_bad_sizes_name_the_option(text):
    with pytest.raises(SpecError) as e:
        calibrate.parse_sizes(text)
    assert e.value.place == "--sizes"


@pytest.mark.parametrize("sizes", [[63], [64, 1519], [9000]])
def test_sizes_outside_64_to_mtu_plus_18_are_refused(sizes):
    with pytest.raises(SpecError, match="from 64 to 1518 bytes") as e:
        calibrate.check_sizes(sizes, 1500, "the direct link's")
    assert e.value.place == "--sizes"
    calibrate.check_sizes([64, 1518], 1500, "the direct link's")  # the bounds themselves pass


def test_ceiling_is_calibrated_or_interpolated_never_extrapolated():
    assert calibrate.ceiling_for(CAL, 64) == 1_000_000
    assert calibrate.ceiling_for(CAL, 791) == pytest.approx(550_000)
    assert calibrate.ceiling_for(CAL, 9000) is None
    assert calibrate.ceiling_for(CAL, "imix") is None
    assert calibrate.ceiling_for(None, 64) is None


def test_stored_only_for_this_host_and_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    assert calibrate.stored() is None
    env = environment()
    cal = {**CAL, "version": 1, "host": env["hostname"], "kernel": env["kernel"]["release"]}
    path = calibrate.save(cal)
    assert path == tmp_path / "calibration.json"
    assert calibrate.stored() == cal
    calibrate.save({**cal, "kernel": "other"})
    assert calibrate.stored() is None


def test_experiments_calibrate_their_packet_sizes(monkeypatch):
    asked = []
    monkeypatch.setattr(calibrate, "calibrate", lambda req: asked.append(req.sizes) or CAL)
    assert live.calibration([{"type": "iperf"}]) is None and asked == []
    assert live.calibration([{"type": "rate", "size": 1518}, {"type": "ndr"},
                             {"type": "latency", "size": "imix"},
                             {"type": "rate", "size": 9000}]) == CAL
    assert asked == [[64, 1518]]
