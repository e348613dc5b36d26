"""``down`` of a lab with an OVS bridge after Open vSwitch's daemons stopped: the bridge stays
in OVSDB's file and comes back when they start again, so ``down`` starts them, checks the
bridge's mark and deletes it (found 2026-11-28: a benchmark's lab whose daemons had been killed
went down reporting no bridge, and the bridge was back with the next start of OVS)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from concurrent.futures import ProcessPoolExecutor

import pytest

from sfclab.api import Lab
from sfclab.kernel import netns, ovs
from sfclab.realize import lifecycle

#: the test stops the daemons every lab on this machine shares
pytestmark = pytest.mark.serial


def _daemon_pids() -> list[int]:
    pids = []
    for name in ("ovs-vswitchd.pid", "ovsdb-server.pid"):
        with open(os.path.join(ovs.RUN_DIR, name)) as f:
            pids.append(int(f.read().strip()))
    return pids


def test_down_with_ovs_stopped_starts_it_and_removes_the_labs_bridge(lab_name):
    lab = Lab.from_dict({"name": lab_name,
                         "nodes": {"a": {"kind": "host"}, "b": {"kind": "host"},
                                   "br": {"kind": "ovs-bridge"}},
                         "links": [{"endpoints": ["a", "br"]}, {"endpoints": ["b", "br"]}]})
    lab.up()
    try:
        bridge, = ovs.owned_bridges(lab_name)
        assert netns.end_processes(_daemon_pids(), grace=5)
        # nothing answers now (where the old down saw no bridge of the lab)
        assert subprocess.run(["ovs-vsctl", "--timeout=2", "list-br"],
                              capture_output=True).returncode != 0
    finally:
        rep = lifecycle.down(lab_name)
    assert rep.errors == [] and rep.bridges == 1, rep
    assert ovs.owned_bridges(lab_name) == []  # asked of the running daemons again
    assert bridge not in ovs.vsctl([["list-br"]]).split()
    assert not os.path.exists(f"/sys/class/net/{bridge}")


def _owned_none(lab: str) -> list[str]:
    return ovs.owned_bridges(lab)


def test_processes_finding_ovs_stopped_at_once_start_it_once(lab_name):
    """Several processes that find the daemons stopped at the same moment (the workers of a
    test run, each checking its lab left nothing) each get an answer: one starts the daemons,
    the others wait for them (found in CI 2026-11-28: the second ovsdb-server refused to start,
    'already running', and its caller failed)."""
    ovs.ensure_running()
    assert netns.end_processes(_daemon_pids(), grace=5)
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        answers = list(pool.map(_owned_none, [lab_name] * 8))
    assert answers == [[]] * 8
    assert subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"],
                          capture_output=True).returncode == 0
