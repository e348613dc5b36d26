"""Plans: names, addresses, routes (no root needed).

Routes are checked by walking them with ``plan.paths.hops``: from every host, a packet to every
other host's address follows longest-prefix matches hop by hop, never transits a host (NoPath),
and must arrive along a shortest path.
"""

from __future__ import annotations

import math

from ipaddress import IPv4Address, IPv4Network

import pytest

from sfclab.errors import SpecError
from sfclab.plan.build import build_plan
from sfclab.plan.model import Plan
from sfclab.plan.paths import NoPath, hops
from sfclab.plan.names import IFNAMSIZ, lab_tag, root_name
from sfclab.realize.kinds import load_lab_dict


def plan_of(d: dict) -> Plan:
    return build_plan(load_lab_dict(d, "t.yaml"))


def walk(plan: Plan, src: str, dst_ip: IPv4Address) -> list[str]:
    """Follow the plan's routes hop by hop (longest prefix; transit only through forwarders)."""
    return hops(plan, src, dst_ip)


@pytest.mark.parametrize("n", [2, 3, 5, 17, 250])
def test_chain_routes_reach_end_to_end_on_the_shortest_path(n):
    plan = plan_of({"name": "c", "chain": {"length": n}})
    dst = plan.address_of("dst")
    path = walk(plan, "src", dst)
    assert len(path) == n
    back = walk(plan, "dst", plan.address_of("src"))
    assert back == list(reversed(path))


def test_routes_are_compressed_to_logarithmic_size():
    plan = plan_of({"name": "c", "chain": {"length": 250}})
    per_node: dict[str, int] = {}
    for r in plan.routes:
        per_node[r.node] = per_node.get(r.node, 0) + 1
    # default route + collapsed prefixes: O(log n) per namespace, not the 248 of one per subnet
    assert max(per_node.values()) <= 2 * math.ceil(math.log2(250))
    assert sum(per_node.values()) < 250 * 8
    assert per_node["src"] == 1  # a host at the end needs only its default route


def test_every_router_reaches_every_subnet_in_a_mesh():
    d = {"name": "mesh", "nodes": {"a": {"kind": "host"}, "b": {"kind": "host"},
                                   "r1": {"kind": "router"}, "r2": {"kind": "router"},
                                   "r3": {"kind": "router"}, "r4": {"kind": "router"}},
         "links": [{"endpoints": ["a", "r1"]}, {"endpoints": ["r1", "r2"]},
                   {"endpoints": ["r2", "r4"]}, {"endpoints": ["r1", "r3"]},
                   {"endpoints": ["r3", "r4"]}, {"endpoints": ["r4", "b"]},
                   {"endpoints": ["r1", "r4"]}]}
    plan = plan_of(d)
    assert walk(plan, "a", plan.address_of("b")) == ["a", "r1", "r4", "b"]  # the short cut
    for x in ("r1", "r2", "r3", "r4"):
        for i in plan.interfaces:
            if i.address:
                walk(plan, x, IPv4Address(i.address.split("/")[0]))


def test_hosts_never_forward_transit_traffic():
    # b is multi-homed between two routers; a path through b would be shorter but b is a host
    d = {"name": "h", "nodes": {"a": {"kind": "host"}, "r1": {"kind": "router"},
                                "b": {"kind": "host"}, "r2": {"kind": "router"},
                                "r3": {"kind": "router"}, "c": {"kind": "host"}},
         "links": [{"endpoints": ["a", "r1"]}, {"endpoints": ["r1", "b"]},
                   {"endpoints": ["b", "r2"]}, {"endpoints": ["r1", "r3"]},
                   {"endpoints": ["r3", "r2"]}, {"endpoints": ["r2", "c"]}]}
    plan = plan_of(d)
    assert walk(plan, "a", plan.address_of("c")) == ["a", "r1", "r3", "r2", "c"]


def test_one_subnet_per_segment_from_the_benchmarking_range():
    plan = plan_of({"name": "c", "chain": {"length": 5}})
    nets = plan.subnets()
    assert len(nets) == 4 and len(set(nets)) == 4
    assert all(n.subnet_of(IPv4Network("198.18.0.0/15")) for n in nets)


def test_bridge_segment_shares_one_subnet():
    d = {"name": "lb", "nodes": {"r1": {"kind": "router"}, "r2": {"kind": "router"},
                                 "h": {"kind": "host"}, "sw": {"kind": "linux-bridge"}},
         "links": [{"endpoints": ["r1", "sw"]}, {"endpoints": ["r2", "sw"]},
                   {"endpoints": ["h", "sw"]}]}
    plan = plan_of(d)
    assert len(plan.segments) == 1
    addrs = plan.addresses_of("r1") + plan.addresses_of("r2") + plan.addresses_of("h")
    assert len({a.network for a in addrs}) == 1 and len({a.ip for a in addrs}) == 3
    assert [i.master for i in plan.interfaces if i.node == "sw"] == ["br0"] * 3


def test_explicit_addresses_are_kept_and_auto_ones_avoid_them():
    d = {"name": "x", "nodes": {"a": {"kind": "host"}, "b": {"kind": "host"},
                                "r": {"kind": "router"}},
         "links": [{"endpoints": ["a", "r"]},
                   {"endpoints": [{"node": "r", "address": "198.18.0.9/24"}, "b"]}]}
    plan = plan_of(d)
    r_addrs = {str(a) for a in plan.addresses_of("r")}
    assert "198.18.0.9/24" in r_addrs
    assert str(plan.address_of("b")) == "198.18.0.1"  # lowest free host in the explicit subnet
    assert str(plan.addresses_of("a")[0].network) == "198.18.1.0/24"  # skipped the explicit one


def test_pool_too_small_is_a_spec_error():
    with pytest.raises(SpecError) as ei:
        plan_of({"name": "c", "chain": {"length": 6},
                 "addressing": {"pool": "198.18.0.0/23", "prefix": 24}})
    assert ei.value.place == "addressing"


def test_root_names_fit_the_kernel_and_are_unique_per_lab():
    plan = plan_of({"name": "a-very-long-lab-name-indeed-xyz", "chain": {"bridges": 40,
                                                                        "connect": "veth"}})
    root = [i.name for i in plan.interfaces if i.netns is None or i.role == "internal"]
    root += [b.name for b in plan.ovs_bridges]
    assert all(len(n) <= IFNAMSIZ for n in root)
    assert len(root) == len(set(root))
    assert all(n.startswith(plan.tag) for n in root)
    assert lab_tag("a") != lab_tag("b")
    assert len(root_name("x" * 32, "v", 9_999_999)) == IFNAMSIZ
    with pytest.raises(ValueError):
        root_name("x", "v", 99_999_999)


def test_interface_names_in_namespaces_and_explicit_ones():
    d = {"name": "x", "nodes": {"a": {"kind": "host"}, "r": {"kind": "router"},
                                "b": {"kind": "host"}},
         "links": [{"endpoints": ["a", "r:eth0"]}, {"endpoints": ["r", "b:up0"]}]}
    plan = plan_of(d)
    assert [i.name for i in plan.interfaces_of("r")] == ["eth0", "eth1"]
    assert [i.name for i in plan.interfaces_of("b")] == ["up0"]


def test_netdev_ovs_turns_tx_checksum_off_on_attached_ends():
    plan = plan_of({"name": "o", "chain": {"bridges": 2, "connect": "veth", "port": "veth"}})
    attached = [i for i in plan.interfaces if i.role == "veth"]
    assert attached and all(i.offloads.get("tx-checksum") is False for i in attached)
    patch = plan_of({"name": "o", "chain": {"bridges": 2}})
    ports = [p for b in patch.ovs_bridges for p in b.ports if p.type == "patch"]
    assert {p.name: p.peer_port for p in ports}[ports[0].peer_port] == ports[0].name


def test_plan_round_trips_through_json():
    plan = plan_of({"name": "o", "chain": {"length": 3, "link": "ovs"}})
    import json
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan


def test_no_path_across_a_host():
    d = {"name": "x", "nodes": {"a": {"kind": "host"}, "h": {"kind": "host"},
                                "b": {"kind": "host"}},
         "links": [{"endpoints": ["a", "h"]}, {"endpoints": ["h", "b"]}]}
    plan = plan_of(d)
    assert walk(plan, "a", plan.addresses_of("h")[0].ip) == ["a", "h"]
    with pytest.raises(NoPath):
        walk(plan, "a", plan.address_of("b"))
