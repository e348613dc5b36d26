"""The labs of ``bench/bench_path_kinds.py`` build and carry the bench's traffic: UDP datagrams
from src to dst on the classified port arrive, and on the chained kinds every function takes
them off its label stack (kernel functions by the proxy, bpf-firewalls in their own XDP
program, attached in native mode).  No speed goal: the bench measures."""

from __future__ import annotations

from types import ModuleType

import pytest

from .labtools import bench_module
from .test_sfc import node_counters, running
from .test_sfc_hops import N, carry_to_dst


def bench() -> ModuleType:
    return bench_module("bench_path_kinds")


#: the userspace datapath is ovs-vswitchd's own thread, one daemon for every lab on the machine,
#: whose main thread also reconfigures for other tests' labs adding and removing bridges: CI lost
#: 12, then 83 of the 200 datagrams sent a millisecond apart, with no backlog drop (my reading:
#: the daemon busy for the others, not proven), so its count is the machine's load as much as
#: the lab's, and it runs with nothing beside it
OVS_ALONE = pytest.param("ovs-userspace", marks=pytest.mark.serial)


@pytest.mark.parametrize("kind", ["routed-veth", "kernel-fn", "linux-bridge", OVS_ALONE,
                                  "shortbridge", "tunnel-bridge", "tunnel-direct"])
def test_each_unsteered_kind_carries_the_traffic(kind: str) -> None:
    b = bench()
    with running(b.lab_dict(kind)) as lab:
        carry_to_dst(lab, b.measure.BASE_PORT)


@pytest.mark.parametrize("kind, program", [("labels-kernel-fn", "sfc_forward"),
                                           ("labels-ebpf-fn", "sfc_fw")])
def test_each_chained_kind_steers_through_its_three_functions(kind: str, program: str) -> None:
    b = bench()
    with running(b.lab_dict(kind)) as lab:
        before = node_counters(lab)
        carry_to_dst(lab, b.measure.BASE_PORT)
        after = node_counters(lab)
        fns = ["f1", "f2", "f3"]
        assert after["src"]["classified"] - before["src"]["classified"] >= N
        # each function pops its proxy and its forward label of every datagram
        assert all(after[f]["popped"] - before[f]["popped"] >= 2 * N for f in fns), after
        for f in fns:
            link = lab.exec(f, ["ip", "-d", "-j", "link", "show", "dev", "eth0"]).stdout
            assert program in link and '"mode":1' in link.replace(" ", ""), (f, link)
