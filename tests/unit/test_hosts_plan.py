"""The plan of labs with hosts and tenants (pure, no root): host contexts and CPUs, VNIs,
MTU fitting, per-tenant address spaces, shared nodes' tables, the graph's host boxes."""

from __future__ import annotations

import ipaddress
import json
import textwrap

from sfclab.plan import graph
from sfclab.plan.build import build_plan
from sfclab.plan.hosts import allocate_cpus
from sfclab.plan.model import Plan
from sfclab.realize.kinds import TABLE, load_lab_text


def plan(text: str, cpus: list[int] | None = None) -> Plan:
    return build_plan(load_lab_text(textwrap.dedent(text), "lab.yaml"), cpus=cpus or [0, 1])


THREE = """
name: p
hosts: {h1: {cpus: 1, memory: 64M}, h2: {cpus: 1}, h3: {}}
nodes:
  a: {kind: host}
  r: {kind: router, host: h2}
  b: {kind: host, host: h3}
  c: {kind: host, host: h3}
links:
  - endpoints: [a, r]
  - endpoints: [r, b]
    attach: shortbridge
  - endpoints: [b, c]
  - endpoints: ["b:x", "c:x"]
    attach: ovs
    rate: 20mbit
"""


def test_hosts_get_contexts_underlay_addresses_and_cpus():
    p = plan(THREE)
    assert [(h.name, h.netns, h.address, h.cpus, h.memory) for h in p.hosts] == [
        ("h1", "sfclab:p:@h1", "198.19.255.1/24", [0], 64 * 2**20),
        ("h2", "sfclab:p:@h2", "198.19.255.2/24", [1], None),
        ("h3", "sfclab:p:@h3", "198.19.255.3/24", [0, 1], None)]
    assert [h.nodes for h in p.hosts] == [["a"], ["r"], ["b", "c"]]
    assert p.underlay is not None and p.underlay.netns == "sfclab:p:-underlay"
    assert p.host_of("r").name == "h2"


def test_cpus_are_handed_out_in_turn():
    assert allocate_cpus([1, 1, 1], [0, 1]) == [[0], [1], [0]]
    assert allocate_cpus([2, None, 1], [0, 1, 2, 3]) == [[0, 1], [0, 1, 2, 3], [2]]
    assert allocate_cpus([8], [0, 1]) == [[0, 1]]


def test_one_vni_per_link_across_hosts_and_none_within_a_host():
    p = plan(THREE)
    hl = {h.link: h for h in p.host_links}
    assert sorted(hl) == [0, 1, 3]  # link 2 (same host, no attach/rate) stays a plain veth
    assert [hl[0].vni, hl[1].vni, hl[3].vni] == [1000, 1001, None]
    assert [hl[0].attach, hl[1].attach, hl[3].attach] == ["bridge", "shortbridge", "ovs"]
    assert hl[3].rate == 20_000_000
    e = hl[1].ends
    assert (e[0].vxlan, e[0].local, e[0].remote) == ("vx1", "198.19.255.2", "198.19.255.3")
    assert (e[1].local, e[1].remote) == ("198.19.255.3", "198.19.255.2")
    assert [x.role for x in p.interfaces if x.link == 2] == ["veth", "veth"]
    # the node side of an OVS-attached link gets tx checksum offload off
    assert all(i.offloads == {"tx-checksum": False} for i in p.interfaces if i.link == 3)


def test_tunnels_fit_the_underlay_mtu():
    p = plan(THREE)
    assert [i.mtu for i in p.interfaces if i.link == 0] == [1450, 1450]
    assert p.underlay.mtu == 1500 and "get 1450" in p.underlay.mtu_note
    big = plan(THREE.replace("  - endpoints: [a, r]\n", "  - endpoints: [a, r]\n    mtu: 9000\n"))
    assert big.underlay.mtu == 9050 and "raised" in big.underlay.mtu_note
    assert [i.mtu for i in big.interfaces if i.link == 0] == [9000, 9000]


def test_plans_with_hosts_round_trip_through_json():
    p = plan(THREE)
    again = Plan.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again == p


TENANTS = """
name: t
hosts: {h1: {}, h2: {}}
tenants: {red: {nodes: [a1, a2, nat]}, blue: {nodes: [b1, b2, nat]}}
nodes:
  a1: {kind: host}
  a2: {kind: host, host: h2}
  b1: {kind: host}
  b2: {kind: host, host: h2}
  nat: {kind: nat, outside: srv}
  srv: {kind: host, host: h2}
links:
  - endpoints: [a1, a2]
  - endpoints: [b1, b2]
  - endpoints: ["a1:up", nat]
  - endpoints: ["b1:up", nat]
  - endpoints: [nat, srv]
"""


def test_tenants_have_identical_address_plans_apart_from_the_public_one():
    p = plan(TENANTS)
    addr = {(i.node, i.name): i.address for i in p.interfaces}
    assert addr[("a1", "eth0")] == addr[("b1", "eth0")]
    assert addr[("a2", "eth0")] == addr[("b2", "eth0")]
    assert addr[("nat", "eth0")] == addr[("nat", "eth1")]
    public = addr[("nat", "eth2")].rsplit(".", 1)[0]
    assert all(not a.startswith(public + ".") for (n, _i), a in addr.items()
               if n not in ("nat", "srv"))
    assert p.tenants == {"red": ["a1", "a2", "nat"], "blue": ["b1", "b2", "nat"]}


def test_a_shared_node_routes_each_tenant_by_a_table_of_its_own():
    p = plan(TENANTS)
    [tp] = p.tenancy
    assert tp.node == "nat"
    assert tp.tenants == {"red": {"id": 100, "ifaces": ["eth0"]},
                          "blue": {"id": 101, "ifaces": ["eth1"]}}
    tables = {}
    for r in p.routes:
        if r.node == "nat":
            tables.setdefault(r.table, []).append((r.dst, r.gateway, r.dev))
    assert None not in tables  # no main-table route of a tenant in the shared node
    assert sorted(d for d, _g, _v in tables[100]) == sorted(d for d, _g, _v in tables[101])
    assert {v for _d, _g, v in tables[100]} == {"eth0", "eth2"}
    assert {v for _d, _g, v in tables[101]} == {"eth1", "eth2"}
    # tenants' own nodes route in their main table, toward their own side of the router
    a1 = [r for r in p.routes if r.node == "a1"]
    assert a1 and all(r.table is None for r in a1)
    # the public server has no route into any tenant
    assert [r for r in p.routes if r.node == "srv"] == []


def test_graph_boxes_nodes_by_host():
    p = plan(THREE)
    m = graph.mermaid(p, TABLE.shapes())
    assert 'subgraph n_host_h3["host h3"]' in m and "shortbridge vni 1001" in m
    block = m.split('subgraph n_host_h3["host h3"]')[1].split("end")[0]
    assert "n_b[" in block and "n_c[" in block and "n_a[" not in block
    d = graph.dot(p, TABLE.shapes())
    assert 'subgraph "cluster_h2" {' in d and 'label="host h2";' in d
    assert "ovs 20 Mbit/s" in m and "ovs 20 Mbit/s" in d  # rates in the units people read


def test_rates_are_shown_in_the_units_people_read():
    from sfclab.spec.quantities import format_rate, parse_rate

    assert [format_rate(parse_rate(r)) for r in ("20mbit", "1gbit", "1500kbit", "64bit")] == [
        "20 Mbit/s", "1 Gbit/s", "1.5 Mbit/s", "64 bit/s"]


def test_labs_without_hosts_draw_as_before():
    p = build_plan(load_lab_text("name: x\nchain: {length: 3}\n", "l"))
    assert "subgraph" not in graph.mermaid(p, TABLE.shapes()) and p.hosts == []


def test_a_shared_nodes_tenancy_rules_zone_and_mark_each_tenant():
    from sfclab.realize.tenancy import ruleset

    [tp] = plan(TENANTS).tenancy
    text = ruleset(tp)
    assert 'iifname { "eth0" } ct original zone set 100' in text
    assert 'ct state new iifname { "eth1" } ct mark set ct mark and 0xfffff000 or 101' in text
    # the tenant field only: the proxy's bits of the mark are kept (sfclab.plan.marks)
    restore = "ct mark and 0xfff == 101 meta mark set meta mark and 0xfffff000 or 101"
    assert text.count(restore) == 2  # forwarded and the node's own packets
    assert "meta mark set ct mark\n" not in text


def test_the_mark_layout_is_the_one_in_sfc_h():
    """plan/marks.py and include/sfc.h name the same bits, and the two owners' fields are
    disjoint and cover the word."""
    import re
    from pathlib import Path

    from sfclab.plan import marks

    header = (Path(__file__).resolve().parents[2] / "include" / "sfc.h").read_text()
    c = {k: int(v, 0) for k, v in re.findall(r"#define SFC_MARK_(\w+) (0x[0-9a-f]+|\d+)u?",
                                              header)}
    assert c == {"PROXY_MASK": marks.PROXY_MASK, "TAG_MASK": marks.TAG_MASK, "TAG": marks.TAG,
                 "ID_SHIFT": marks.ID_SHIFT, "ID_MASK": marks.ID_MASK,
                 "TENANT_MASK": marks.TENANT_MASK}
    assert marks.PROXY_MASK & marks.TENANT_MASK == 0
    assert marks.PROXY_MASK | marks.TENANT_MASK == 0xFFFFFFFF
    assert marks.TAG_MASK | (marks.ID_MASK << marks.ID_SHIFT) == marks.PROXY_MASK


def test_inspect_text_shows_hosts_links_and_tenants():
    from sfclab.cli.lab import _inspect_text
    from sfclab.realize.hosts import inspect_links

    p = plan(TENANTS)
    d = {"name": "t", "status": "up", "nodes": {},
         "underlay": {"netns": p.underlay.netns, "subnet": p.underlay.subnet,
                      "mtu": p.underlay.mtu, "mtu_note": p.underlay.mtu_note},
         "hosts": {h.name: {"context": h.netns, "underlay": h.address, "cpus": h.cpus,
                            "memory": h.memory, "nodes": h.nodes} for h in p.hosts},
         "host_links": inspect_links(p), "tenants": p.tenants}
    text = _inspect_text(d)
    assert "host h2: context sfclab:t:@h2, underlay 198.19.255.2/24" in text
    assert "link 0: a1@h1 - a2@h2 bridge mtu 1450 vni 1000 tenant red" in text
    assert "tenant blue: b1, b2, nat" in text


def test_chain_label_room_is_carried_by_the_tunnels():
    p = plan("""
        name: c
        hosts: {h1: {}, h2: {}}
        nodes:
          src: {kind: host}
          fw: {kind: firewall, rules: [], host: h2}
          dst: {kind: host, host: h2}
        links:
          - endpoints: [src, fw]
          - endpoints: [fw, dst]
        chains:
          web: {classifiers: [{ingress: src, proto: tcp}], functions: [fw], egress: dst}
    """)
    [hl] = p.host_links
    assert hl.mtu == max(i.mtu for i in p.interfaces if i.link == 0) > 1450
    assert p.underlay.mtu == hl.mtu + 50 and "label room" in p.underlay.mtu_note


def test_shortbridge_nodes_keep_their_offloads_and_the_earlier_form_is_an_attach_kind():
    """``shortbridge`` ends the tunnel in eBPF, which marks IP frames as UDP tunnel packets (the
    kernel cuts GSO frames and finishes partial checksums): the nodes' interfaces keep their
    offloads; ``shortbridge-vxlandev`` (the kernel VXLAN device form) is accepted and planned
    with the same VNI and ends."""
    p = plan(THREE)
    assert all(i.offloads == {} for i in p.interfaces if i.link == 1)
    q = plan(THREE.replace("attach: shortbridge", "attach: shortbridge-vxlandev"))
    hl = {h.link: h for h in q.host_links}
    assert (hl[1].attach, hl[1].vni, hl[1].ends[0].vxlan) == ("shortbridge-vxlandev", 1001, "vx1")


SHARED_CHAIN = """
name: sc
tenants:
  t1: {nodes: [vm1, router]}
  t2: {nodes: [vm2, dpi, router]}
  t3: {nodes: [vm3, dpi, router]}
nodes:
  vm1: {kind: host}
  vm2: {kind: host}
  vm3: {kind: host}
  dpi: {kind: router}
  fw: {kind: router}
  ts: {kind: router}
  router: {kind: router}
  dst: {kind: host}
links:
  - {endpoints: [{node: vm1, address: 198.18.9.1/24}, {node: router, address: 198.18.9.2/24}]}
  - {endpoints: [vm2, dpi]}
  - {endpoints: [vm3, dpi]}
  - {endpoints: [dpi, fw]}
  - {endpoints: [fw, ts]}
  - {endpoints: [ts, router]}
  - {endpoints: [router, dst]}
"""


def test_a_public_chain_between_shared_nodes_routes_replies_back_to_the_tenants():
    """T2 and T3 (identical address plans) reach the router through the public chain
    dpi -> fw -> ts: fw must route their subnet back toward dpi (TCP needs replies), while
    the public host dst still has no route into any tenant."""
    p = plan(SHARED_CHAIN)
    vm2 = next(i for i in p.interfaces_of("vm2") if i.address)
    tenant_net = str(ipaddress.ip_interface(vm2.address).network)
    fw = [r for r in p.routes if r.node == "fw" and r.dst == tenant_net]
    dpi_ip = {i.address.split("/")[0] for i in p.interfaces_of("dpi") if i.address}
    assert len(fw) == 1 and fw[0].gateway in dpi_ip and fw[0].table is None
    assert not [r for r in p.routes if r.node == "dst" and r.dst == tenant_net]


def test_more_tenants_than_the_mark_holds_are_refused_before_addressing():
    import pytest

    from sfclab.errors import SpecError
    from sfclab.plan import marks
    from sfclab.plan.tenancy import TABLE_BASE

    n = marks.TENANT_MASK - TABLE_BASE + 2
    nodes = "".join(f"  h{i}: {{kind: host, tenant: t{i}}}\n" for i in range(n))
    with pytest.raises(SpecError) as e:
        plan(f"name: x\nnodes:\n{nodes}links: []\n")
    assert e.value.place == "tenants" and f"at most {n - 1}" in e.value.message
