"""The reproduction page's table kinds (fit, rates, means over derived and combined parameters),
the classifier block, findings across two databases and ``scripts/repro_page.py render`` on a
partial run directory.  Small fixture databases, no root, nothing measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.findings import derived, load_findings
from sfclab.experiments.page import comparisons, fill
from sfclab.experiments.pagetables import received_at, render_classifier, render_table
from sfclab.experiments.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _runs(path: Path, name: str, rows: list[tuple[dict[str, Any], dict[str, float], dict]],
          measure: dict[str, Any] | None = None, source: str = "") -> None:
    """One experiment ``name`` in ``path``: a done run per (params, metrics, raw)."""
    with Store(path) as s:
        eid = s.register_experiment(name, name, {}, 1, source or f"/s/{name}.yaml")
        pts = [SimpleNamespace(key=f"{name}-{i}", params=p, repetition=0, lab={},
                               measure=measure or {}, lab_hash="x")
               for i, (p, _, _) in enumerate(rows)]
        s.add_runs(eid, pts)
        for r, (_, metrics, raw) in zip(s.runs(eid), rows):
            s.mark_running(r.id, started=100.0)
            s.finish_run(r.id, metrics, raw, ended=110.0)


def _findings(tmp_path: Path, text: str):
    p = tmp_path / "f.yaml"
    p.write_text(text)
    return load_findings(p)


def _block(page: str, ident: str) -> str:
    return page.split(f"{ident} -->\n")[1].split("<!-- repro:end")[0]


def test_fit_table_is_the_power_law_of_each_series(tmp_path):
    # 10 % per hop for veth, 30 % for ovs, exactly, two repetitions each
    rows = [({"lab.chain.length": n, "lab.chain.link": link},
             {"throughput_bps": t2 * (1 - loss) ** (n - 2) * (1 + e)}, {})
            for link, t2, loss in (("veth", 10e9, 0.1), ("ovs", 1e9, 0.3))
            for n in (2, 3, 5, 8) for e in (-0.01, 0.01)]
    _runs(tmp_path / "c.db", "chain", rows)
    f = _findings(tmp_path, "tables: [{id: fit, kind: fit, db: c, metric: throughput_bps, "
                            "unit: Gbit/s, rows: lab.chain.length, cols: lab.chain.link}]")
    with Store(tmp_path / "c.db", readonly=True) as s:
        out = render_table(s, f.tables[0])
    assert out is not None
    lines = {ln.split(" | ")[0]: ln for ln in out.splitlines()}
    assert "| chain.link=veth" in lines and "| chain.link=ovs" in lines
    veth, ovs = lines["| chain.link=veth"].split(" | "), lines["| chain.link=ovs"].split(" | ")
    assert veth[1] == "10.0 %" and ovs[1] == "30.0 %"
    assert veth[3] == "10" and ovs[3] == "1"  # t(2) in Gbit/s
    assert float(veth[4]) > 0.99 and "n = 2…8" in out


def test_rates_table_per_offered_rate_and_per_sender(tmp_path):
    def pts(got: list[float], pairs: bool) -> dict:
        return {"points": json.dumps([
            {"offered_pps": o, "received_pps": 2 * g if pairs else g,
             **({"pairs": [{"pair": "vm1:dst", "received_pps": g},
                           {"pair": "vm2:dst", "received_pps": g}]} if pairs else {})}
            for o, g in zip((1000.0, 5000.0), got)])}
    _runs(tmp_path / "o.db", "four", [
        ({"variant": "four"}, {"max_received_pps": 1}, pts([1000, 2000], True)),
        ({"variant": "four"}, {"max_received_pps": 1}, pts([1000, 3000], True))],
        measure={"pairs": [{"from": "vm1", "to": "dst"}, {"from": "vm2", "to": "dst"}]})
    _runs(tmp_path / "o.db", "alone", [
        ({"variant": "t1-alone"}, {"max_received_pps": 1}, pts([1000, 5000], False))],
        measure={"pairs": [{"from": "vm1", "to": "dst"}]})
    f = _findings(tmp_path, """tables:
  - {id: all, kind: rates, db: o, metric: received_pps, unit: kpps, rows: variant}
  - {id: t1, kind: rates, db: o, metric: received_pps, unit: kpps, rows: variant, pair: vm1}
  - {id: t2, kind: rates, db: o, metric: received_pps, unit: kpps, rows: variant, pair: vm2}
  - {id: top, db: o, metric: point.received_pps, unit: kpps, rows: variant}
""")
    with Store(tmp_path / "o.db", readonly=True) as s:
        everyone, t1, t2, top = (render_table(s, t) for t in f.tables)
    assert everyone and t1 and t2 and top
    # means of a point field: the highest of each run's points (4 and 6 kpps; 5 alone)
    assert "| four | 5 ± " in top and "| t1-alone | 5 (n = 1) |" in top
    assert "| variant \\ offered | 1k | 5k |" in everyone
    assert "| four | 2.0 | 5.0 (4–6) |" in everyone  # both tenants: 2 × (2, 3) kpps
    assert "| four | 1.0 | 2.5 (2–3) |" in t1 and "| t1-alone | 1.0 | 5.0 |" in t1
    # T1 alone is a one-pair run of vm1: not T2's curve
    assert "| four | 1.0 | 2.5 (2–3) |" in t2 and "t1-alone" not in t2
    assert received_at([{"offered_pps": 1, "received_pps": 1}], "vm2", "vm1") == []


def test_fig10_rows_are_the_total_across_three_files_and_counts_become_rates(tmp_path):
    fw = {"kind": "firewall", "backend": "iptables"}

    def nodes(k: int, total: int) -> dict:
        return {f"r{i + 1}": {**fw, "generate": {"count": total // k, "type": "stateful"}}
                for i in range(k)}
    for k, gbps in ((1, 2.0), (2, 1.5), (4, 1.0)):
        _runs(tmp_path / "firewall-spread.db", f"paper-firewall-spread-{k}", [
            ({"lab.nodes": nodes(k, total), "measure.flows": fl},
             {"throughput_bps": gbps * 1e9 / (total / 100) * fl * (1 + e),
              "udp_received_packets": 2000.0 * k}, {})
            for total in (100, 1000) for fl in (1, 4) for e in (-0.01, 0.01)],
            measure={"duration": 2.0})
    assert derived({"lab.nodes": nodes(4, 1000)}) == {"derived.rules": 1000,
                                                       "derived.firewalls": 4}
    assert derived({"lab.nodes.r1.generate.count": 100}) == {"derived.rules": 100,
                                                            "derived.firewalls": 1}
    f = _findings(tmp_path, """tables:
  - {id: p-fig10, db: firewall-spread, metric: throughput_bps, unit: Gbit/s,
     rows: derived.rules, cols: [derived.firewalls, measure.flows]}
  - {id: kpps, db: firewall-spread, metric: udp_received_packets, per_s: true, unit: kpps,
     rows: derived.firewalls}
""")
    with Store(tmp_path / "firewall-spread.db", readonly=True) as s:
        t, kpps = (render_table(s, x) for x in f.tables)
    assert t and kpps
    head = t.splitlines()[0]
    assert head.startswith("| rules \\ firewalls, flows (Gbit/s) | firewalls=1, flows=1 | "
                           "firewalls=1, flows=4 | firewalls=2, flows=1 |")
    assert "| 100 | 2 ± " in t and "| 1000 | 0.2 ± " in t
    row100 = next(ln for ln in t.splitlines() if ln.startswith("| 100 |")).split(" | ")
    assert [c.split(" ±")[0] for c in row100[1:]] == ["2", "8", "1.5", "6", "1", "4"]
    # 2000 · k datagrams over a 2 s trial
    assert "| 1 | 1 (n = 1)" not in kpps and "| 4 | 4 ± 0 |" in kpps


def test_a_finding_across_two_databases(tmp_path):
    _runs(tmp_path / "shaper.db", "shaper", [
        ({"lab.chain.length": 12, "measure.flows": 2}, {"throughput_bps": v * 1e9}, {})
        for v in (0.95, 0.97, 0.93)])
    _runs(tmp_path / "plain.db", "plain", [
        ({"lab.chain.length": 12, "lab.chain.link": "veth"}, {"throughput_bps": v * 1e9}, {})
        for v in (1.0, 1.02, 0.98)])
    f = _findings(tmp_path, """findings:
  - {id: P8, study: P, claim: shapers cost what hops cost, db: shaper, b_db: plain,
     metric: throughput_bps, unit: Gbit/s, a: {lab.chain.length: 12},
     b: {lab.chain.length: 12, lab.chain.link: veth}, expect: [0.8, 1.25]}
""")
    assert f.findings[0].dbs == ("shaper", "plain") and f.dbs() == ["plain", "shaper"]
    c = comparisons(f, tmp_path)["P8"]
    assert c is not None and c.ratio == pytest.approx(0.95) and c.verdict == "holds"
    assert c.sources == ("/s/plain.yaml", "/s/shaper.yaml")
    page = "<!-- repro:begin finding P8 -->\nold\n<!-- repro:end -->\n"
    assert "ratio 0.95" in fill(page, f, tmp_path, run_id="r", partial=True)
    (tmp_path / "plain.db").unlink()  # b's group not run: the block keeps its text
    assert comparisons(f, tmp_path)["P8"] is None and fill(page, f, tmp_path, run_id="r", partial=True) == page


def test_classifier_block_from_the_bench_json(tmp_path):
    j = tmp_path / "p4sfc-classifier.json"
    j.write_text(json.dumps({
        "load_100k_s": {"json": 0.79, "flow": 0.93, "block": 1.17},
        "load_100k_cpu_s": {"json": 0.7, "flow": 0.8, "block": 1.0}, "load_goal_s": 2.0,
        "pps": {"1": 412515.0, "1000": 414931.0, "100000": 415598.0},
        "ratio_to_1": {"1": 1.0, "1000": 1.0058, "100000": 1.0074}, "goal_ratio": 0.9}))
    out = render_classifier(j)
    assert "| json | 0.79 | 0.70 |" in out and "| block | 1.17 | 1.00 |" in out
    assert "| 100,000 | 415,598 | 100.7 % |" in out and "| 1 | 412,515 | 100.0 % |" in out
    f = _findings(tmp_path, "tables: []")
    page = "a\n<!-- repro:begin bench p4sfc-classifier -->\nold\n<!-- repro:end -->\n"
    assert "415,598" in fill(page, f, tmp_path, run_id="r", partial=True)
    j.write_text("{}")
    with pytest.raises(SpecError, match="p4sfc-classifier.json"):
        render_classifier(j)
    j.unlink()
    assert fill(page, f, tmp_path, run_id="r", partial=True) == page


@pytest.mark.parametrize("table, place", [
    ("{id: t, db: d, metric: m, rows: r, kind: pie}", "tables[0].kind"),
    ("{id: t, db: d, metric: m, rows: []}", "tables[0].rows"),
    ("{id: t, db: d, metric: m, rows: r, cols: [a, 3]}", "tables[0].cols"),
    ("{id: t, db: d, metric: m, rows: r, per_s: often}", "tables[0].per_s"),
])
def test_bad_table_names_the_place(tmp_path, table, place):
    with pytest.raises(SpecError) as e:
        _findings(tmp_path, f"tables: [{table}]")
    assert place in str(e.value)


def test_render_rewrites_a_page_from_a_partial_run_directory(tmp_path):
    """``repro_page.py render OUT --page PAGE``: blocks of databases with done runs are
    rewritten; a database still empty (its group running) or absent keeps the old text."""
    out = tmp_path / "out"
    out.mkdir()
    _runs(out / "d.db", "d", [({"variant": v}, {"m": x}, {}) for v, x in
                              (("a", 1e3), ("a", 1.1e3), ("b", 2e3), ("b", 2.1e3))])
    with Store(out / "running.db") as s:  # registered, no run done yet
        s.register_experiment("r", "r", {}, 1, "/s/r.yaml")
    (tmp_path / "f.yaml").write_text("""findings:
  - {id: X, study: T, claim: c, db: running, metric: m, a: {variant: a}, b: {variant: b},
     expect: [1, 2]}
tables:
  - {id: done, db: d, metric: m, unit: kpps, rows: variant}
  - {id: busy, db: running, metric: m, rows: variant}
  - {id: absent, db: missing, metric: m, rows: variant}
""")
    page = tmp_path / "page.md"
    page.write_text("".join(f"<!-- repro:begin {b} -->\nold {b}\n<!-- repro:end -->\n"
                            for b in ("table done", "table busy", "table absent", "finding X",
                                      "environment", "bench p4sfc-classifier")))
    (out / "reproduce.json").write_text(json.dumps({"run_id": "r1", "started": 50.0}))
    cmd = [sys.executable, str(ROOT / "scripts" / "repro_page.py"), "render", str(out),
           "--page", str(page), "--partial"]
    env = {"FINDINGS": str(tmp_path / "f.yaml"), "PATH": "/usr/bin:/bin"}
    cp = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 0, cp.stderr
    text = page.read_text()
    assert "old table done" not in text and "| a | 1.05 ± " in text
    for kept in ("old table busy", "old table absent", "old finding X",
                 "old bench p4sfc-classifier"):
        assert kept in text
    assert "old environment" not in text and "run id `r1`" in text
    assert "<!-- repro:begin table done run=r1 -->" in text
    cp = subprocess.run(cmd[:3] + [str(tmp_path / "nowhere"), "--page", str(page)],
                        capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 2 and "nowhere" in cp.stderr and cp.stderr.count("\n") == 1


def test_hosts_bench_block_and_unknown_bench(tmp_path):
    setups = ("bridged-if", "bridge", "direct", "shortbridge", "shortbridge-vxlandev")
    fwd = dict(zip(setups, (264e3, 166e3, 212e3, 301e3, 250e3)))
    size = {"forwarded_pps": fwd, "capacity_pps": {k: 2 * v for k, v in fwd.items()},
            "us_per_frame": dict.fromkeys(setups, 3.14), "sent_pps": dict.fromkeys(setups, 9e5),
            "figure": "capacity_pps", "shortbridge_over_bridge": 301 / 166,
            "shortbridge_over_direct": 301 / 212, "vxlandev_over_bridge": 250 / 166}
    (tmp_path / "trellis-hosts.json").write_text(json.dumps(
        {"layout": "nut-alone", "reps": 3, "duration_s": 2.0, "sizes": {"64": size}}))
    f = _findings(tmp_path, "tables: []")
    out = fill("<!-- repro:begin bench trellis-hosts -->\nold\n<!-- repro:end -->\n", f,
               tmp_path, run_id="r")
    assert "old" not in out and "| shortbridge | 301 | 602 | 3.14 | 900 |" in out
    assert "shortbridge / bridge **1.81×**" in out and "medians of 3 trials of 2 s" in out
    with pytest.raises(SpecError, match="nope"):
        fill("<!-- repro:begin bench nope -->\n<!-- repro:end -->\n", f, tmp_path, run_id="r")


def test_means_table_relative_to_a_row(tmp_path):
    _runs(tmp_path / "t.db", "t", [({"variant": v}, {"max_received_pps": x}, {}) for v, x in
                                   (("native", 280e3), ("native", 290e3),
                                    ("bridge", 140e3), ("bridge", 150e3))])
    f = _findings(tmp_path, "tables: [{id: t, db: t, metric: max_received_pps, unit: kpps, "
                            "rows: variant, relative_to: native}]")
    with Store(tmp_path / "t.db", readonly=True) as s:
        out = render_table(s, f.tables[0])
    assert out and out.splitlines()[0] == "| variant (kpps) | max_received_pps | / native |"
    assert "| bridge | 145 ± " in out and out.split("| bridge |")[1].split("\n")[0].endswith(
        "| 0.51 |")
    assert "| native | 285 ± " in out and "| 1.00 |" in out


def test_a_searched_rate_at_the_ceiling_is_marked_censored_on_its_row(tmp_path):
    rows = [({"variant": "native"}, {"ndr_lower_bound_pps": 1.0e6}, {}),
            ({"variant": "native"}, {"ndr_lower_bound_pps": 1.02e6}, {}),
            ({"variant": "bridge"}, {"ndr_pps": 3.0e5}, {}),
            ({"variant": "bridge"}, {"ndr_pps": 3.1e5}, {})]
    _runs(tmp_path / "t.db", "t", rows)
    f = _findings(tmp_path, "tables: [{id: t, db: t, metric: ndr_pps, unit: kpps, "
                            "rows: variant}]")
    with Store(tmp_path / "t.db", readonly=True) as s:
        out = render_table(s, f.tables[0])
    assert out is not None
    lines = {ln.split(" | ")[0]: ln for ln in out.splitlines()}
    assert lines["| native"].split(" | ")[1].startswith("≥ 1.01e+03 ± ")
    assert lines["| bridge"].split(" | ")[1].startswith("305 ± ")
    assert "≥ censored" in out


def test_a_peak_at_the_top_of_its_offered_grid_is_marked_censored(tmp_path):
    rows = [({"variant": "veth"}, {"max_received_pps": 4.0e5}, {}),
            ({"variant": "veth"}, {"max_received_pps": 3.99e5}, {}),
            ({"variant": "ovs"}, {"max_received_pps": 2.1e5}, {}),
            ({"variant": "ovs"}, {"max_received_pps": 2.0e5}, {})]
    _runs(tmp_path / "o.db", "o", rows, measure={"type": "rate", "rates": [2e4, 4e5]})
    f = _findings(tmp_path, "tables: [{id: o, db: o, metric: max_received_pps, unit: kpps, "
                            "rows: variant}]")
    with Store(tmp_path / "o.db", readonly=True) as s:
        out = render_table(s, f.tables[0])
    assert out is not None
    lines = {ln.split(" | ")[0]: ln for ln in out.splitlines()}
    assert lines["| veth"].split(" | ")[1].startswith("≥ 400 ± ")
    assert lines["| ovs"].split(" | ")[1].startswith("205 ± ")


def test_a_table_whose_runs_are_done_without_its_metric_says_so(tmp_path):
    # openstack-shared's searches all ended without a rate in the full rerun: its table says
    # so, stamped, instead of refusing the run; a database with no done run is still no data
    _runs(tmp_path / "t.db", "t", [({"variant": v}, {"trials": 19.0}, {}) for v in ("a", "b")])
    f = _findings(tmp_path, "tables: [{id: t, db: t, metric: ndr_pps, unit: kpps, "
                            "rows: variant}]")
    with Store(tmp_path / "t.db", readonly=True) as s:
        out = render_table(s, f.tables[0])
    assert out == ("measured, no figure: 2 runs done, none stored `ndr_pps` (a search that "
                   "ended without a rate: each trial's reasons are in the bundle's trials)\n")
    with Store(tmp_path / "e.db") as s:
        s.register_experiment("t", "t", {}, 1, "/s/t.yaml")
    with Store(tmp_path / "e.db", readonly=True) as s:
        assert render_table(s, f.tables[0]) is None
