"""Tenants on emulated hosts: identical address plans that exchange no packet, and one NAT
router shared by two tenants, reaching each through an interface of its own."""

from __future__ import annotations

from sfclab.kernel import netns

from .labtools import iperf3, ping
from .test_hosts import counters

TWO_TENANTS = {
    "hosts": {"h1": {}, "h2": {}, "h3": {}},
    "tenants": {"red": {"nodes": ["a1", "a2", "nat"]}, "blue": {"nodes": ["b1", "b2", "nat"]}},
    "nodes": {"a1": {"kind": "host"}, "a2": {"kind": "host", "host": "h2"},
              "b1": {"kind": "host"}, "b2": {"kind": "host", "host": "h2"},
              "nat": {"kind": "nat", "outside": "srv", "host": "h3"},
              "srv": {"kind": "host", "host": "h3"}},
    "links": [{"endpoints": ["a1", "a2"], "attach": "shortbridge"},
              {"endpoints": ["b1", "b2"], "attach": "bridge"},
              {"endpoints": ["a1:up", "nat"]},
              {"endpoints": ["b1:up", "nat"], "attach": "ovs"},
              {"endpoints": ["nat", "srv"]}],
}


def node_counters(lab, nodes: list[str]) -> dict[tuple[str, str], tuple[int, int]]:
    return {(n, i): c for n in nodes for i, c in counters(lab.netns(n)).items()}


def test_overlapping_tenants_exchange_no_packet(running_lab, lab_name):
    lab = running_lab({"name": lab_name, **TWO_TENANTS})
    plan = lab.plan
    red, blue = ["a1", "a2"], ["b1", "b2"]
    # identical address plans
    assert [str(a) for a in plan.addresses_of("a1")] == [str(a) for a in plan.addresses_of("b1")]
    assert plan.address_of("a2") == plan.address_of("b2")
    for me, other in ((red, blue), (blue, red)):
        before = node_counters(lab, other)
        mine0 = counters(lab.netns(me[1]))["eth0"]
        cp = netns.run(lab.netns(me[0]), ["ping", "-f", "-q", "-c", "3000", "-w", "30",
                                          str(lab.address(me[1]))], check=False, timeout=60)
        assert " 3000 received" in cp.stdout, cp.stdout
        assert counters(lab.netns(me[1]))["eth0"][0] - mine0[0] >= 3000  # the flood arrived
        assert node_counters(lab, other) == before  # and nothing of it reached the other tenant


def test_a_shared_nat_router_serves_two_tenants(running_lab, lab_name):
    lab = running_lab({"name": lab_name, **TWO_TENANTS})
    srv = str(lab.address("srv"))
    for client in ("a1", "b1"):
        assert ping(lab.netns(client), srv, 3).returncode == 0, client
        out = iperf3(lab.netns(client), lab.netns("srv"), srv, seconds=1)
        assert out["end"]["sum_received"]["bytes"] > 100_000
    # the server sees only the router's public address and has no route into either tenant
    routes = netns.run(lab.netns("srv"), ["ip", "route"]).stdout
    assert "via" not in routes
    # each tenant's flows were kept in the tenant's own conntrack zone and table
    ct = netns.run(lab.netns("nat"), ["conntrack", "-L"], check=False).stdout
    assert "zone-orig=100" in ct and "zone-orig=101" in ct
    rules = netns.run(lab.netns("nat"), ["ip", "rule"]).stdout
    assert "lookup 100" in rules and "lookup 101" in rules
    # the NAT router's two tenant interfaces carry the very same address
    nat = {i.name: i.address for i in lab.plan.interfaces_of("nat")}
    assert nat["eth0"] == nat["eth1"]
