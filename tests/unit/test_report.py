"""The report (Markdown and self-contained HTML) and the results commands, from a store filled
by the runner with fake labs and measurements."""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import re
import textwrap
from html.parser import HTMLParser

import numpy as np
import pytest

from sfclab.errors import SpecError
from sfclab.experiments.commands import (results_export, results_ls, results_show,
                                         run_experiment, write_report)
from sfclab.experiments.runner import NullProgress

EXP = """\
name: chains
description: throughput against chain length
lab: {name: ch, chain: {length: 2}}
measure: {type: iperf, flows: 1, duration: 1}
sweep:
  chain.length: [2, 3, 4, 5, 8, 12]
  measure.flows: [1, 4]
repetitions: 3
"""

RATE = """\
name: curve
lab: {name: rc, chain: {length: 2}}
measure: {type: rate, rates: [100k, 200k, 400k]}
sweep:
  chain.length: [2, 4]
"""


@contextlib.contextmanager
def lab_up(lab):
    yield lab


def make_measure(seed=0):
    rng = np.random.default_rng(seed)

    def measure(lab, m):
        n = lab["chain"]["length"]
        if m["type"] == "rate":
            curve = [{"offered_pps": r, "received_pps": min(r, 300e3 / (n - 1))}
                     for r in m["rates"]]
            return {"type": "rate", "params": m, "metrics": {"max_received_pps":
                    max(c["received_pps"] for c in curve)}, "points": curve}
        if n == 12 and m["flows"] == 4:
            raise RuntimeError("iperf3 server never answered")
        # 11 % per hop up to n = 5, 2 % per hop after
        t = 10e9 * m["flows"] * 0.89 ** (min(n, 5) - 2) * 0.98 ** max(n - 5, 0)
        return {"type": "iperf", "params": m,
                "metrics": {"throughput_bps": t * rng.lognormal(0, 0.01), "retransmits": 2.0},
                "cpu": {"total": 50.0}, "environment": {"iperf3": "3.12"}}

    return measure


@pytest.fixture
def db(tmp_path):
    db = tmp_path / "r.db"
    for name, text in (("chains.yaml", EXP), ("rate.yaml", RATE)):
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        run_experiment(p, db, lab_up, make_measure(), NullProgress(), sleep=lambda s: None,
                       environment=lambda: {"kernel": "6.18-test", "cores": 2,
                                            "versions": {"iperf3": "3.12"}})
    return db


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.imgs: list[str] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text += data


def test_report_markdown_and_html(db, tmp_path):
    out = tmp_path / "rep"
    md_path = write_report(db, out)
    assert md_path == out / "report.md"
    md = md_path.read_text()
    assert "## Experiment `chains` (id 1)" in md and "## Experiment `curve` (id 2)" in md
    assert "throughput against chain length" in md
    assert "6.18-test" in md  # the environment
    assert "33 done, 3 failed" in md
    assert "iperf3 server never answered" in md  # failed runs listed
    # per-series table with mean ± CI and n
    assert re.search(r"\| 2 \| [0-9.e+]+ ± [0-9.e+]+ \(n=3\) \|", md)
    # the fit: per-hop loss of the short chains and where the law stops
    fit_rows = [ln for ln in md.splitlines() if ln.startswith("| flows ")
                and "%" in ln]
    assert len(fit_rows) == 2
    for row in fit_rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[5] == "5" and cells[6] == "flattens from n = 8"
    there = [float(v) for v in re.findall(r"holds up to n = 5 \(l = ([0-9.]+) % there\)", md)]
    assert len(there) == 2 and all(abs(v - 11.0) < 1.0 for v in there)
    # every linked image exists
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert any("fit" in ln for ln in links) and any("offered-received" in ln for ln in links)
    for ln in links:
        assert (out / ln).read_bytes().startswith(b"\x89PNG")
        assert (out / ln).with_suffix(".svg").exists()

    html = (out / "report.html").read_text()
    c = Collect()
    c.feed(html)
    assert "table" in c.tags and "h2" in c.tags
    assert len(c.imgs) == len(links)
    for src in c.imgs:  # self-contained: images are data URIs
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG")
    assert "<code>chains</code>" in html and "6.18-test" in c.text


def test_report_of_one_run_without_sweep(tmp_path):
    p = tmp_path / "one.yaml"
    p.write_text("name: one\nlab: {name: o, chain: {length: 3}}\nmeasure: {type: iperf}\n"
                 "repetitions: 2\n")
    run_experiment(p, tmp_path / "o.db", lab_up, make_measure(), NullProgress(),
                   sleep=lambda s: None, environment=None)
    md = write_report(tmp_path / "o.db", tmp_path / "out").read_text()
    assert "| throughput |" in md and "| 2 |" in md


def test_results_commands(db):
    ls = results_ls(db)
    lines = ls.splitlines()
    assert lines[0].split()[:6] == ["id", "name", "created", "done", "failed", "pending"]
    assert lines[1].split()[1] == "chains" and lines[1].split()[4:7] == ["33", "3", "0"]

    show = results_show(db, "chains")
    assert show.startswith("experiment chains (id 1)")
    assert show.count("\n") == 1 + 1 + 36  # head, table header, one line per run
    assert "iperf3 server never answered" in show

    data = json.loads(results_export(db, "json", "chains"))
    assert len(data) == 36
    done = [d for d in data if d["status"] == "done"]
    assert {"params", "metrics", "status"} <= set(data[0])
    assert all("throughput_bps" in d["metrics"] for d in done)
    rows = list(csv.DictReader(io.StringIO(results_export(db, "csv"))))
    assert len(rows) == 36 + 2 and "lab.chain.length" in rows[0]

    one = results_show(db, run=data[0]["id"])
    assert f"run {data[0]['id']} of experiment chains" in one


def test_results_on_a_missing_database(tmp_path):
    with pytest.raises(SpecError):
        results_ls(tmp_path / "nope.db")
    with pytest.raises(SpecError):
        results_show(tmp_path / "nope.db")


#: field names that belong in JSON keys and CSV columns only
FIELD_NAMES = re.compile(r"_bps|_pps|_us\b|_ratio|measure\.|lab\.chain|chain\.length|"
                         r"\b[a-z_.]{2,}=\S|kernel\.release|versions\.|memory_bytes|cpu_model")


def test_no_field_name_where_a_person_reads(db, tmp_path):
    """The report, 'results show' and a run shown in full speak in words: ``flows 4``,
    ``chain length``, ``throughput (Gbit/s)``, ``iperf3 version``; field names stay in JSON
    and CSV.  (The report's code spans name files and experiments, not fields.)"""
    md = write_report(db, tmp_path / "rep").read_text()
    prose = re.sub(r"`[^`]*`", "", md)
    prose = re.sub(r"!\[[^]]*\]\([^)]*\)", "", prose)  # image links name plot files
    assert not FIELD_NAMES.findall(prose), FIELD_NAMES.findall(prose)[:10]
    assert "| flows 1 |" in md and "| iperf3 version | 3.12 |" in md
    assert "Measurement: iperf3 throughput (affinity auto, duration 1 s, flows (swept)," in md
    show = results_show(db, "chains")
    assert not FIELD_NAMES.findall(show) and "chain length 2, flows 1" in show
    data = json.loads(results_export(db, "json", "chains"))
    one = results_show(db, run=data[0]["id"])
    body = one.split("\n--- raw:")[0]  # the raw outputs are the tools' own
    assert not FIELD_NAMES.findall(body), FIELD_NAMES.findall(body)
    assert "parameters: chain length" in body and "\nmeasurement: iperf3 throughput (" in body
    assert "  throughput " in body and " Gbit/s" in body
