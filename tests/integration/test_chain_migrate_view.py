"""What a lab-file function node is after ``chain migrate`` moved its function (issue 14): a
shaper in line between a router and a host, on emulated host h1, moved to h2.  The lab-file
node stays as a plain transit node -- ``inspect`` and ``graph`` show it as ``transit``, "moved
to" its clone, and the clone as the shaper -- and the qdiscs the shaper made on the node's
interfaces are gone (only the default is left), while the clone shapes its own link."""

from __future__ import annotations

import json
from typing import Any

from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.realize.inspect import inspect
from sfclab.live.ops import chains, migrate
from sfclab.live import request
from sfclab.web.routes.labs import lab_topology
from tests.unit.test_web_topology import embedded

from .test_chain_ops import running

SHAPER = {"kind": "shaper", "rate": "200mbit"}


def shaped_lab(name: str) -> dict[str, Any]:
    """src - r1 - shp - dst on emulated host h1 (h2 empty), a chain through the shaper for
    UDP to 5005."""
    nodes = {"src": {"kind": "host"}, "r1": {"kind": "router"}, "shp": SHAPER,
             "dst": {"kind": "host"}}
    return {"name": name,
            "hosts": {"h1": {"cpus": 1, "memory": "512M"}, "h2": {"cpus": 1, "memory": "512M"}},
            "nodes": {n: {**v, "host": "h1"} for n, v in nodes.items()},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "shp"]},
                      {"endpoints": ["shp", "dst"]}],
            "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                              "dport": 5005}],
                             "functions": ["shp"], "egress": "dst"}}}


def root_qdiscs(ns: str) -> dict[str, str]:
    """Interface -> kind of its root qdisc, in namespace ``ns`` (loopback left out)."""
    cp = netns.run(ns, ["tc", "-j", "qdisc", "show"], check=True, timeout=10)
    links = json.loads(netns.run(ns, ["ip", "-j", "link", "show"], timeout=10).stdout)
    names = {x["ifindex"]: x["ifname"] for x in links}
    out = {}
    for q in json.loads(cp.stdout):
        dev = q.get("dev") or names.get(q.get("ifindex"))
        if q.get("root") and dev != "lo":
            out[dev] = q["kind"]
    return out


def test_a_migrated_lab_file_shaper_leaves_a_plain_transit_node(lab_name: str,
                                                                 capsys) -> None:
    with running(shaped_lab(lab_name)) as lab:
        old_ns = lab.netns("shp")
        before = root_qdiscs(old_ns)
        assert before and set(before.values()) == {"htb"}, before
        seen = inspect(lab.name)["nodes"]["shp"]
        assert seen["kind"] == "shaper" and "moved_to" not in seen
        d = migrate.migrate(request.MigrateInstance(lab.name, "shp", "h2"))
        assert d["clone"] == "shp.m1", d
        # 2. the shaper's qdiscs went with its function: only the default is left
        after = root_qdiscs(old_ns)
        assert set(after) == set(before) and "htb" not in after.values(), after
        assert set(after.values()) <= {"noqueue", "fq_codel", "pfifo_fast"}, after
        assert root_qdiscs(lab.netns("shp.m1")).get("eth0") == "htb"
        # 1. inspect: the node as it is now, the clone as the function
        nodes = inspect(lab.name)["nodes"]
        assert nodes["shp"]["kind"] == "transit" and nodes["shp"]["moved_to"] == "shp.m1"
        assert nodes["shp"]["was"] == "shaper" and "function" not in nodes["shp"]
        assert nodes["shp.m1"]["kind"] == "shaper" and nodes["shp.m1"]["stands_for"] == "shp"
        assert "htb" in json.dumps(nodes["shp.m1"]["function"])
        capsys.readouterr()
        assert main(["inspect", lab.name]) == 0
        text = capsys.readouterr().out
        assert "  shp [transit] on h1 (shaper moved to shp.m1)" in text, text
        assert "  shp.m1 [shaper] on h2 (in place of shp)" in text, text
        # ... and graph, in both formats
        assert main(["graph", lab.name]) == 0
        mer = capsys.readouterr().out
        assert "n_shp(\"shp<br/><small>transit, moved to shp.m1</small>\")" in mer, mer
        assert "shp.m1<br/><small>shaper in place of shp</small>" in mer, mer
        assert main(["graph", lab.name, "--format", "dot"]) == 0
        dot = capsys.readouterr().out
        assert 'label="shp\\ntransit, moved to shp.m1"' in dot, dot
        # ... and the web page's topology, served and in the html file
        web = {n["id"]: n for n in lab_topology(lab.name)["nodes"]}
        assert web["shp"]["kind"] == "transit" and web["shp"]["moved_to"] == "shp.m1"
        assert web["shp.m1"]["kind"] == "shaper" and web["shp.m1"]["stands_for"] == "shp"
        assert main(["graph", lab.name, "--format", "html"]) == 0
        page = embedded(capsys.readouterr().out)
        assert page["shp"]["moved_to"] == "shp.m1" and page["shp.m1"]["stands_for"] == "shp"
        # the chain's traffic crosses the clone, and the old node as transit
        t = chains.trace(lab.name, "c")
        assert t["delivered"] and t["in_order"], t
        assert t["paths"][0]["instances_seen"] == ["shp.m1"], t
