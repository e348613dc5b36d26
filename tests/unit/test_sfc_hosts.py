"""The chains' data plane split over hosts driven over SSH (pure): every part carries the
lab's steering plan whole, each host's MACs are derived the same everywhere, a host's share
directory is its own."""

from __future__ import annotations

from sfclab.plan.sfc_hosts import interface_mac, owner_hosts, remote_host, share_dir_name
from sfclab.plan.split import check_partition, split

from .chainplans import line_chain_plan

PLACED = {"src": "h1", "r1": "h1", "f1": "h2", "f2": "h3", "dst": "h3"}


def test_every_part_carries_the_chains_and_names_its_own_chain_nodes():
    plan = line_chain_plan(PLACED)
    assert plan.steering is not None
    parts = split(plan)
    check_partition(plan, parts)
    assert all(p.steering == plan.steering for p in parts.values())
    assert owner_hosts(plan, plan.steering) == {"src": "h1", "r1": "h1", "f1": "h2",
                                                "f2": "h3", "dst": "h3"}
    assert remote_host(plan) is None  # the whole lab: emulated hosts, one data plane
    part = parts["h2"]
    part.hosts[0].emulated = False  # what the agent makes of it
    assert remote_host(part) is part.hosts[0]


def test_derived_macs_are_unicast_local_stable_and_distinct():
    a = interface_mac("c", "f1", "eth0")
    assert a == interface_mac("c", "f1", "eth0") and len(a) == 6
    assert a[0] & 0x01 == 0 and a[0] & 0x02  # unicast, locally administered
    assert len({interface_mac("c", n, i) for n in ("f1", "f2") for i in ("eth0", "eth1")} |
               {interface_mac("d", "f1", "eth0")}) == 5
    assert share_dir_name("h1") == "@h1"
