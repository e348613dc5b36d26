"""The lab of ``bench/bench_sfc_hops.py`` (``src - r1..r8 - f - dst``, and its one-router twin
that ``bench/bench_hop_cost.py`` sets beside it) builds and steers: with
labels, every router and the function pop their labels in XDP attached in native (driver) mode
and the routers' IP stacks forward none of the datagrams; the same lab routed forwards each of
them in every router's IP stack (which shows the check can tell the two apart).  No speed goal:
the bench measures."""

from __future__ import annotations

import sys
from types import ModuleType

from sfclab.api import Lab

from .labtools import bench_module
from .test_sfc import node_counters, running

N = 200


def bench() -> ModuleType:
    return bench_module("bench_sfc_hops")


#: N datagrams from port 40000, a millisecond apart (no answer awaited)
SEND = ("import socket, sys, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.bind(('0.0.0.0', 40000))\n"
        "for _ in range(int(sys.argv[3])):\n"
        "    s.sendto(b'sfclab hop', (sys.argv[1], int(sys.argv[2])))\n"
        "    time.sleep(0.001)\n")


def snmp(lab: Lab, node: str, proto: str, field: str) -> int:
    """One counter of ``/proc/net/snmp`` in the node's namespace (``Ip`` ``ForwDatagrams``: what
    its IP stack forwarded; ``Udp`` ``NoPorts``: datagrams that arrived for no socket)."""
    lines = [ln.split() for ln in lab.exec(node, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if ln.startswith(proto + ":")]
    return int(lines[1][lines[0].index(field)])


def forwarded(lab: Lab, node: str) -> int:
    return snmp(lab, node, "Ip", "ForwDatagrams")


def carry_to_dst(lab: Lab, port: int) -> None:
    """Send N datagrams src -> dst to ``port``, to no socket: dst counts them as ``NoPorts``
    (its ICMP answers are rate-limited to a few a second, so almost nothing comes back)."""
    got = snmp(lab, "dst", "Udp", "NoPorts")
    lab.exec("src", [sys.executable, "-c", SEND, str(lab.address("dst")), str(port), str(N)])
    assert snmp(lab, "dst", "Udp", "NoPorts") - got == N, "dst missed datagrams"


def carry(lab: Lab, b: ModuleType) -> dict[str, int]:
    """N datagrams src -> dst on the classified port (:func:`carry_to_dst`); router ->
    datagrams its IP stack forwarded meanwhile."""
    before = {r: forwarded(lab, r) for r in b.ROUTERS}
    carry_to_dst(lab, b.measure.BASE_PORT)
    return {r: forwarded(lab, r) - before[r] for r in b.ROUTERS}


def test_bench_lab_steers_every_hop_in_native_xdp() -> None:
    """Every interface where labels arrive (each router's and f's toward src) runs the
    forwarder in native XDP, none in generic mode; dst, which receives plain IPv4 from f's
    proxy, runs no XDP program (so a veth there copies no socket buffer to run one)."""
    b = bench()
    with running(b.lab_dict(True)) as lab:
        modes = b.xdp_modes(lab, [*b.ROUTERS, "f", "dst"])
        assert all(modes[n]["eth0"] == "native" for n in [*b.ROUTERS, "f"]), modes
        assert not any(m == "generic" for ifs in modes.values() for m in ifs.values()), modes
        assert modes["dst"] == {"eth0": "none"}, modes
        before = node_counters(lab)
        by_stack = carry(lab, b)
        after = node_counters(lab)
        popped = {n: after[n]["popped"] - before[n]["popped"] for n in [*b.ROUTERS, "f"]}
        # each router pops its one label, f its proxy and its forward label
        assert all(popped[r] >= N for r in b.ROUTERS) and popped["f"] >= 2 * N, popped
        assert all(v < N // 10 for v in by_stack.values()), by_stack


def test_bench_lab_routed_forwards_in_the_ip_stack() -> None:
    b = bench()
    with running(b.lab_dict(False)) as lab:
        assert all(v >= N for v in carry(lab, b).values())


def test_bench_lab_of_one_router_steers_too() -> None:
    """``bench_hop_cost``'s short chain (``src - r1 - f - dst``): r1 pops its label in native
    XDP and its IP stack forwards none of the datagrams, f its proxy and forward labels."""
    b = bench()
    with running(b.lab_dict(True, routers=1)) as lab:
        assert sorted(lab.spec.nodes) == ["dst", "f", "r1", "src"]
        modes = b.xdp_modes(lab, ["r1", "f"])
        assert modes["r1"]["eth0"] == modes["f"]["eth0"] == "native", modes
        before, fwd = node_counters(lab), forwarded(lab, "r1")
        carry_to_dst(lab, b.measure.BASE_PORT)
        after = node_counters(lab)
        assert after["r1"]["popped"] - before["r1"]["popped"] >= N
        assert after["f"]["popped"] - before["f"]["popped"] >= 2 * N
        assert forwarded(lab, "r1") - fwd < N // 10
