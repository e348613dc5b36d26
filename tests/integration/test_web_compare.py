"""The results view's comparison in a real browser (Debian's chromium, headless, Playwright),
against ``sfclab serve`` run as a command, on a results database made by two real short
``sfclab run`` invocations of one experiment file (iperf3 through real chain labs), the file
changed in between (1 flow, then 2: two experiments of one name, before and after a change).

Picking both in the page must draw their throughput curves overlaid against the chain length,
the ratio of the second to the first with its 95 % interval, the environment keys that differ
as the server computed them, and each side's lab, linked to the lab view while that lab is up.
With ``SFCLAB_WEB_SCREENSHOTS=DIR`` the view is saved there as ``web-compare.png`` (the one in
docs/ was made so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from tests.integration.test_web_browser import browser, new_page  # noqa: F401
from tests.integration.weblab import serving

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
        page.goto(served.page(f"?db={db.name}#/results"))
        page.wait_for_function("() => document.body.dataset.ready === 'results'",
                               timeout=60000)
        page.click("#compare summary")
        page.check("#compare-pick input[value='1']")
        page.check("#compare-pick input[value='2']")
        page.click("#compare-go")
        page.wait_for_function("() => sfclab.compare && (sfclab.compare.error || "
                               "document.querySelector('#compare-out .ratio .main-svg'))",
                               timeout=30000)
        c = page.evaluate("sfclab.compare")
        assert "error" not in c, c
        assert [s["label"] for s in c["sides"]] == ["cmp (id 1)", "cmp (id 2)"]

        # the curves overlaid: one per side, against the chain length, with intervals
        plots = page.evaluate("""() => [...document.querySelectorAll('#compare-out .plot')]
            .map(d => ({title: d.dataset.title, x: d.layout.xaxis.title.text,
                        y: d.layout.yaxis.title.text, traces: d.data.map(t =>
                        ({name: t.name, x: t.x, y: t.y, bars: !!(t.error_y && t.error_y.array)}))
                       }))""")
        tp = next(p for p in plots if p["title"] == "throughput against chain length")
        assert tp["x"] == "chain length" and tp["y"].startswith("throughput (")
        assert [t["name"] for t in tp["traces"]] == ["cmp (id 1)", "cmp (id 2)"]
        assert all(t["x"] == [2, 3] and t["bars"] and min(t["y"]) > 0 for t in tp["traces"])

        # the ratio of the second to the first, with its interval, as the server computed it
        ratio = next(p for p in plots if p["title"] == "ratio: throughput against chain length")
        (r,) = ratio["traces"]
        m = next(m for m in c["metrics"] if m["metric"] == "throughput_bps")
        (want,) = m["ratios"]
        assert r["x"] == [2, 3] and r["y"] == want["ratio"] and r["bars"]
        means = [s["mean"] for s in m["series"]]
        assert want["ratio"][0] == pytest.approx(means[1][0] / means[0][0])
        assert all(lo is None or lo < q < hi for lo, q, hi in
                   zip(want["low"], want["ratio"], want["high"]))

        # the environment differences listed, exactly the server's
        rows = page.evaluate("""() => [...document.querySelectorAll('#compare-env tr')]
            .slice(1).map(tr => tr.cells[0].textContent)""")
        assert rows == [d["key"] for d in c["environment"]]
        assert "commit" not in rows  # one source tree ran both
        # where they ran: the lab is up, so its name links to the lab view
        link = page.locator("#compare-labs a").first
        assert link.get_attribute("href") == f"#/lab/{lab_name}"
        assert c["sides"][0]["ran_on"]["experiment_file"] == str(f)
        where = os.environ.get("SFCLAB_WEB_SCREENSHOTS")
        if where:  # the picker, the tables and the first metric's two plots
            top = page.locator("#compare").bounding_box()
            end = page.locator("#compare-out .ratio").first.bounding_box()
            assert top and end
            Path(where).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(where) / "web-compare.png"), full_page=True,
                            clip={"x": 0, "y": top["y"] - 90, "width": 1400,
                                  "height": end["y"] + end["height"] - top["y"] + 100})
        link.click()
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
