"""People's words and units wherever a person reads a label: every title, axis label, heading
and parameter column the report, the plots and the web view's plot data can make, from a real
store filled by the real runner (tests/webresults.py), must be free of raw field names
(``throughput_bps``, ``chain.length``); JSON keys and CSV columns keep them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sfclab.experiments import plots
from sfclab.experiments.report import Heading, Table, experiment_blocks
from sfclab.experiments.store import Store
from sfclab.experiments.units import axis_label, metric_words, param_words, scale, title
from sfclab.web import results
from tests.webresults import make_results_db

#: a field name: snake_case with a unit suffix or a dotted parameter path
FIELD = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b[a-z][a-z0-9]*(?:\.[a-z_]+)+\b")


def raw_names(labels: list[str]) -> list[str]:
    return [t for t in labels if t and FIELD.search(t.replace("`", ""))]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_results_db(tmp_path_factory.mktemp("words") / "r.db")


def figure_labels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every title and axis label of every figure saved from now on."""
    seen: list[str] = []
    real = plots.save

    def save(fig: Any, stem: Any) -> list[Path]:
        for ax in fig.axes:
            seen.extend([ax.get_title(), ax.get_xlabel(), ax.get_ylabel()])
        return real(fig, stem)
    monkeypatch.setattr(plots, "save", save)
    return seen


def test_report_and_figures_say_what_people_read(db: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    seen = figure_labels(monkeypatch)
    headings: list[str] = []
    with Store(db, readonly=True) as st:
        for e in st.experiments():
            for b in experiment_blocks(st, e, tmp_path):
                if isinstance(b, Heading) and b.level > 2:  # level 2 names the experiment
                    headings.append(b.text)
                elif isinstance(b, Table):
                    headings.append(b.header[0])  # the parameter (or metric) column
                    if b.header[0] in ("", "metric", "swept parameter"):
                        headings += [r[0] for r in b.rows if b.header[0] != ""]
    assert len(seen) >= 3 * 6, seen  # series, relative, fits, offered vs received
    assert "throughput (Gbit/s)" in seen and "chain length" in seen
    assert "received rate (kpps)" in seen and "offered rate (kpps)" in seen
    assert raw_names(seen) == [] and raw_names(headings) == []
    assert "throughput against chain length" in headings


def test_the_web_views_plot_labels_come_from_the_units_module(db: Path) -> None:
    labels: list[str] = []
    with Store(db, readonly=True) as st:
        for e in st.experiments():
            p = results.plots(st, e)
            labels += [p["x_label"]] + [m[k] for m in p["metrics"] for k in ("title", "y_label")]
            labels += [p.get(k) for k in ("curves_title", "curves_x_label", "curves_y_label")
                       if p.get(k)]
            for b in results.tables(st, e):
                labels += [b["text"]] if "heading" in b and b["heading"] > 2 else []
                labels += [b["header"][0]] if "header" in b and b["header"][0] else []
    assert "throughput (Gbit/s)" in labels and "chain length" in labels
    assert "received rate (kpps)" in labels
    assert raw_names(labels) == []


@pytest.mark.parametrize("metric,values,label", [
    ("throughput_bps", [12.3e9], "throughput (Gbit/s)"),
    ("received_pps", [1.5e6], "received rate (Mpps)"),
    ("latency_p99_us", [42.0], "latency p99 (µs)"),
    ("latency_us_p99", [1500.0], "latency p99 (ms)"),
    ("udp_loss_ratio", [0.01], "UDP loss (%)"),
    ("retransmits", [3.0], "retransmits"),
])
def test_axis_labels_in_peoples_units(metric: str, values: list[float], label: str) -> None:
    assert axis_label(metric, scale(metric, values)) == label


def test_words_for_parameters_and_titles() -> None:
    assert param_words("lab.chain.length") == "chain length"
    assert param_words("measure.flows") == "flows"
    assert param_words("lab.nodes.fw.rules") == "fw rules"
    assert metric_words("cpu.softirq") == "CPU softirq"
    assert title("throughput_bps", "lab.chain.length", of="e") == \
        "e: throughput against chain length"


def test_the_terminal_shows_runs_in_words_and_units(db: Path) -> None:
    from sfclab.experiments.commands import results_show

    listing = results_show(db, "chains")
    one = results_show(db, run=1)
    assert "throughput_bps" not in listing + one and "retransmits" in listing
    assert "Gbit/s" in listing and "  throughput " in one and " Gbit/s" in one
