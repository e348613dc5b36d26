"""Labs of ``ip: 4 | 6 | dual``: the IPv6 address model, routes, the plan's look-ups, the
functions' IPv6 rule text and every bad ``ip:`` or IPv6 address (no root needed)."""

from __future__ import annotations

import textwrap
from ipaddress import IPv4Address, IPv6Address

import pytest

from sfclab.errors import SpecError
from sfclab.functions import rules as R
from sfclab.functions.base import FunctionContext, Interface
from sfclab.functions.bpf_pipeline import FAMILIES, STAGES, BpfPipeline
from sfclab.functions.firewall import FirewallParams
from sfclab.functions.nat import Nat, NatParams
from sfclab.plan.build import build_plan
from sfclab.plan.model import Plan
from sfclab.plan.paths import hops
from sfclab.realize.kinds import load_lab_text
from sfclab.realize.nodes.namespace import lab_sysctls

CHAIN = """
    name: six
    {ip}
    nodes:
      src: {{kind: host}}
      r1: {{kind: router}}
      dst: {{kind: host}}
    links:
      - endpoints: [src, r1]
      - endpoints: [r1, dst]
"""


def lab(text: str):
    return load_lab_text(textwrap.dedent(text), "lab.yaml")


def plan_of(ip: str) -> Plan:
    return build_plan(lab(CHAIN.format(ip=ip)))


def bad(text: str) -> SpecError:
    with pytest.raises(SpecError) as ei:
        lab(text)
    assert ei.value.file == "lab.yaml" and ei.value.line is not None
    return ei.value


def test_default_lab_is_ipv4_and_its_plan_json_has_no_ipv6_keys():
    p = plan_of("")
    assert p.ip == "4" and p.families == (4,)
    d = p.to_dict()
    assert "ip" not in d and all("address6" not in i for i in d["interfaces"])
    assert all("subnet6" not in s for s in d["segments"])
    assert [i.address for i in p.interfaces] == ["198.18.0.1/24", "198.18.0.2/24",
                                                 "198.18.1.1/24", "198.18.1.2/24"]
    assert "ip" not in lab(CHAIN.format(ip="")).to_dict()


def test_dual_stack_addresses_routes_and_lookups():
    p = plan_of("ip: dual")
    assert p.families == (4, 6)
    assert [(i.node, i.address, i.address6) for i in p.interfaces] == [
        ("src", "198.18.0.1/24", "2001:2::1/64"), ("r1", "198.18.0.2/24", "2001:2::2/64"),
        ("r1", "198.18.1.1/24", "2001:2:0:1::1/64"), ("dst", "198.18.1.2/24", "2001:2:0:1::2/64")]
    assert [s.subnet6 for s in p.segments] == ["2001:2::/64", "2001:2:0:1::/64"]
    routes = {(r.node, r.dst, r.gateway) for r in p.routes}
    assert routes == {("src", "0.0.0.0/0", "198.18.0.2"), ("dst", "0.0.0.0/0", "198.18.1.1"),
                      ("src", "::/0", "2001:2::2"), ("dst", "::/0", "2001:2:0:1::1")}
    assert p.address_of("dst", 6) == IPv6Address("2001:2:0:1::2")
    assert p.address_of("dst") == IPv4Address("198.18.1.2")
    assert hops(p, "src", IPv6Address("2001:2:0:1::2")) == ["src", "r1", "dst"]
    again = Plan.from_dict(p.to_dict())
    assert again.ip == "dual" and again.interfaces == p.interfaces


def test_ipv6_only_lab_has_no_ipv4():
    p = plan_of("ip: 6")
    assert all(i.address is None for i in p.interfaces)
    assert all(s.subnet is None for s in p.segments)
    assert {r.dst for r in p.routes} == {"::/0"}
    with pytest.raises(KeyError):
        p.address_of("dst")
    assert str(p.address_of("dst", 6)) == "2001:2:0:1::2"


def test_ipv6_pool_prefix_and_explicit_addresses():
    p = build_plan(lab("""
        name: six
        ip: 6
        addressing: {pool6: "2001:2:0:100::/56", prefix6: 127}
        nodes: {a: {kind: host}, r: {kind: router}, b: {kind: host}}
        links:
          - endpoints: [a, {node: r, address6: "2001:2:0:100::1/127"}]
          - endpoints: [r, b]
    """))
    assert [i.address6 for i in p.interfaces] == ["2001:2:0:100::/127", "2001:2:0:100::1/127",
                                                  "2001:2:0:100::2/127", "2001:2:0:100::3/127"]


def test_lab_sysctls_turn_ipv6_on_only_when_asked():
    v4 = lab_sysctls((4,), True)
    assert v4["net.ipv6.conf.all.disable_ipv6"] == "1"
    assert "net.ipv6.conf.all.forwarding" not in v4
    v6 = lab_sysctls((6,), True)
    assert v6["net.ipv6.conf.all.disable_ipv6"] == "0"
    assert v6["net.ipv6.conf.default.accept_dad"] == "0"
    assert v6["net.ipv6.conf.all.forwarding"] == "1"
    assert "net.ipv6.conf.all.forwarding" not in lab_sysctls((4, 6), False)


@pytest.mark.parametrize("ip,words", [
    ("ip: 5", "ip: 4, 6 or dual"),
    ("ip: true", "ip: 4, 6 or dual"),
    ("ip: ipv6", "ip: 4, 6 or dual"),
])
def test_bad_ip_values(ip, words):
    e = bad(CHAIN.format(ip=ip))
    assert words in str(e) and e.line == 3


@pytest.mark.parametrize("endpoint,words", [
    ('{node: src, address6: "2001:2:0:9::1/64"}', "an IPv6 address in a lab of 'ip: 4'"),
])
def test_ipv6_address_in_an_ipv4_lab(endpoint, words):
    e = bad(f"""
        name: six
        nodes: {{src: {{kind: host}}, dst: {{kind: host}}}}
        links:
          - endpoints: [{endpoint}, dst]
    """)
    assert words in str(e) and e.place == "links[0].endpoints[0].address6"


@pytest.mark.parametrize("a,b,words", [
    ('"2001:2:0:9::1/64"', '"2001:2:0:8::2/64"', "expected an address in 2001:2:0:9::/64"),
    ('"2001:2:0:9::1/64"', '"2001:2:0:9::1/64"', "is already given at"),
    ('"2001:2:0:9::/64"', "null", "subnet-router anycast"),
    ('"fe80::1/64"', "null", "link-local"),
    ('"ff02::1/64"', "null", "multicast"),
    ('"::ffff:198.18.0.1/120"', "null", "reserved"),
    ('"2001:2:0:9::1"', "null", "with its prefix length"),
    ("198.18.0.1/24", "null", "IPv6"),
    ('"2001:2::1/8"', "null", "between /16 and /127"),
])
def test_bad_ipv6_endpoint_addresses(a, b, words):
    e = bad(f"""
        name: six
        ip: 6
        nodes: {{x: {{kind: host}}, y: {{kind: host}}}}
        links:
          - endpoints: [{{node: x, address6: {a}}}, {{node: y, address6: {b}}}]
    """)
    assert words in str(e) and e.place.startswith("links[0].endpoints"), str(e)


def test_ipv4_address_in_an_ipv6_lab():
    e = bad("""
        name: six
        ip: 6
        nodes: {x: {kind: host}, y: {kind: host}}
        links:
          - endpoints: [{node: x, address: 198.18.0.1/24}, y]
    """)
    assert "an IPv4 address in a lab of 'ip: 6'" in str(e)
    assert e.place == "links[0].endpoints[0].address"


PIPELINE = ", functions: [{kind: bpf-firewall}, {kind: bpf-nat, outside: y}]"
PIPELINE_LAB = """
    name: six
    ip: {ip}
    nodes: {{x: {{kind: host}}, f: {{kind: {kind}{keys}}}, y: {{kind: host}}}}
    links: [{{endpoints: [x, f]}}, {{endpoints: [f, y]}}]
    chains: {{c: {{classifiers: [{{ingress: x, family: {family}}}], functions: [f], egress: y}}}}
"""


def test_a_pipeline_carries_what_all_its_stages_carry():
    assert BpfPipeline.families == FAMILIES == (4, 6)
    assert all(set(FAMILIES) <= set(cls.families) for cls, _ in STAGES.values())
    for ip in ("4", "6", "dual"):
        p = build_plan(lab(PIPELINE_LAB.format(ip=ip, kind="bpf-pipeline", keys=PIPELINE,
                                               family="ipv4" if ip == "4" else "any")))
        assert p.families == {"4": (4,), "6": (6,), "dual": (4, 6)}[ip]


def test_a_kind_of_ipv4_only_is_refused_in_ipv6_labs(monkeypatch):
    # no kind carries IPv4 only now; the check stays for one that would
    monkeypatch.setattr(BpfPipeline, "families", (4,))
    for ip in ("6", "dual"):
        e = bad(PIPELINE_LAB.format(ip=ip, kind="bpf-pipeline", keys=PIPELINE, family="any"))
        assert "a bpf-pipeline carries IPv4 only" in str(e) and e.place == "nodes.f.kind"


def test_pool6_too_small():
    with pytest.raises(SpecError) as ei:
        build_plan(lab("""
            name: six
            ip: 6
            addressing: {pool6: "2001:2::/63", prefix6: 64}
            nodes: {a: {kind: host}, r: {kind: router}, s: {kind: router}, b: {kind: host}}
            links: [{endpoints: [a, r]}, {endpoints: [r, s]}, {endpoints: [s, b]}]
        """))
    assert "addressing.prefix6" in str(ei.value)


@pytest.mark.parametrize("kind,keys", [("bpf-firewall", ""), ("bpf-nat", ", outside: y"),
                                      ("bpf-balancer", ", vip: '2001:2::9', backends: "
                                       "[{address: '2001:2:0:1::2'}]")])
def test_the_ebpf_functions_are_taken_in_ipv6_labs(kind, keys):
    """Their programs read IPv6 too (bpf/fw.bpf.c, nat.bpf.c, balancer.bpf.c): no refusal at
    the node's kind in a lab of ``ip: 6`` or ``dual``."""
    for ip in ("6", "dual"):
        doc = lab(f"""
            name: six
            ip: {ip}
            nodes: {{x: {{kind: host}}, f: {{kind: {kind}{keys}}}, y: {{kind: host}}}}
            links: [{{endpoints: [x, f]}}, {{endpoints: [f, y]}}]
        """)
        assert doc.nodes["f"].kind == kind


def test_firewall_rules_in_both_families():
    p = FirewallParams.model_validate({"rules": [
        {"action": "drop", "proto": "tcp", "dst": "2001:2::/48", "dport": 9002},
        {"action": "accept", "proto": "icmpv6", "src": "2001:2:0:1::1"}]})
    text = R.nft_ruleset(p.rules, None, use_set=False, policy="accept", hooks=["forward"])
    assert 'meta l4proto tcp ip6 daddr 2001:2::/48 tcp dport 9002 counter drop' in text
    assert "meta l4proto icmpv6 ip6 saddr 2001:2:0:1::1/128 counter accept" in text
    for rule, words in (({"action": "drop", "src": "198.18.0.0/24", "dst": "2001:2::/48"},
                         "src and dst of one family"),
                        ({"action": "drop", "proto": "icmp", "dst": "2001:2::/48"},
                         "expected icmpv6")):
        with pytest.raises(ValueError, match=words):
            FirewallParams.model_validate({"rules": [rule]})
    with pytest.raises(ValueError, match="filters IPv4 only"):
        FirewallParams.model_validate({"backend": "iptables", "rules": [
            {"action": "drop", "dst": "2001:2::/48"}]})


def test_nat66_ruleset(tmp_path):
    ifaces = [Interface("eth0", "fw", None, None), Interface("eth1", "dst", None, None)]
    ctx = FunctionContext("six", "nat", "ns", ifaces, tmp_path, families=(4, 6))
    params = NatParams.model_validate({"outside": "dst", "forward": [
        {"port": 8080, "to": "198.18.1.2:80"}, {"port": 8443, "to": "[2001:2:0:1::2]:443"}]})
    text = Nat(ctx, params).ruleset()
    ip4 = text[:text.index("table ip6")]
    ip6 = text[text.index("table ip6"):]
    assert 'dnat to 198.18.1.2:80 comment "sfclab forward 0"' in ip4 and "2001" not in ip4
    assert 'dnat to [2001:2:0:1::2]:443 comment "sfclab forward 1"' in ip6
    assert 'oifname "eth1" counter masquerade' in ip6
    only4 = Nat(FunctionContext("six", "nat", "ns", ifaces, tmp_path), params).ruleset()
    assert "ip6" not in only4
    for to in ("2001:2::1]:80", "[2001:2::1]80", "[198.18.0.1]:80", "[2001:2::1]:0"):
        with pytest.raises(ValueError):
            NatParams.model_validate({"outside": "dst", "forward": [{"port": 1, "to": to}]})


def test_a_classifier_of_a_family_the_lab_does_not_carry_is_refused_at_its_place():
    """An IPv6-only lab takes chains whose classifiers are of family ipv6 (or any); one of
    family ipv4 -- the default without an IPv6 prefix -- would match nothing and is refused,
    and so is one of family ipv6 in an IPv4 lab."""
    six = """
        name: six
        ip: 6
        nodes: {a: {kind: host}, f: {kind: firewall}, b: {kind: host}}
        links: [{endpoints: [a, f]}, {endpoints: [f, b]}]
        chains:
          c1: {classifiers: [%s], functions: [f], egress: b}
    """
    e = bad(six % "{ingress: a, proto: tcp}")
    assert e.place == "chains.c1.classifiers[0].family", e
    assert "family ipv4 in a lab without IPv4 (ip: 6) matches nothing" in str(e)
    for ok in ("{ingress: a, proto: tcp, family: ipv6}", "{ingress: a, family: any}",
               "{ingress: a, dst: '2001:2::/48'}"):
        p = build_plan(lab(six % ok))
        assert p.steering is not None and p.steering.directions[0].chain == "c1"
    e = bad(six.replace("ip: 6", "ip: 4") % "{ingress: a, proto: udp, family: ipv6}")
    assert e.place == "chains.c1.classifiers[0].family" and "(ip: 4)" in str(e), e
    lab("""
        name: four
        nodes: {a: {kind: host}, f: {kind: firewall}, b: {kind: host}}
        links: [{endpoints: [a, f]}, {endpoints: [f, b]}]
        chains:
          c1: {classifiers: [{ingress: a, proto: tcp}], functions: [f], egress: b}
    """)  # the same chain in an IPv4 lab is valid


def test_graph_and_topology_show_ipv6_addresses():
    from sfclab.plan import graph
    from sfclab.realize.kinds import TABLE
    from sfclab.web.topology import topology

    p = plan_of("ip: dual")
    text = graph.mermaid(p, TABLE.shapes())
    assert "198.18.0.1/24" in text and "2001:2::1/64" in text
    links = topology(p.to_dict())["links"]
    assert {"node": "src", "ifname": "eth0", "netns": p.netns_of("src"),
            "address": "198.18.0.1/24", "address6": "2001:2::1/64"} in links[0]["interfaces"]


def test_added_instances_get_an_ipv6_link_and_default_route_in_a_dual_lab():
    """chain add in a lab of ip: dual: each instance a /64 from the top of 2001:2::/48 (clear
    of the lab's), the attach node ::1, the instance ::2 and a ::/0 route via ::1; IPv4 labs
    none; the change plan keeps the lab's families (its namespaces get IPv6 on)."""
    from sfclab.plan.chainadd import Addition, NewNode, apply, change_of, wire6
    from sfclab.plan.chainpaths import free_subnets6

    def new(k: int) -> NewNode:
        return NewNode(f"f-{k}", f"sfclab:six:f-{k}", "router", {}, "f", 0.1, 0, "local", "r1",
                       f"sfx{k}", "eth0", "", f"198.19.255.{254 - 4 * k}/30",
                       f"198.19.255.{253 - 4 * k}/30")

    plan = plan_of("ip: dual")
    nodes = [new(1), new(2)]
    wire6(plan, nodes)
    assert [(n.subnet6, n.gateway6, n.address6) for n in nodes] == [
        ("2001:2:0:ffff::/64", "2001:2:0:ffff::1/64", "2001:2:0:ffff::2/64"),
        ("2001:2:0:fffe::/64", "2001:2:0:fffe::1/64", "2001:2:0:fffe::2/64")]
    apply(plan, Addition("c", "r1", nodes=nodes))
    assert str(free_subnets6(plan, 1)[0]) == "2001:2:0:fffd::/64"
    assert [i.address6 for i in plan.interfaces_of("f-1")] == ["2001:2:0:ffff::2/64"]
    assert "2001:2:0:ffff::1/64" in [i.address6 for i in plan.interfaces_of("r1")]
    routes = [(r.dst, r.gateway) for r in plan.routes if r.node == "f-1"]
    assert ("::/0", "2001:2:0:ffff::1") in routes
    assert change_of(plan, {"f-1"}).families == (4, 6)
    four, alone = plan_of(""), new(3)
    wire6(four, [alone])
    assert (alone.subnet6, alone.address6, alone.gateway6) == ("", "", "")
    apply(four, Addition("c", "r1", nodes=[alone]))
    assert all(i.address6 is None for i in four.interfaces)
    assert all(r.dst != "::/0" for r in four.routes)


def test_the_flow_hash_folds_an_ipv6_address_as_the_classifier_does():
    """IPv4 addresses hash as before; an IPv6 one as the xor of its four words."""
    from sfclab.plan import flowhash

    a = IPv6Address("2001:2:0:1::2")
    words = [int.from_bytes(a.packed[i:i + 4], "little") for i in (0, 4, 8, 12)]
    assert flowhash._be32(a) == words[0] ^ words[1] ^ words[2] ^ words[3]
    assert flowhash._be32(IPv4Address("198.18.0.1")) == \
        int.from_bytes(IPv4Address("198.18.0.1").packed, "little")
    folded = IPv4Address(flowhash._be32(a).to_bytes(4, "little"))
    assert flowhash.flow_hash(a, a, 1, 2, 17, 0) == flowhash.flow_hash(folded, folded, 1, 2, 17, 0)
