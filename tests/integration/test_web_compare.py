"""The results view's comparison in a real browser (Debian's chromium, headless, Playwright),
against ``sfclab serve`` run as a command, on a results database made by two real short
``sfclab run`` invocations of one experiment file (iperf3 through real chain labs), the file
changed in between (1 flow, then 2: two experiments of one name, before and after a change).

Picking both in the page must draw their throughput curves overlaid against the chain length
(its ticks the swept lengths), the ratio of the second to the first with its 95 % interval (no
bar of a rate or of the ratio below 0), the environment keys that differ as the server computed
them, in words (``load average (1, 5, 15 min)``), and each side's lab, linked to the lab view
while that lab is up; the results view of one experiment links its lab too.  A reproduced
study's experiment is drawn with the published figures of its findings beside our ratios."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.integration.test_web_browser import browser, new_page  # noqa: F401
from tests.integration.weblab import Served, serving
from tests.webresults import make_reproduction_db

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """\
name: cmp
lab: {{name: {lab}, chain: {{length: 2}}}}
measure: {{type: iperf, flows: {flows}, duration: 1}}
sweep:
  lab.chain.length: [2, 3]
repetitions: 2
"""


def sfclab_run(f: Path, db: Path) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-m", "sfclab.cli", "run", str(f), "--db", str(db),
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def compare_first_two(page: Page, served: Served, db: Path, drawn: str) -> dict[str, Any]:
    """Open the results view of ``db``, tick experiments 1 and 2 and compare them; wait until
    ``drawn`` (a selector in the comparison) is drawn; the comparison the page received."""
    page.goto(served.page(f"?db={db.name}#/results"))
    page.wait_for_function("() => document.body.dataset.ready === 'results'", timeout=60000)
    page.click("#compare summary")
    page.check("#compare-pick input[value='1']")
    page.check("#compare-pick input[value='2']")
    page.click("#compare-go")
    page.wait_for_function("sel => sfclab.compare && (sfclab.compare.error || "
                           "document.querySelector(sel))", arg=f"#compare-out {drawn}",
                           timeout=30000)
    c: dict[str, Any] = page.evaluate("sfclab.compare")
    assert "error" not in c, c
    return c


def test_two_runs_compared_side_by_side(browser: Browser,  # noqa: F811
                                        running_lab: Any, lab_name: str,
                                        tmp_path: Path) -> None:
    db = tmp_path / "cmp.db"
    f = tmp_path / "cmp.yaml"
    for flows in (1, 2):  # before and after a change of the file
        f.write_text(EXPERIMENT.format(lab=lab_name, flows=flows))
        s = sfclab_run(f, db)
        assert s["done"] == s["total"] == 4
    running_lab({"name": lab_name, "chain": {"length": 2}})  # the lab they ran on, up again
    with serving(db) as served:
        page = new_page(browser)
        c = compare_first_two(page, served, db, ".ratio .main-svg")
        assert [s["label"] for s in c["sides"]] == ["cmp (id 1)", "cmp (id 2)"]

        # the curves overlaid: one per side, against the chain length, with intervals
        plots = page.evaluate("""() => [...document.querySelectorAll('#compare-out .plot')]
            .map(d => ({title: d.dataset.title, x: d.layout.xaxis.title.text,
                        y: d.layout.yaxis.title.text, ticks: d.layout.xaxis.tickvals,
                        traces: d.data.map(t =>
                        ({name: t.name, x: t.x, y: t.y, bars: !!(t.error_y && t.error_y.array),
                          low: t.y.map((y, i) => y - t.error_y.arrayminus[i])}))}))""")
        tp = next(p for p in plots if p["title"] == "throughput against chain length")
        assert tp["x"] == "chain length" and tp["y"].startswith("throughput (")
        assert [t["name"] for t in tp["traces"]] == ["cmp (id 1)", "cmp (id 2)"]
        assert all(t["x"] == [2, 3] and t["bars"] and min(t["y"]) > 0 for t in tp["traces"])
        assert tp["ticks"] == [2, 3]  # the swept lengths, never 2.2, 2.4 ...
        # no interval drawn below 0: a rate's is cut there, and so is a ratio of rates
        assert all(low >= 0 for p in plots for t in p["traces"] for low in t["low"]), plots

        # the ratio of the second to the first, with its interval, as the server computed it
        ratio = next(p for p in plots if p["title"] == "ratio: throughput against chain length")
        (r,) = ratio["traces"]
        m = next(m for m in c["metrics"] if m["metric"] == "throughput_bps")
        (want,) = m["ratios"]
        assert r["x"] == [2, 3] and r["y"] == want["ratio"] and r["bars"]
        means = [s["mean"] for s in m["series"]]
        assert want["ratio"][0] == pytest.approx(means[1][0] / means[0][0])
        # (no interval with fewer than 2 repetitions; no upper end when the first side's
        # interval reaches 0 on a loaded machine)
        assert all(lo is None or 0 <= lo < q and (hi is None or q < hi) for lo, q, hi in
                   zip(want["low"], want["ratio"], want["high"]))

        # the environment differences listed, exactly the server's, in words
        rows = page.evaluate("""() => [...document.querySelectorAll('#compare-env tr')]
            .slice(1).map(tr => [tr.dataset.key, ...[...tr.cells].map(c => c.textContent)])""")
        assert rows == [[d["key"], d["label"], *d["shown"]] for d in c["environment"]]
        keys = [r[0] for r in rows]
        assert "commit" not in keys  # one source tree ran both
        # two invocations recorded two load averages (the same only by chance)
        for load in (r for r in rows if r[0] == "load"):
            assert load[1] == "load average (1, 5, 15 min)"
            assert all(re.fullmatch(r"\d+\.\d, \d+\.\d, \d+\.\d", v) for v in load[2:])
        assert not any("[" in v for r in rows for v in r), rows
        # where they ran: the lab is up, so its name links to the lab view
        link = page.locator("#compare-labs a").first
        assert link.get_attribute("href") == f"#/lab/{lab_name}"
        assert c["sides"][0]["ran_on"]["experiment_file"] == str(f)
        link.click()
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        # the results view of one experiment links the lab it ran on, while it is up
        page.goto(served.url + f"?db={db.name}#/results/2")
        page.wait_for_function("() => document.body.dataset.ready === 'results/2'",
                               timeout=60000)
        assert page.inner_text("#ran-on").startswith(f"Ran on lab {lab_name} (up: open")
        assert page.get_attribute("#ran-on a", "href") == f"#/lab/{lab_name}"
        assert not page.errors  # type: ignore[attr-defined]
        page.close()


def test_published_figures_drawn_beside_ours(browser: Browser, tmp_path: Path) -> None:  # noqa: F811
    """A reproduced study's experiment (``paper-chain-veth-vs-ovs-tcp``, run by the real
    runner with measurements that follow 11 % per hop) beside another: each of its findings
    in ``scenarios/findings.yaml`` is drawn as the published band (widened by the tolerance)
    with our ratio and its interval beside it, exactly as the server computed them."""
    db = make_reproduction_db(tmp_path / "repro.db")
    with serving(db) as served:
        page = new_page(browser)
        c = compare_first_two(page, served, db, ".published .main-svg")
        rows = c["published"]
        ids = [p["id"] for p in rows]
        assert {"P5", "P10"} <= set(ids), ids
        p5 = next(p for p in rows if p["id"] == "P5")
        assert p5["band"] == pytest.approx([0.2 * 0.9, 0.5 * 1.1])
        assert p5["low"] < p5["ratio"] < p5["high"] and p5["verdict"] == "holds"
        drawn = page.evaluate("""() => { const d = document.querySelector(
            '#compare-out .published'); const ours = d.data.find(t => t.name.startsWith('ours'));
            return {x: ours.x, y: ours.y, shapes: d.layout.shapes.map(s => [s.y0, s.y1]),
                    low: ours.y.map((y, i) => y === null ? null : y - ours.error_y.arrayminus[i]),
                    high: ours.y.map((y, i) => y === null ? null : y + ours.error_y.array[i])}; }""")
        assert drawn["x"] == ids and drawn["y"] == [p["ratio"] for p in rows]
        assert drawn["shapes"] == [p["band"] for p in rows if p["band"]]
        i = ids.index("P5")
        assert (drawn["low"][i], drawn["high"][i]) == pytest.approx((p5["low"], p5["high"]))
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
