"""``sfclab graph`` draws each chain's steered path over the topology (mermaid and dot)."""

from __future__ import annotations

import re
from pathlib import Path

from sfclab.plan import graph
from sfclab.realize.kinds import TABLE, load_lab
from sfclab.realize.lifecycle import plan_for

ROOT = Path(__file__).resolve().parents[2]


def plan(name: str):  # type: ignore[no-untyped-def]
    return plan_for(load_lab(str(ROOT / "scenarios" / name)))


def test_chain_hops_follow_every_path_of_each_chain_once() -> None:
    hops = graph.chain_hops(plan("sfc-web.yaml"))
    web = [(h.a, h.b) for h in hops if h.chain == "web"]
    # the weighted group makes two paths; the hops they share are drawn once
    assert web == [("src", "r1"), ("r1", "fw1"), ("fw1", "r2"), ("r2", "nat"), ("nat", "dst"),
                   ("r1", "fw2"), ("fw2", "r2")]
    dns = [(h.a, h.b) for h in hops if h.chain == "dns"]
    assert dns == [("src", "r1"), ("r1", "fw1"), ("fw1", "r2"), ("r2", "nat"), ("nat", "dst")]
    assert {h.b for h in hops if h.into} == {"fw1", "fw2", "nat"}
    assert {h.chain: h.symmetric for h in hops} == {"web": True, "dns": False}
    assert len({h.colour for h in hops if h.chain == "web"}) == 1
    assert {h.colour for h in hops if h.chain == "web"} != {h.colour for h in hops
                                                             if h.chain == "dns"}


def test_mermaid_styles_exactly_the_chain_links() -> None:
    text = graph.mermaid(plan("sfc-web.yaml"), TABLE.shapes())
    links = [ln for ln in text.splitlines() if re.search(r" (---|<?-\.->)\|", ln)]
    styled = {int(m.group(1)): m.group(2) for m in
              re.finditer(r"linkStyle (\d+) stroke:(#[0-9a-f]{6})", text)}
    chain_links = [i for i, ln in enumerate(links) if "-.->" in ln]
    assert sorted(styled) == chain_links and len(chain_links) == 12
    assert '  n_r1 <-.->|"web: fw2"| n_fw2' in text.splitlines()
    assert '  n_src -.->|"dns"| n_r1' in text.splitlines()
    assert styled[chain_links[0]] != styled[chain_links[-1]]  # web and dns differ


def test_dot_draws_directed_coloured_chain_edges() -> None:
    text = graph.dot(plan("sfc-web.yaml"), TABLE.shapes())
    web = [ln for ln in text.splitlines() if 'label="web' in ln]
    dns = [ln for ln in text.splitlines() if 'label="dns' in ln]
    assert len(web) == 7 and all("dir=both" in ln and "style=dashed" in ln for ln in web)
    assert len(dns) == 5 and all("dir=forward" in ln for ln in dns)
    assert '"r2" -- "nat" [label="web: nat"' in text and text.rstrip().endswith("}")


def test_a_lab_without_chains_draws_no_chain() -> None:
    p = plan("chain5.yaml")
    assert graph.chain_hops(p) == []
    assert "-.->" not in graph.mermaid(p, TABLE.shapes())
    assert "dashed" not in graph.dot(p, TABLE.shapes())
