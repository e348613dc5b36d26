#!/usr/bin/env python3
"""The browser half of scripts/screenshots.sh: drive the page of a running ``sfclab serve`` in
Debian's chromium (headless, Playwright; never a browser Playwright downloads) as a person
would, and save what it shows:

    screenshots.py --url URL --token-file FILE --lab LAB --out DIR

- ``web-lab.png``: the lab view of LAB after a rate curve of 1500-byte frames (5k and 30k
  packets per second offered) started from the form, its loss painted where it happened;
- ``web-measure.png``: the form during an NDR/PDR search of the same frames (top of the search
  30k), once two trials have ended and the last one's loss is painted; the search is then
  stopped from the form;
- ``web-results.png``: the results view of experiment 1 of the server's database, down to its
  first figure;
- ``web-compare.png``: experiments 1 and 2 of that database compared side by side.

Every step waits for what the page itself says (``window.sfclab``), never for a fixed time; a
page error or a refused script (Content-Security-Policy) stops it with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
#: the frames and rates of the pictures: a 200 Mbit/s shaper passes about 16k of these a second
SIZE, RATES, TOP = "1500", "5k, 30k", "30k"
#: the longest a measurement of the pictures may take (a loaded machine is slow)
LONG_MS = 300_000


def wait_server(url: str, token: str, seconds: float = 120.0) -> None:
    """Until the server answers (a loaded machine takes a while to start it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(url + "api/labs",
                                         headers={"Authorization": f"Bearer {token}"})
            urllib.request.urlopen(req, timeout=2).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"screenshots: the server at {url} did not answer")


def form(page: Page, kind: str, **fields: str) -> None:
    """Choose the kind, type the fields, and wait until the server's check accepts them."""
    page.select_option("#measure-kind", kind)
    for key, value in fields.items():
        page.fill(f"#measure-form input[name={key}]", value)
    page.wait_for_function(
        "want => { const r = JSON.parse(document.getElementById('measure-request').value);"
        " return sfclab.formError === null && Object.entries(want).every(([k, v]) =>"
        " String(r[k]) === String(k === 'rates' ? v.split(/,\\s*/) : v)); }",
        arg=fields, timeout=30_000)
    page.wait_for_function("() => !document.getElementById('measure-start').disabled")


def lab_view(page: Page, lab: str, out: Path) -> None:
    page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab}'")
    page.wait_for_function("() => (sfclab.checked || 0) >= 1")
    form(page, "rate", size=SIZE, rates=RATES, duration="2")
    page.click("#measure-start")
    page.wait_for_function("() => sfclab.job && sfclab.job.status === 'done'", timeout=LONG_MS)
    page.wait_for_function("() => sfclab.loss && sfclab.loss.measurement !== null && "
                           "Object.values(sfclab.loss.loss_by_node).some(c => c > 0)",
                           timeout=30_000)
    page.wait_for_function("() => sfclab.cy.nodes('.lossy').length > 0")
    page.screenshot(path=str(out / "web-lab.png"), full_page=True)


def measure_view(page: Page, out: Path) -> None:
    form(page, "ndr", max_rate=TOP, duration="1")
    page.click("#measure-start")
    # a moment when the last trial lost packets, so its loss is painted on the graph
    page.wait_for_function("() => sfclab.job && sfclab.job.status === 'running' && "
                           "sfclab.job.rows.length >= 2 && sfclab.cy.nodes('.lossy').length",
                           timeout=LONG_MS)
    page.screenshot(path=str(out / "web-measure.png"), full_page=True)
    page.click("#measure-stop")
    page.wait_for_function("() => sfclab.job.status !== 'running'", timeout=LONG_MS)


def results_view(page: Page, url: str, out: Path) -> None:
    page.goto(url + "#/results/1")
    page.wait_for_function("() => document.body.dataset.ready === 'results/1'", timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('#plots .plot .main-svg').length "
                           ">= 1 && document.querySelectorAll('#tables table').length >= 1")
    end = page.locator("#plots .plot").first.bounding_box()
    assert end
    page.screenshot(path=str(out / "web-results.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": 1400, "height": end["y"] + end["height"] + 20})


def compare_view(page: Page, out: Path) -> None:
    page.click("#compare summary")
    page.check("#compare-pick input[value='1']")
    page.check("#compare-pick input[value='2']")
    page.click("#compare-go")
    page.wait_for_function("() => sfclab.compare && (sfclab.compare.error || "
                           "document.querySelector('#compare-out .ratio .main-svg'))",
                           timeout=60_000)
    error = page.evaluate("sfclab.compare.error || null")
    if error:
        raise SystemExit(f"screenshots: the comparison failed: {error}")
    top = page.locator("#compare").bounding_box()
    end = page.locator("#compare-out .ratio").first.bounding_box()
    assert top and end
    page.screenshot(path=str(out / "web-compare.png"), full_page=True,
                    clip={"x": 0, "y": top["y"] - 90, "width": 1400,
                          "height": end["y"] + end["height"] - top["y"] + 100})


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True, type=Path)
    ap.add_argument("--lab", required=True)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    token = a.token_file.read_text().strip()
    wait_server(a.url, token)
    a.out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and "Content Security Policy" in m.text
                and errors.append(m.text))
        page.goto(f"{a.url}?token={token}#/lab/{a.lab}")
        lab_view(page, a.lab, a.out)
        measure_view(page, a.out)
        results_view(page, a.url, a.out)
        compare_view(page, a.out)
        browser.close()
    if errors:
        print("screenshots: the page reported errors:\n  " + "\n  ".join(errors),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
