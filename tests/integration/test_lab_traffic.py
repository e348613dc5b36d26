"""Real labs carry real traffic: ping and a short iperf3 TCP run end to end."""

from __future__ import annotations

from tests.integration.labtools import iperf3, nothing_left, ping


def check_end_to_end(lab, src="src", dst="dst"):
    dst_ip = str(lab.address(dst))
    assert ping(lab.netns(src), dst_ip).returncode == 0
    out = iperf3(lab.netns(src), lab.netns(dst), dst_ip)
    bps = out["end"]["sum_received"]["bits_per_second"]
    assert bps > 50e6, bps
    return bps


def test_five_namespace_routed_chain(running_lab):
    lab = running_lab({"chain": {"length": 5}})
    check_end_to_end(lab)
    info = lab.inspect()
    assert info["nodes"]["r2"]["forwarding"] is True
    assert info["nodes"]["src"]["forwarding"] is False
    name = lab.name
    lab.down()
    assert nothing_left(name)


def test_ovs_bridges_chained_by_patch_ports(running_lab):
    lab = running_lab({"chain": {"bridges": 3, "connect": "patch"}})
    check_end_to_end(lab)
    nodes = lab.inspect()["nodes"]
    for br in ("br1", "br2", "br3"):
        assert nodes[br]["present"]
        assert nodes[br]["datapath"] in ("netdev", "system")
    if nodes["br1"]["datapath"] == "netdev":
        assert "userspace" in nodes["br1"]["datapath_note"]
        src_if = nodes["src"]["interfaces"][0]
        assert src_if["offloads"]["tx-checksum"] is False


def test_ovs_bridges_chained_by_veth(running_lab):
    lab = running_lab({"chain": {"bridges": 2, "connect": "veth", "port": "veth"}})
    check_end_to_end(lab)


def test_namespace_chain_through_ovs_internal_ports(running_lab):
    lab = running_lab({"chain": {"length": 3, "link": "ovs"}})
    check_end_to_end(lab)


def test_linux_bridge_with_two_routers(running_lab):
    lab = running_lab({
        "nodes": {"src": {"kind": "host"}, "ra": {"kind": "router"}, "sw": {"kind": "linux-bridge"},
                  "rb": {"kind": "router"}, "dst": {"kind": "host"}},
        "links": [{"endpoints": ["src", "ra"]}, {"endpoints": ["ra", "sw"]},
                  {"endpoints": ["sw", "rb"]}, {"endpoints": ["rb", "dst"]}]})
    check_end_to_end(lab)
    sw = lab.inspect()["nodes"]["sw"]
    ports = [i for i in sw["interfaces"] if i["master"] == "br0"]
    assert len(ports) == 2


def test_mtu_offloads_and_explicit_addresses_are_applied(running_lab):
    lab = running_lab({
        "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"}},
        "links": [{"endpoints": [{"node": "src", "address": "198.19.4.10/24", "tso": False,
                                  "gro": False}, "dst:in0"], "mtu": 9000}]})
    nodes = lab.inspect()["nodes"]
    src_if = nodes["src"]["interfaces"][0]
    assert src_if["mtu"] == 9000 and src_if["addresses"] == ["198.19.4.10/24"]
    assert src_if["offloads"]["tso"] is False and src_if["offloads"]["gro"] is False
    assert nodes["dst"]["interfaces"][0]["name"] == "in0"
    assert nodes["dst"]["interfaces"][0]["addresses"] == ["198.19.4.1/24"]
    check_end_to_end(lab)


def test_two_labs_side_by_side(running_lab, lab_name):
    a = running_lab({"name": lab_name + "a", "chain": {"length": 3}})
    b = running_lab({"name": lab_name + "b", "chain": {"length": 3}})
    # same node names and (default) addresses, separate namespaces
    assert a.address("dst") == b.address("dst")
    assert a.netns("dst") != b.netns("dst")
    assert ping(a.netns("src"), str(a.address("dst"))).returncode == 0
    assert ping(b.netns("src"), str(b.address("dst"))).returncode == 0
