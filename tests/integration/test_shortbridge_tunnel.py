"""The shortbridge as the tunnel's own end (``attach: shortbridge`` across hosts): no VXLAN
device in the host contexts, eBPF programs at the port and the underlay interface; ping and
TCP, the planner's inner MTU, interworking with a kernel VXLAN device at the other end (the
wire format is VXLAN's), tenants with identical addresses apart, foreign VXLAN frames left to
the kernel, and nothing left after ``down``."""

from __future__ import annotations

import subprocess
import sys
from ipaddress import IPv4Interface

from sfclab.hosts.attach import shortbridge_binary, tunnel_mark
from sfclab.kernel import netns

from .labtools import iperf3, nothing_left, ping
from .test_hosts import counters, links_of, two_hosts


def tcx_programs(ns: str, ifname: str) -> list[str]:
    """Names of the programs at tcx ingress of ``ns``/``ifname``, in order (bpftool 7.1 does
    not list tcx: the loader does)."""
    return netns.run(ns, [str(shortbridge_binary()), "--netns", ns, "--show",
                          ifname]).stdout.split()


def end_of(plan, node: str):
    return next(e for e in plan.host_links[0].ends if e.node == node)


def host_of(plan, name: str):
    return next(h for h in plan.hosts if h.name == name)


def test_shortbridge_ends_the_tunnel_itself(running_lab, lab_name):
    """Ping and TCP across hosts; no VXLAN device anywhere, the programs at port and underlay."""
    lab = running_lab(two_hosts(lab_name, "shortbridge"))
    plan = lab.plan
    a, b = lab.netns("a"), lab.netns("b")
    assert ping(a, str(lab.address("b")), 3).returncode == 0
    out = iperf3(a, b, str(lab.address("b")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    hl = plan.host_links[0]
    assert hl.vni is not None and hl.mtu == 1450
    for e in hl.ends:
        kinds = {d.get("linkinfo", {}).get("info_kind") for d in links_of(e.netns).values()}
        assert "vxlan" not in kinds and "bridge" not in kinds
        assert "vxlan_encap" in tcx_programs(e.netns, e.port)
        ul = host_of(plan, e.host).underlay_if
        assert "vxlan_decap" in tcx_programs(e.netns, ul)
    # the frames crossed the underlay as VXLAN: its interfaces counted them
    h2 = host_of(plan, "h2")
    assert counters(h2.netns)[h2.underlay_if][0] > 1000
    # inspect reports both ends present (there is no tunnel device to look for)
    ends = lab.inspect()["host_links"][0]["ends"] if "host_links" in lab.inspect() else []
    assert all(x.get("present", True) for x in ends)


def test_a_tunnels_decapsulation_is_taken_off_only_with_its_labs_mark(running_lab, lab_name):
    """What ``down`` does on a real host's underlay interface (which outlives the lab), here on
    an emulated host's: the decapsulation is detached only when its VNI, addresses and the
    lab's mark all match; another lab's mark, or a missing mark, leaves it where it is."""
    lab = running_lab(two_hosts(lab_name, "shortbridge"))
    plan = lab.plan
    hl = plan.host_links[0]
    e = end_of(plan, "b")
    h2 = host_of(plan, e.host)
    tool = str(shortbridge_binary())

    def detach(*extra: str) -> subprocess.CompletedProcess:
        return netns.run(h2.netns, [tool, "--netns", h2.netns, "--detach", h2.underlay_if,
                                    "--vni", str(hl.vni), "--local", e.local, "--remote",
                                    e.remote, "--udp-port", str(plan.underlay.vxlan_port),
                                    *extra], check=False)

    assert "vxlan_decap" in tcx_programs(h2.netns, h2.underlay_if)
    assert detach().returncode == 2  # no mark: refused as bad input, nothing taken off
    assert detach("--owner", tunnel_mark("another", hl.vni)).returncode == 0
    assert detach("--owner", tunnel_mark(lab_name, hl.vni + 1)).returncode == 0
    assert "vxlan_decap" in tcx_programs(h2.netns, h2.underlay_if)
    assert ping(lab.netns("a"), str(lab.address("b")), 2).returncode == 0  # still carried
    assert detach("--owner", tunnel_mark(lab_name, hl.vni)).returncode == 0
    assert "vxlan_decap" not in tcx_programs(h2.netns, h2.underlay_if)


def test_the_planned_inner_mtu_passes_and_one_byte_more_does_not(running_lab, lab_name):
    lab = running_lab(two_hosts(lab_name, "shortbridge"))
    mtu = lab.plan.host_links[0].mtu
    a, dst = lab.netns("a"), str(lab.address("b"))

    def df_ping(size: int) -> subprocess.CompletedProcess:
        return netns.run(a, ["ping", "-M", "do", "-c", "2", "-i", "0.2", "-W", "2", "-s",
                             str(size), dst], check=False, timeout=20)

    assert df_ping(mtu - 28).returncode == 0  # 20 IPv4 + 8 ICMP: exactly the inner MTU
    big = df_ping(mtu - 27)
    assert big.returncode != 0 and "too long" in (big.stdout + big.stderr)
    # without DF the node fragments, as the kernel does: the fragments cross
    cp = netns.run(a, ["ping", "-c", "2", "-i", "0.2", "-W", "2", "-s", str(mtu + 100), dst],
                   check=False, timeout=20)
    assert cp.returncode == 0


def test_interworks_with_a_kernel_vxlan_device(running_lab, lab_name):
    """h1 keeps the shortbridge's own tunnel end; at h2 the test replaces it by a kernel VXLAN
    device joined to the port (what ``shortbridge-vxlandev`` makes): ping and TCP still pass
    both ways, so what the eBPF end writes and reads is VXLAN as the kernel speaks it."""
    lab = running_lab(two_hosts(lab_name, "shortbridge"))
    plan = lab.plan
    hl, h2 = plan.host_links[0], host_of(plan, "h2")
    e = end_of(plan, "b")
    tool = str(shortbridge_binary())
    for ifname in (e.port, h2.underlay_if):
        netns.run(h2.netns, [tool, "--netns", h2.netns, "--detach", ifname])
    assert tcx_programs(h2.netns, h2.underlay_if) == []
    a, b = lab.netns("a"), lab.netns("b")
    assert ping(a, str(lab.address("b")), 2).returncode != 0  # h2 has no tunnel end now
    netns.run(h2.netns, ["ip", "link", "add", "tvx", "type", "vxlan", "id", str(hl.vni),
                         "local", e.local, "remote", e.remote, "dstport",
                         str(plan.underlay.vxlan_port), "dev", h2.underlay_if, "nolearning"])
    netns.run(h2.netns, ["ip", "link", "set", "tvx", "mtu", str(hl.mtu), "up"])
    netns.run(h2.netns, [tool, "--netns", h2.netns, "tvx", e.port])
    netns.run(a, ["ip", "neigh", "flush", "dev", "eth0"])  # the failed resolution above
    assert ping(a, str(lab.address("b")), 3).returncode == 0
    out = iperf3(a, b, str(lab.address("b")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    out = iperf3(b, a, str(lab.address("a")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000


TWO_TENANTS = {
    "hosts": {"h1": {}, "h2": {}},
    "tenants": {"red": {"nodes": ["a1", "a2"]}, "blue": {"nodes": ["b1", "b2"]}},
    "nodes": {"a1": {"kind": "host"}, "a2": {"kind": "host", "host": "h2"},
              "b1": {"kind": "host"}, "b2": {"kind": "host", "host": "h2"}},
    "links": [{"endpoints": ["a1", "a2"], "attach": "shortbridge"},
              {"endpoints": ["b1", "b2"], "attach": "shortbridge"}],
}


def test_tenants_with_identical_addresses_exchange_nothing(running_lab, lab_name):
    """Two shortbridged tunnels between the same two hosts (same underlay addresses, VNIs
    apart) carrying identical address plans: each tenant's flood reaches its own peer only."""
    lab = running_lab({"name": lab_name, **TWO_TENANTS})
    assert lab.address("a2") == lab.address("b2")
    for me, other in ((["a1", "a2"], ["b1", "b2"]), (["b1", "b2"], ["a1", "a2"])):
        before = {n: counters(lab.netns(n)) for n in other}
        mine0 = counters(lab.netns(me[1]))["eth0"]
        cp = netns.run(lab.netns(me[0]), ["ping", "-f", "-q", "-c", "2000", "-w", "30",
                                          str(lab.address(me[1]))], check=False, timeout=60)
        assert " 2000 received" in cp.stdout, cp.stdout
        assert counters(lab.netns(me[1]))["eth0"][0] - mine0[0] >= 2000
        assert {n: counters(lab.netns(n)) for n in other} == before


SEND = """
import socket, struct, sys
src, dst, port, vni, mac = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
inner = bytes.fromhex(mac.replace(":", "")) + bytes.fromhex("020000000001") + b"\\x08\\x00"
inner += bytes(46)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
for _ in range(50):
    s.sendto(struct.pack("!II", 0x08000000, vni << 8) + inner, (dst, port))
"""


def test_foreign_vxlan_frames_are_left_to_the_kernel(running_lab, lab_name):
    """A VXLAN frame with another VNI, or from an address that is not the link's remote end,
    is passed untouched to the host context's kernel (which has no socket for it and drops it):
    the node sees none of it.  The same frame with the link's VNI from the link's remote end
    reaches the node (the check can fail)."""
    lab = running_lab(two_hosts(lab_name, "shortbridge"))
    plan = lab.plan
    hl, h1, h2 = plan.host_links[0], host_of(plan, "h1"), host_of(plan, "h2")
    e = end_of(plan, "b")
    mac = links_of(lab.netns("b"))["eth0"]["address"]
    ul1 = IPv4Interface(h1.address)
    stranger = str(list(ul1.network.hosts())[-2])
    netns.run(h1.netns, ["ip", "addr", "add", f"{stranger}/{ul1.network.prefixlen}", "dev",
                         h1.underlay_if])
    port = str(plan.underlay.vxlan_port)

    def send(src: str, vni: int) -> tuple[int, int]:
        b0, u0 = counters(lab.netns("b"))["eth0"][0], counters(h2.netns)[h2.underlay_if][0]
        netns.run(h1.netns, [sys.executable, "-c", SEND, src, e.local, port, str(vni), mac])
        return (counters(lab.netns("b"))["eth0"][0] - b0,
                counters(h2.netns)[h2.underlay_if][0] - u0)

    local1 = str(ul1.ip)
    assert hl.vni is not None
    node, underlay = send(local1, hl.vni + 1000)  # another VNI
    assert node == 0 and underlay >= 50
    node, underlay = send(stranger, hl.vni)  # an unknown remote
    assert node == 0 and underlay >= 50
    node, underlay = send(local1, hl.vni)  # the link's own: delivered
    assert node >= 50


def test_down_leaves_nothing(lab_name):
    from sfclab.api import Lab

    lab = Lab.from_dict(two_hosts(lab_name, "shortbridge")).up()
    try:
        assert ping(lab.netns("a"), str(lab.address("b")), 2).returncode == 0
    finally:
        lab.down()
    assert nothing_left(lab_name)
