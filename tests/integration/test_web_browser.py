"""The web view in a real browser: Debian's chromium, headless, driven by Playwright (the
system browser, never one Playwright downloads), against ``sfclab serve`` run as a command.

For a running lab (:func:`tests.integration.weblab.web_lab`) the page must draw every node and
every link of the plan inside the view, highlight the chains, show per-link packet rates that
move while ping runs in the lab, and paint the loss of a measurement started from the page on
the node that dropped the packets (the shaper).  The results view must draw Plotly figures with
confidence intervals and fits, the swept values as the x axis's ticks, series named in words
(``flows 1``), and the report's tables.  Stopping the server (SIGTERM) ends it with status 0
and leaves the lab up.  ``sfclab graph LAB --format html`` must open from a file and draw the
same nodes without fetching anything.

The pictures in docs/ are made by ``make screenshots`` (scripts/screenshots.sh) from a real
``make demo`` run, not by these tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from sfclab.kernel import netns
from sfclab.realize.state import LabState
from tests.integration.weblab import serving, web_lab
from tests.webresults import make_results_db

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: 'make setup' installs chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def new_page(browser: Browser) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # what the server's Content-Security-Policy blocked would be a console error
    page.on("console", lambda m: m.type == "error" and "Content Security Policy" in m.text
            and errors.append(m.text))
    page.errors = errors  # type: ignore[attr-defined]
    return page


def drawn(page: Page) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """The nodes (id, classes, rendered box) and links (id, ends, visible) the graph shows."""
    nodes = page.evaluate("""() => { const c = document.getElementById('graph');
        const W = c.clientWidth, H = c.clientHeight;
        return sfclab.cy.nodes('.lab-node').map(n => { const b = n.renderedBoundingBox();
          return {id: n.id(), visible: n.visible(), inside: b.x1 >= 0 && b.y1 >= 0 &&
                  b.x2 <= W && b.y2 <= H, w: b.w, classes: n.classes(), label: n.data('label')};
        }); }""")
    links = page.evaluate("""() => sfclab.cy.edges('.lab-link').map(e =>
        [e.id(), e.source().id(), e.target().id(), e.visible(), e.data('kind')])""")
    return nodes, links


def test_the_lab_view_draws_the_lab_live(browser: Browser, running_lab: Any, lab_name: str,
                                         tmp_path: Path) -> None:
    lab = running_lab(web_lab(lab_name))
    plan = LabState(lab_name).plan()
    assert plan is not None
    db = make_results_db(tmp_path / "r.db")
    ping: subprocess.Popen[bytes] | None = None
    with serving(db) as served:
        url = served.url
        page = new_page(browser)
        page.goto(served.page(f"#/lab/{lab_name}"))
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        nodes, links = drawn(page)
        assert [n["id"] for n in nodes] == [ns["node"] for ns in plan["namespaces"]]
        assert all(n["visible"] and n["inside"] and n["w"] > 10 for n in nodes), nodes
        by_link: dict[str, set[str]] = {}
        for i in plan["interfaces"]:
            by_link.setdefault(f"l{i['link']}", set()).update((i["node"], i["peer"]))
        assert {e[0]: {e[1], e[2]} for e in links} == by_link
        assert all(e[3] and e[4] == "veth" for e in links)
        on_chain = {n["id"] for n in nodes if "on-chain" in n["classes"]}
        assert on_chain == {"src", "r1", "fw1", "fw2", "r2", "nat", "sh", "dst"}

        # the rates move while packets flow (ping, off the chains' classifiers)
        ping = lab.popen("src", ["ping", "-q", "-i", "0.005", "-c", "4000",
                                 str(lab.address("dst"))], stdout=subprocess.DEVNULL)
        try:
            page.wait_for_function("() => sfclab.links.l0 && sfclab.links.l0.pps > 50",
                                   timeout=20000)
            first = page.evaluate("sfclab.samples")
            rx1 = int(page.get_attribute("#rates tr[data-node=dst]", "data-rx-packets") or 0)
            page.wait_for_function(f"() => sfclab.samples >= {first + 2}", timeout=10000)
            rx2 = int(page.get_attribute("#rates tr[data-node=dst]", "data-rx-packets") or 0)
            # ping sends 200 a second; on a loaded machine it sent under 50 a second (94 in
            # two samples once): the table's count moves, which is what this checks
            assert rx2 > rx1 + 20, (rx1, rx2)
            pps = page.evaluate("sfclab.links")
            path = [e[0] for e in links if {e[1], e[2]} in ({"src", "r1"}, {"sh", "dst"})]
            assert all(pps[p]["pps"] > 50 for p in path), pps
            label = page.evaluate("sfclab.cy.getElementById('l0').data('label')")
            assert label.startswith("veth\n") and "pps" in label

            # a measurement from the page; its loss painted on the shaper
            page.fill("#measure-request", json.dumps(
                {"type": "rate", "from": "src", "to": "dst", "rates": ["2k", "40k"],
                 "duration": 1}))
            page.click("#measure-start")
            page.wait_for_function("() => sfclab.job && sfclab.job.status === 'done'",
                                   timeout=120000)
            page.wait_for_function("() => sfclab.loss && sfclab.loss.loss_by_node.sh > 0",
                                   timeout=10000)
            nodes, _ = drawn(page)
            sh = next(n for n in nodes if n["id"] == "sh")
            assert "lossy" in sh["classes"] and "lost" in sh["label"]
            by_node = page.evaluate("sfclab.loss.loss_by_node")
            assert {n["id"] for n in nodes if "lossy" in n["classes"]} == {
                n for n, c in by_node.items() if c > 0}
            # the loss in words: how many of how many, where (most first) and why
            text = page.inner_text("#loss")
            assert text.startswith("measurement 1 (rate curve): lost ")
            worst = max(by_node, key=lambda n: by_node[n])
            assert f"where: {worst} {by_node[worst]:,}" in text and "{" not in text
            loss = page.evaluate("sfclab.loss")
            assert loss["dropped"] == sum(by_node.values())
            assert ("drops counted in the lab, more than were lost" in text) == (
                loss["dropped"] > loss["lost"])
        finally:
            ping.terminate()
            ping.wait()
        assert not page.errors  # type: ignore[attr-defined]

        # the results view: figures with intervals and fits, and the report's tables
        page.goto(f"{url}?db={db.name}#/results/1")
        page.wait_for_function("() => document.body.dataset.ready === 'results/1'")
        page.wait_for_function("() => document.querySelectorAll('.plot .main-svg').length >= 2")
        traces = page.evaluate("""() => [...document.querySelectorAll('.plot')].map(d =>
            [d.dataset.title, d.data.map(t => [t.name, !!(t.error_y && t.error_y.array)])])""")
        tp = dict(traces)["throughput_bps"]
        assert ["flows 1", True] in tp and ["flows 4", True] in tp
        assert any(name.startswith("fit flows 1: l = 11") for name, _ in tp), tp
        # the x axis's ticks are the swept chain lengths, never 2.5
        ticks = page.evaluate("""() => [...document.querySelectorAll('.plot')].map(d =>
            [d.layout.title.text, d.layout.xaxis.title.text, d.layout.xaxis.tickvals])""")
        assert ["throughput against chain length", "chain length", [2, 3, 4, 5, 6]] in ticks
        assert page.locator("#tables table").count() >= 3
        tables = page.inner_text("#tables")
        assert "per-hop loss l" in tables and "flows 1" in tables
        assert "measure.flows" not in tables and "_bps" not in tables
        # the lab its runs ran on (a fake one here, never up): named, not linked
        assert page.inner_text("#ran-on").startswith("Ran on lab ch (not up now)")
        assert page.locator("#ran-on a").count() == 0
        page.select_option("#experiment", "2")
        page.wait_for_function("""() => [...document.querySelectorAll('.plot')]
            .some(d => d.dataset.title === 'offered vs received' && d.querySelector('.main-svg'))""")
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
    # the server is gone; the lab is as it was
    assert LabState(lab_name).meta()["status"] == "up"
    assert all(netns.exists(ns["name"]) for ns in plan["namespaces"])


def test_graph_html_opens_from_a_file(browser: Browser, running_lab: Any, lab_name: str,
                                      tmp_path: Path) -> None:
    running_lab(web_lab(lab_name))
    out = tmp_path / "lab.html"
    with out.open("w") as f:
        subprocess.run([sys.executable, "-m", "sfclab.cli", "graph", lab_name, "--format",
                        "html"], cwd=ROOT, stdout=f, check=True)
    shutil.copy(out, tmp_path / "copy.html")  # nothing next to it is needed
    page = new_page(browser)
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto((tmp_path / "copy.html").as_uri())
    page.wait_for_function("() => window.sfclab && sfclab.cy.nodes('.lab-node').length > 0")
    nodes, links = drawn(page)
    assert sorted(n["id"] for n in nodes) == sorted(web_lab(lab_name)["nodes"])
    assert all(n["visible"] and n["inside"] for n in nodes) and len(links) == 8
    assert page.locator("#legend button").count() == 2 + 3  # all, none, 3 chain paths
    assert fetched == [(tmp_path / "copy.html").as_uri()]
    assert not page.errors  # type: ignore[attr-defined]
    page.close()


def test_graph_html_draws_a_migrated_node_as_transit(browser: Browser, tmp_path: Path) -> None:
    """A lab-file function node whose function moved to a clone is drawn as ``sfclab graph``
    writes it: "transit, moved to <clone>" (dashed), the clone "in place of <node>"."""
    from sfclab.web.export import html_page
    from tests.unit.test_web_topology import migrated

    p, moved = migrated()
    out = tmp_path / "moved.html"
    out.write_text(html_page(p, moved))
    page = new_page(browser)
    page.goto(out.as_uri())
    page.wait_for_function("() => window.sfclab && sfclab.cy.nodes('.lab-node').length > 0")
    nodes = {n["id"]: n for n in drawn(page)[0]}
    assert nodes["fw1"]["label"] == "fw1\ntransit, moved to fw1.m1", nodes["fw1"]
    assert "transit" in nodes["fw1"]["classes"]
    assert nodes["fw1.m1"]["label"] == "fw1.m1\nfirewall in place of fw1", nodes["fw1.m1"]
    assert "transit" not in nodes["fw1.m1"]["classes"]
    assert nodes["fw2"]["label"] == "fw2\nfirewall"
    style = page.evaluate("() => sfclab.cy.getElementById('fw1').style('border-style')")
    assert style == "dashed"
    assert not page.errors  # type: ignore[attr-defined]
    page.close()


def test_the_page_gets_its_token_once_and_never_shows_it(browser: Browser, running_lab: Any,
                                                         lab_name: str, tmp_path: Path) -> None:
    """Opened once as /?token=..., the page is redirected to an address without the token, and
    it and everything it loads pass on the cookie, which no script can read; without, 401."""
    running_lab(web_lab(lab_name))
    with serving(tmp_path / "none.db") as served:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(served.url + "api/labs", timeout=5)
        assert e.value.code == 401
        page = new_page(browser)
        page.goto(served.page(f"#/lab/{lab_name}"))
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        page.wait_for_function("() => sfclab.samples >= 1", timeout=10000)
        assert served.token not in page.url and page.url.endswith(f"/#/lab/{lab_name}")
        assert served.token not in page.evaluate("document.cookie")  # HTTP-only
        nodes, links = drawn(page)
        assert len(nodes) == 8 and len(links) == 8
        assert not page.errors  # type: ignore[attr-defined]
        page.close()


def test_the_api_page_is_served_from_here(browser: Browser, tmp_path: Path) -> None:
    """/docs: the OpenAPI document in Swagger UI, every route listed, nothing fetched from
    anywhere but the server."""
    with serving(tmp_path / "none.db") as served:
        url = served.url
        page = new_page(browser)
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url))
        page.goto(served.page("docs"))
        page.wait_for_selector(".opblock", timeout=20000)
        paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => "
                                          "e.getAttribute('data-path'))")
        assert "/api/labs/{lab}/measurements" in paths and "/api/results/export" in paths
        assert fetched and all(u.startswith(url) or u.startswith("data:") for u in fetched), \
            fetched
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
