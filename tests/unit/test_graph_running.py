"""``sfclab graph`` and the page's topology draw a running lab as it runs: instances added to
it each with a link of their own (links made on a running lab share index -1), their tunnels
labelled like hosted links, and the chain's paths through them.  No root, no kernel."""

from __future__ import annotations

from sfclab.plan import graph
from sfclab.plan import tunnels as plan_tunnels
from sfclab.plan.chainadd import apply, plan_addition
from sfclab.realize.kinds import TABLE, load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.spec.chainfile import parse
from sfclab.web.topology import topology

from .test_chain_add_plan import GOOD, LAB, _doc, _instances


def _running():  # type: ignore[no-untyped-def]
    plan = plan_for(load_lab_dict(LAB))
    add = plan_addition(plan, plan.steering, parse(_doc(GOOD)),
                        _instances(), "chain.json")
    fw2 = next(n for n in add.nodes if n.node == "fw-2")
    fw2.vni, fw2.mtu = 5000, 1564  # as if placed on another host
    apply(plan, add)
    plan.host_links.append(plan_tunnels.host_link(
        plan, fw2, [("local", "ctx-a", "198.19.128.1/24"), ("edge2", "ctx-b",
                                                           "198.19.128.2/24")]))
    return plan


def test_each_added_instance_is_drawn_with_its_own_link() -> None:
    text = graph.mermaid(_running(), TABLE.shapes())
    for n in ("fw_1", "fw_2", "n_1"):
        assert len([x for x in text.splitlines() if "---|" in x and f"n_{n}" in x
                    and "n_r1" in x]) == 1, n
    assert 'n_fw_2 ---|"bridge vni 5000 ' in text  # fw-2's tunnel, as a hosted link
    assert '-.->|"video: fw-1"|' in text and '-.->|"video: fw-2"|' in text
    dot = graph.dot(_running(), TABLE.shapes())
    links = [x for x in dot.splitlines() if " -- " in x and '"r1"' in x and '"fw-' in x
             and "dashed" not in x]
    assert len(links) == 2 and sum("vni 5000" in x for x in links) == 1


def test_the_page_topology_keeps_added_links_apart() -> None:
    topo = topology(_running().to_dict())
    added = {(x["source"], x["target"]): x for x in topo["links"] if x["added"]}
    assert set(added) == {("fw-1", "r1"), ("fw-2", "r1"), ("n-1", "r1")}
    assert added[("fw-2", "r1")]["vni"] == 5000 and "vni" not in added[("fw-1", "r1")]
    assert len({x["id"] for x in topo["links"]}) == len(topo["links"])
    assert {"fw-1", "fw-2", "n-1"} <= {n["id"] for n in topo["nodes"]}
