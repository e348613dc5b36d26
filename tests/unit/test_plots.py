"""Plots are valid images: PNG by signature and header, SVG parsed as XML."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest

from sfclab.experiments.fit import analyze_chain
from sfclab.experiments.plots import (plot_fit, plot_offered_received, plot_relative,
                                      plot_series)
from sfclab.experiments.stats import series

PNG = b"\x89PNG\r\n\x1a\n"


def check_images(paths, tmp_path):
    assert sorted(p.suffix for p in paths) == [".png", ".svg"]
    for p in paths:
        assert p.parent == tmp_path and p.stat().st_size > 1000
        if p.suffix == ".png":
            data = p.read_bytes()
            assert data.startswith(PNG)
            assert data[12:16] == b"IHDR"
            width, height = struct.unpack(">II", data[16:24])
            assert width > 100 and height > 100
        else:
            root = ET.parse(p).getroot()
            assert root.tag == "{http://www.w3.org/2000/svg}svg"


def runs(xs):
    return [SimpleNamespace(params={"x": x, "measure.flows": f},
                            metrics={"bps": 10.0 * f / (i + 1) + rep}, status="done")
            for i, x in enumerate(xs) for f in (1, 4) for rep in range(3)]


def test_metric_against_parameter(tmp_path):
    ss = series(runs([2, 3, 5]), "bps", "x")
    check_images(plot_series(ss, tmp_path / "m", title="t", logy=True), tmp_path)


def test_categorical_parameter(tmp_path):
    ss = series(runs(["veth", "ovs"]), "bps", "x")
    check_images(plot_series(ss, tmp_path / "c"), tmp_path)
    assert "veth" in (tmp_path / "c.svg").read_text()


def test_relative(tmp_path):
    ss = series(runs([2, 3, 5]), "bps", "x")
    check_images(plot_relative(ss, tmp_path / "r"), tmp_path)


def test_offered_received(tmp_path):
    curves = {"n=2": [(1e5, 1e5), (2e5, 1.9e5), (3e5, 2.1e5)], "n=5": [(1e5, 0.9e5)]}
    check_images(plot_offered_received(curves, tmp_path / "o"), tmp_path)


def test_measurement_limited_points_are_marked(tmp_path):
    import json

    from sfclab.experiments.report import _curve_points

    raw = json.dumps([{"offered_pps": 1e5, "received_pps": 1e5, "measurement_limited": False},
                      {"offered_pps": 3e5, "received_pps": 2e5,
                       "measurement_limited": "receiver dropped 10 frames itself"}])
    assert _curve_points(raw, limited=True) == [(3e5, 2e5)]
    curves = {"n=2": _curve_points(raw)}
    plain = plot_offered_received(curves, tmp_path / "a")
    marked = plot_offered_received(curves, tmp_path / "b", limited=[(3e5, 2e5)])
    check_images(marked, tmp_path)
    svg = {p.stem: p.read_text() for p in plain + marked if p.suffix == ".svg"}
    assert "measurement-limited" in svg["b"] and "measurement-limited" not in svg["a"]


def test_fit(tmp_path):
    ns = np.repeat([2, 3, 4, 5, 8], 3)
    ts = 155 * 0.89 ** (np.minimum(ns, 5) - 2)
    a = analyze_chain(ns, ts)
    assert a.breaks_at == 8
    check_images(plot_fit(ns, ts, a, tmp_path / "f"), tmp_path)


def test_nothing_to_plot(tmp_path):
    with pytest.raises(ValueError):
        plot_series([], tmp_path / "e")
    with pytest.raises(ValueError):
        plot_offered_received({}, tmp_path / "e")
    assert list(tmp_path.iterdir()) == []


def test_no_display_backend_is_needed(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("MPLBACKEND", "TkAgg")  # would fail if pyplot picked it up
    ss = series(runs([1, 2]), "bps", "x")
    check_images(plot_series(ss, tmp_path / "h"), tmp_path)
