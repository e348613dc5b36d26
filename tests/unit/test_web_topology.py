"""The page's graph from a plan (pure): nodes, links with their kind, chains as paths, and
groups by host and tenant, read from whatever the plan says of them (nothing when silent)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sfclab.realize.kinds import load_lab, load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.web.export import html_page
from sfclab.web.topology import topology

ROOT = Path(__file__).resolve().parents[2]


def plan(name: str = "sfc-web.yaml") -> dict:
    return plan_for(load_lab(str(ROOT / "scenarios" / name))).to_dict()


def plan_of(d: dict) -> dict:
    return plan_for(load_lab_dict(d)).to_dict()


def test_nodes_links_and_kinds() -> None:
    t = topology(plan("chain5.yaml"))
    assert [n["id"] for n in t["nodes"]] == ["src", "r1", "r2", "r3", "dst"]
    assert [(lk["source"], lk["target"]) for lk in t["links"]] == [
        ("src", "r1"), ("r1", "r2"), ("r2", "r3"), ("r3", "dst")]
    assert all(lk["kind"] == "veth" and len(lk["interfaces"]) == 2 for lk in t["links"])
    assert t["groups"] == [] and t["chains"] == []
    assert all(n["parent"] is None for n in t["nodes"])


def test_ovs_bridges_and_their_link_kinds() -> None:
    t = topology(plan_of({"name": "o", "chain": {"bridges": 2, "connect": "patch",
                                                 "port": "internal"}}))
    kinds = {n["kind"] for n in t["nodes"]}
    assert "ovs-bridge" in kinds
    assert {lk["kind"] for lk in t["links"]} == {"patch", "internal"}
    ids = {n["id"] for n in t["nodes"]}
    assert all(lk["source"] in ids and lk["target"] in ids for lk in t["links"])


def test_groups_from_the_namespace_entries() -> None:
    p = plan()
    for ns in p["namespaces"]:
        ns["host"] = "h1" if ns["node"] in ("src", "r1", "fw1") else "h2"
        if ns["node"] in ("fw1", "fw2"):
            ns["tenant"] = "blue"
    t = topology(p)
    assert {g["id"]: g["parent"] for g in t["groups"]} == {
        "host:h1": None, "host:h2": None, "tenant:blue@h1": "host:h1",
        "tenant:blue@h2": "host:h2"}
    parent = {n["id"]: n["parent"] for n in t["nodes"]}
    assert parent["src"] == "host:h1" and parent["fw2"] == "tenant:blue@h2"


def test_groups_from_plan_wide_mappings_of_either_shape() -> None:
    p = plan()
    p["hosts"] = {"h1": ["src", "r1"], "h2": {"nodes": ["dst"]}}
    p["tenants"] = {"fw1": "red"}
    t = topology(p)
    parent = {n["id"]: n["parent"] for n in t["nodes"]}
    assert parent == {"src": "host:h1", "r1": "host:h1", "dst": "host:h2",
                      "fw1": "tenant:red", "fw2": None, "r2": None, "nat": None}


def test_chains_are_paths_of_the_steering_plan() -> None:
    t = topology(plan())
    dns = [c for c in t["chains"] if c["chain"] == "dns"]
    assert len(dns) == 1 and dns[0]["paths"][0]["nodes"] == ["src", "r1", "fw1", "r2", "nat",
                                                              "dst"]
    web = [c for c in t["chains"] if c["chain"] == "web"]
    assert {c["reverse"] for c in web} == {False, True}
    fwd = next(c for c in web if not c["reverse"])
    assert sorted(p["weight"] for p in fwd["paths"]) == [1, 3]


def test_groups_from_a_lab_with_hosts_and_tenants() -> None:
    """The planner's own shapes (``hosts`` a list of host plans, ``tenants`` tenant -> nodes)
    box every node of the scenario in its host, and tenant nodes in their tenant's box."""
    p = plan("hosts-tenants.yaml")
    t = topology(p)
    host_of = {n: h["name"] for h in p["hosts"] for n in h["nodes"]}
    tenant_of = {n: name for name, nodes in p["tenants"].items() for n in nodes}
    assert host_of and tenant_of
    for n in t["nodes"]:
        if n["id"] in host_of:
            assert n["host"] == host_of[n["id"]]
        if n["id"] in tenant_of:
            assert n["parent"] == f"tenant:{tenant_of[n['id']]}@{host_of[n['id']]}"
    assert {g["id"] for g in t["groups"] if g["kind"] == "host"} == {
        f"host:{h}" for h in set(host_of.values())}


def migrated() -> tuple[dict, dict[str, str]]:
    """The sfc-web plan as after ``chain migrate`` moved fw1's function to its clone
    ``fw1.m1`` (the saved plan holds the clone's namespace and function; the moved record
    maps fw1 to it)."""
    p = plan()
    ns = next(n for n in p["namespaces"] if n["node"] == "fw1")
    p["namespaces"].append({**ns, "node": "fw1.m1", "name": ns["name"] + ".m1"})
    p["functions"]["fw1.m1"] = dict(p["functions"]["fw1"])
    return p, {"fw1": "fw1.m1"}


def test_a_migrated_lab_file_node_is_transit_and_its_clone_stands_for_it() -> None:
    p, moved = migrated()
    before = {n["id"]: n for n in topology(p)["nodes"]}
    assert before["fw1"]["kind"] == "firewall" and "moved_to" not in before["fw1"]
    assert "stands_for" not in before["fw1.m1"]
    nodes = {n["id"]: n for n in topology(p, moved)["nodes"]}
    assert nodes["fw1"]["kind"] == "transit" and nodes["fw1"]["function"] is None
    assert nodes["fw1"]["moved_to"] == "fw1.m1" and nodes["fw1"]["was"] == "firewall"
    assert nodes["fw1.m1"]["kind"] == "firewall" and nodes["fw1.m1"]["function"] == "firewall"
    assert nodes["fw1.m1"]["stands_for"] == "fw1" and "moved_to" not in nodes["fw1.m1"]
    # the other nodes are as the plan has them
    assert {k: v for k, v in nodes.items() if k not in moved and k not in moved.values()} == {
        k: v for k, v in before.items() if k not in moved and k not in moved.values()}


def test_the_html_page_carries_the_moved_nodes() -> None:
    """``graph --format html`` embeds the same topology, transit node and clone included."""
    p, moved = migrated()
    nodes = embedded(html_page(p, moved))
    assert nodes["fw1"]["kind"] == "transit" and nodes["fw1"]["moved_to"] == "fw1.m1"
    assert nodes["fw1.m1"]["stands_for"] == "fw1"
    assert embedded(html_page(p))["fw1"]["kind"] == "firewall"


def embedded(page: str) -> dict[str, dict]:
    """Node id -> node of the topology an html page embeds."""
    data = re.search(r'<script type="application/json" id="topology">(.*?)</script>', page,
                     re.S)
    assert data is not None
    return {n["id"]: n for n in json.loads(data.group(1).replace("<\\/", "</"))["nodes"]}
