"""The lab view's measurement form in a real browser (Debian's chromium, headless, driven by
Playwright) against ``sfclab serve`` run as a command, on a real lab
(:func:`tests.integration.weblab.web_lab`, whose shaper before ``dst`` drops most of a 40 kpps
stream).

The form checks what is typed as the command line does: a bad rate shows, at the rates field,
the very message ``sfclab traffic rate --rates`` prints, and Start stays off; a pair given twice
is refused at the pairs.  An NDR/PDR
search started from the form is followed trial by trial: rows appear while it runs, and each
trial's loss is painted on the graph as its row arrives (on the shaper), before the search
ends.  Stop ends it: the job is shown as stopped with the trials it ran, no process of it is
left in the lab's namespaces, and the lab is up and passes traffic.  A rate curve of two
sender -> receiver pairs chosen in the form runs both pairs together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page

from sfclab.kernel import netns
from sfclab.realize.state import LabState
from tests.integration.test_web_browser import browser, new_page  # noqa: F401
from tests.integration.weblab import ROOT, serving, web_lab
from tests.webresults import make_results_db

#: the measurement's own programs (the native generator, iperf3)
TOOLS = ("sfcgen", "iperf3")


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cli_message(lab: str, *options: str) -> str:
    """What ``sfclab traffic rate LAB OPTIONS`` says is wrong (after 'error: --option: ')."""
    r = subprocess.run([sys.executable, "-m", "sfclab.cli", "traffic", "rate", lab, *options],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("sfclab: error: --rates: "), line
    return line[len("sfclab: error: --rates: "):]


def start_when_valid(page: Page, typed: str) -> None:
    """Start the form's measurement once the server's check has accepted it and the request
    shows what was typed (``typed``: a function of the request, as JavaScript)."""
    page.wait_for_function(f"() => sfclab.formError === null && ({typed})(JSON.parse("
                           "document.getElementById('measure-request').value))")
    page.wait_for_function("() => !document.getElementById('measure-start').disabled")
    page.click("#measure-start")


def test_the_form_checks_runs_follows_and_stops_a_search(
        browser: Browser, running_lab: Any, lab_name: str, tmp_path: Path) -> None:  # noqa: F811
    lab = running_lab(web_lab(lab_name))
    plan = LabState(lab_name).plan()
    assert plan is not None
    spaces = [ns["name"] for ns in plan["namespaces"]]
    before = set(netns.pids_in(spaces))
    with serving(make_results_db(tmp_path / "r.db")) as served:
        page = new_page(browser)
        page.goto(served.page(f"#/lab/{lab_name}"))
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        page.wait_for_function("() => (sfclab.checked || 0) >= 1")
        assert page.is_enabled("#measure-start")
        # the senders and receivers offered are the lab's nodes
        offered = page.eval_on_selector_all("#measure-pairs select[data-role=sender] option",
                                            "os => os.map(o => o.value)")
        assert offered == [ns["node"] for ns in plan["namespaces"]]

        # a bad rate: the command line's message at the rates field, as it is typed
        rates = "#measure-form .measure-field[data-key=rates]"
        page.select_option("#measure-kind", "rate")
        page.fill(f"{rates} input", "")
        page.type(f"{rates} input", "100k, fast", delay=20)
        page.wait_for_function("() => sfclab.formError && sfclab.formError.place === 'rates[1]'")
        assert page.inner_text(f"{rates} .measure-error") == cli_message(
            lab_name, "--rates", "100k,fast")
        assert "invalid" in (page.get_attribute(rates, "class") or "")
        assert page.is_disabled("#measure-start")
        page.fill(f"{rates} input", "10k")
        page.wait_for_function("() => sfclab.formError === null")
        assert page.inner_text(f"{rates} .measure-error") == ""

        # a second pair like the first: the message at the pairs; removed, the form is valid
        page.click("#measure-add-pair")
        page.wait_for_function("() => sfclab.formError && sfclab.formError.place === 'pairs'")
        assert "each pair once" in page.inner_text(
            "#measure-form .measure-field[data-key=pairs] > .measure-error")
        page.click("#measure-pairs .measure-remove-pair")
        page.wait_for_function("() => sfclab.formError === null")

        # an NDR/PDR search from the form, followed trial by trial
        page.select_option("#measure-kind", "ndr")
        assert page.is_hidden(rates)
        page.fill("#measure-form input[name=max_rate]", "40k")
        page.fill("#measure-form input[name=duration]", "1")
        start_when_valid(page, "r => r.max_rate === '40k'")
        page.wait_for_function("() => sfclab.job && sfclab.job.status === 'running' && "
                               "sfclab.job.rows.length >= 2", timeout=120000)
        page.wait_for_function("() => sfclab.cy.getElementById('sh').hasClass('lossy')",
                               timeout=20000)
        job = page.evaluate("sfclab.job")
        assert job["status"] == "running" and job["type"] == "ndr"
        lossy = [r for r in job["rows"] if r["lost"]]
        assert lossy and all(r["loss_by_node"].get("sh", 0) > 0 for r in lossy), job["rows"]
        assert all(set(r["intervals"]) == {"ndr", "pdr"} for r in job["rows"])
        shown = page.eval_on_selector_all("#measure-trials tr[data-index]", "rs => rs.length")
        assert shown >= 2
        assert "sh " in page.inner_text("#measure-trials")
        # painted trial by trial, while the search ran: each trial's lossy nodes, as its row
        painted = page.evaluate("sfclab.painted")
        assert len(painted) >= 2 and all(p["status"] == "running" for p in painted), painted
        indices = [p["index"] for p in painted]
        assert indices == sorted(set(indices)), painted
        rows = {r["index"]: r for r in job["rows"]}
        for p in painted:
            lost_at = sorted(n for n, c in rows[p["index"]]["loss_by_node"].items() if c > 0)
            assert p["nodes"] == lost_at, (p, rows[p["index"]])
        assert any("sh" in p["nodes"] for p in painted)

        # Stop: the job ends, shown as stopped with its trials
        page.click("#measure-stop")
        page.wait_for_function("() => sfclab.job.status === 'stopped'", timeout=90000)
        stopped = page.evaluate("sfclab.job")
        assert len(stopped["rows"]) >= len(job["rows"])
        assert "stopped" in page.inner_text("#measure-status")
        assert page.eval_on_selector_all("#measure-trials tr[data-index]",
                                         "rs => rs.length") == len(stopped["rows"])
        assert page.is_disabled("#measure-stop") and page.is_enabled("#measure-start")
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
        # no process of the measurement is left in the lab; the lab is up and passes traffic
        left = set(netns.pids_in(spaces))
        assert left <= before, {p: comm(p) for p in left - before}
        assert not [p for p in left if comm(p) in TOOLS]
        assert LabState(lab_name).meta()["status"] == "up"
        assert all(netns.exists(ns) for ns in spaces)
        lab.exec("src", ["ping", "-c", "2", "-W", "2", str(lab.address("dst"))])


def test_the_form_runs_two_pairs_together(browser: Browser, running_lab: Any,  # noqa: F811
                                          lab_name: str, tmp_path: Path) -> None:
    """Two sender -> receiver pairs chosen in the form (+ pair): one rate curve of both, each
    pair's packets sent and received in every trial, as ``sfclab traffic rate --pair`` runs
    them."""
    running_lab({"name": lab_name,
                 "nodes": {"a1": {"kind": "host"}, "a2": {"kind": "host"},
                           "r": {"kind": "router"}, "b1": {"kind": "host"},
                           "b2": {"kind": "host"}},
                 "links": [{"endpoints": ["a1", "r"]}, {"endpoints": ["a2", "r"]},
                           {"endpoints": ["r", "b1"]}, {"endpoints": ["r", "b2"]}]})
    with serving(tmp_path / "none.db") as served:
        page = new_page(browser)
        page.goto(served.page(f"#/lab/{lab_name}"))
        page.wait_for_function(f"() => document.body.dataset.ready === 'lab/{lab_name}'")
        page.wait_for_function("() => (sfclab.checked || 0) >= 1")
        page.select_option("#measure-kind", "rate")
        first = "#measure-pairs .measure-pair:nth-child(1)"
        page.select_option(f"{first} select[data-role=sender]", "a1")
        page.select_option(f"{first} select[data-role=receiver]", "b1")
        page.click("#measure-add-pair")
        second = "#measure-pairs .measure-pair:nth-child(2)"
        page.select_option(f"{second} select[data-role=sender]", "a2")
        page.select_option(f"{second} select[data-role=receiver]", "b2")
        page.fill("#measure-form input[name=rates]", "5k, 10k")
        page.fill("#measure-form input[name=duration]", "0.5")
        start_when_valid(page, "r => r.pairs + '' === 'a1:b1,a2:b2'")
        page.wait_for_function("() => sfclab.job && sfclab.job.status !== 'running' && "
                               "sfclab.job.status !== undefined", timeout=120000)
        job = page.evaluate("sfclab.job")
        assert job["status"] == "done", job
        assert len(job["rows"]) == 2
        points = job["result"]["points"]
        assert [x["pair"] for p in points for x in p["pairs"]] == ["a1:b1", "a2:b2"] * 2
        assert all(x["received"] > 0 for p in points for x in p["pairs"])
        assert not page.errors  # type: ignore[attr-defined]
        page.close()
