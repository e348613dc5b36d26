"""Failover keeps flows where they are (issue 27, item 3): a NAT with three instances carries
60 UDP flows; one instance dies (its namespace goes); the flows of the two others keep their
instance -- their connection-tracking entries stay as they were, with the same translated
port, and their counters keep growing there -- and only the dead instance's flows move."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.kernel import netns
from sfclab.live import request
from sfclab.live.chains import conntrack
from sfclab.live.ops import add as chain_add

from .test_chain_ops import _events, _wait, base_lab, chain_file, counters, running

FLOWS = 60
SPORT = 31000
DPORT = 5005

#: sends ``n`` datagrams on each of FLOWS sockets (source ports SPORT...), one flow each
SENDER = f"""
import socket, sys
dst, n = sys.argv[1], int(sys.argv[2])
socks = []
for k in range({FLOWS}):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", {SPORT} + k))
    socks.append(s)
for _ in range(n):
    for s in socks:
        s.sendto(b"x" * 32, (dst, {DPORT}))
"""


def send_all(lab, n: int) -> None:
    subprocess.run(["ip", "netns", "exec", lab.netns("src"), sys.executable, "-c", SENDER,
                    str(lab.address("dst")), str(n)], check=True, timeout=60)


def flows_in(ns: str) -> dict[int, tuple[str, str]]:
    """Source port -> (translated source address, port) of the tracked flows to DPORT."""
    out = {}
    for e in conntrack.dump(ns):
        if e.proto == "udp" and e.orig.get("dport") == str(DPORT):
            sport = int(e.orig["sport"])
            if SPORT <= sport < SPORT + FLOWS:
                out[sport] = (e.reply["dst"], e.reply["dport"])
    return out


def where(lab, names: list[str]) -> dict[str, dict[int, tuple[str, str]]]:
    return {n: flows_in(lab.netns(n)) for n in names if netns.exists(lab.netns(n))}


@pytest.mark.serial  # counts what the machine's load changes
def test_an_instance_dies_and_only_its_flows_move(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        body = {"name": "natted", "attach": "r1", "symmetric": True,
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": DPORT}],
                "egress": "dst",
                "functions": [{"name": "nat", "kind": "nat", "instances": 3}]}
        got = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert got["watcher"]
        lab.plan = None
        names = ["nat-1", "nat-2", "nat-3"]
        send_all(lab, 3)
        before = where(lab, names)
        owner = {sport: n for n, fl in before.items() for sport in fl}
        assert len(owner) == FLOWS, before  # every flow tracked by exactly one instance
        assert sum(len(fl) for fl in before.values()) == FLOWS
        assert all(len(before[n]) >= 5 for n in names), {n: len(v) for n, v in before.items()}
        # nat-2 dies: its namespace goes, the watcher takes it out
        assert netns.delete(lab.netns("nat-2"))
        _wait(lambda: bool(_events(lab, "failover")))
        ev = _events(lab, "failover")[-1]
        assert ev["instances_out"] == ["nat-2"] and ev["paths_left"] == 2
        c0 = counters(lab.name)
        send_all(lab, 3)
        c1 = counters(lab.name)
        after = where(lab, ["nat-1", "nat-3"])
        for n in ("nat-1", "nat-3"):
            # the survivors' flows: still tracked there with the same translation, and no
            # flow of theirs went to the other survivor
            mine = {s: t for s, t in before[n].items()}
            assert {s: after[n].get(s) for s in mine} == mine, n
            other = "nat-3" if n == "nat-1" else "nat-1"
            assert not set(mine) & set(after[other]), (n, sorted(set(mine) & set(after[other])))
            # and their counters kept growing on that instance: at least their own packets
            assert c1[n]["proxy_in"] - c0[n]["proxy_in"] >= 3 * len(mine), n
        # the dead one's flows moved to the survivors, every one of them
        moved = set(before["nat-2"])
        landed = {s for n in ("nat-1", "nat-3") for s in after[n] if s in moved}
        assert landed == moved
        # only its slots were written: about its third of the table
        assert 0 < ev["slots_moved"] <= 0.4 * 1021, ev
