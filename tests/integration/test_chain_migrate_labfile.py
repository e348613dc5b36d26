"""``chain migrate`` of a function of the lab file's own chains (issue 14): a NAT in line
between a router and a host, on emulated host h1, moved to h2 make-before-break under UDP at
10 kpps and a TCP connection: nothing lost, the connection goes on through the clone (its
connection-tracking state moved), the lab-file node stays as transit with its NAT rules gone,
the clone takes its place in chain ls, host ls and inspect, and ``down`` leaves nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sfclab.api import Lab
from sfclab.errors import LabError
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.state import LabState
from sfclab.live.ops import chains, hostops, migrate
from sfclab.live import record, request

from .labtools import leftovers, nothing_left
from .test_chain_ops import counters, migrate_under_udp_and_tcp, running

ROOT = Path(__file__).resolve().parents[2]


def natted_lab(name: str) -> dict[str, Any]:
    """src - r1 - nat - dst on emulated host h1 (h2 empty), a symmetric chain through the
    NAT for UDP to 5005 and TCP to 6000."""
    nodes = {"src": {"kind": "host"}, "r1": {"kind": "router"},
             "nat": {"kind": "nat", "outside": "dst"}, "dst": {"kind": "host"}}
    return {"name": name,
            "hosts": {"h1": {"cpus": 1, "memory": "512M"}, "h2": {"cpus": 1, "memory": "512M"}},
            "nodes": {n: {**v, "host": "h1"} for n, v in nodes.items()},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "nat"]},
                      {"endpoints": ["nat", "dst"]}],
            "chains": {"base": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                 "dport": 5005},
                                                {"ingress": "src", "proto": "tcp",
                                                 "dport": 6000}],
                                "functions": ["nat"], "egress": "dst", "symmetric": True}}}


def _nat_table(ns: str) -> bool:
    cp = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "ip", "sfclab_nat"],
                        capture_output=True, text=True, check=False)
    return cp.returncode == 0


@pytest.mark.serial  # times or counts what the machine's load changes
def test_migrate_a_lab_file_nat_between_hosts_loses_nothing(lab_name: str, sfcgen: str) -> None:
    with running(natted_lab(lab_name)) as lab:
        old_ns = lab.netns("nat")
        assert _nat_table(old_ns)
        d, seen_from = migrate_under_udp_and_tcp(lab, "nat", "h2")
        assert d["clone"] == "nat.m1" and d["host"] == "h2", d
        assert seen_from != str(lab.address("src"))  # it was NATed
        # the lab-file node stays as transit, its function stopped; the clone took its place
        assert netns.exists(old_ns) and not _nat_table(old_ns)
        assert _nat_table(lab.netns("nat.m1"))
        c = counters(lab.name)
        assert c["nat.m1"]["proxy_in"] > 0
        assert [r["functions"] for r in chains.listing(lab.name) if r["chain"] == "base"] == \
            [["nat.m1"]] * len([r for r in chains.listing(lab.name) if r["chain"] == "base"])
        _, plan = lifecycle.load_plan(lab.name)
        assert "nat" not in plan.functions and "nat.m1" in plan.functions
        h2 = next(h for h in hostops.list_hosts(lab.name) if h["host"] == "h2")
        assert "nat.m1" in h2["instances"]
        moved = record.moves(LabState(lab.name))
        assert moved["base"][1] == {"nat": "nat.m1"}
        assert chains.inspect(lab.name, "base")["chains"]["base"]["moved"] == {"nat": "nat.m1"}
        # and the clone moves again like any instance (back to h1)
        clone_ns = lab.netns("nat.m1")
        d2 = migrate.migrate(request.MigrateInstance(lab.name, "nat.m1", "h1"))
        assert d2["clone"] == "nat.m2" and not netns.exists(clone_ns)
        assert record.moves(LabState(lab.name))["base"][1] == {"nat": "nat.m2"}
        with pytest.raises(LabError, match="no function instance"):
            migrate.migrate(request.MigrateInstance(lab.name, "r1", "h2"))


@pytest.mark.parametrize("after_s", [0.0, 0.3])
def test_kill_9_in_a_lab_file_migration_then_down_leaves_nothing(lab_name: str,
                                                                 after_s: float) -> None:
    """``kill -9`` as the clone appears (and a little later), then ``down``: nothing is left,
    neither the clone, its tunnel's devices, nor the hosts' contexts."""
    lab = Lab.from_dict(natted_lab(lab_name), source="test_chain_migrate_labfile").up()
    try:
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "migrate", lab.name,
                              "nat", "--to", "h2"], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not netns.exists(f"sfclab:{lab.name}:nat.m1") and time.monotonic() < deadline:
            if p.poll() is not None:
                break
            time.sleep(0.002)
        time.sleep(after_s)
        assert p.poll() is None, p.communicate()[1]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        lab.down()
    assert nothing_left(lab_name), leftovers(lab_name)
    assert not lab_dir(lab_name).exists()
    for c in ("cpu", "memory"):  # the hosts' and functions' cgroups
        assert not [x for x in os.listdir(f"/sys/fs/cgroup/{c}") if lab_name in x]
