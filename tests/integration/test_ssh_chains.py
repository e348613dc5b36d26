"""Service chains on hosts driven over SSH (issues 13 and 14), on the emulated machines of
:mod:`.sshd`: each host's agent builds its share of the data plane (its nodes' programs, its
own maps, its nodes' entries); ``chain ls``, ``inspect``, ``trace`` and ``classify`` work
through the agents; classified traffic crosses the three hosts in chain order, unclassified
traffic bypasses the functions; the same lab on emulated hosts driven directly has the same
labels and paths; ``down`` leaves nothing on any host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.realize import lifecycle
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.kinds import load_lab_dict
from sfclab.steer import chains

from .labtools import nothing_left
from .sshd import ADDRESSES, ssh_machines

ROOT = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "tests.integration.sfcprobe"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
HOSTS = {"h1": "m1", "h2": "m2", "h3": "m3"}


def chain_lab(name: str, ssh=None) -> dict:
    """src and r1 on h1, firewall f1 on h2, firewall f2 and dst on h3 (a bridged and a
    shortbridged tunnel); chain web: UDP to 7999 from src through f1 then f2 to dst."""
    hosts = {}
    for h, m in HOSTS.items():
        hosts[h] = {"address": ADDRESSES[m]}
        if ssh is not None:
            hosts[h]["ssh"] = ssh.ssh(m)
    return {"name": name, "hosts": hosts,
            "nodes": {"src": {"kind": "host", "host": "h1"},
                      "r1": {"kind": "router", "host": "h1"},
                      "f1": {"kind": "firewall", "rules": [], "host": "h2"},
                      "f2": {"kind": "firewall", "rules": [], "host": "h3"},
                      "dst": {"kind": "host", "host": "h3"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "f1"]},
                      {"endpoints": ["f1", "f2"], "attach": "shortbridge"},
                      {"endpoints": ["f2", "dst"]}],
            "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                "dport": 7999}],
                               "functions": ["f1", "f2"], "egress": "dst"}}}


def send(plan, dport: int, n: int, sport: int = 41000) -> int:
    """``n`` datagrams from src to dst:``dport``, echoed back: how many were answered."""
    dst = str(plan.address_of("dst"))
    echo = subprocess.Popen(["ip", "netns", "exec", plan.netns_of("dst"), *PROBE, "udp-echo",
                             str(dport), "4"], stdout=subprocess.PIPE, text=True, env=ENV,
                            cwd=ROOT)
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        cp = subprocess.run(["ip", "netns", "exec", plan.netns_of("src"), *PROBE, "udp-send",
                             dst, str(sport), str(dport), str(n)], capture_output=True,
                            text=True, env=ENV, cwd=ROOT, timeout=60, check=True)
    finally:
        echo.wait(timeout=30)
    return int(cp.stdout.strip())


def shape(d: dict) -> dict:
    """``chain inspect`` without its counters: classifiers, paths, stacks, label owners."""
    return {c: [{k: v for k, v in di.items() if k != "paths"} |
                {"paths": [{k: v for k, v in p.items() if k not in ("classified", "share")}
                           for p in di["paths"]]} for di in x["directions"]]
            for c, x in d["chains"].items()}


@pytest.fixture
def machines(lab_name, tmp_path):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        yield ms


def test_chain_across_three_ssh_hosts_is_the_chain_emulated(machines, lab_name, tmp_path):
    direct = f"d{lab_name[1:]}"
    lifecycle.up(load_lab_dict(chain_lab(direct)))
    try:
        splan = lifecycle.up(load_lab_dict(chain_lab(lab_name, machines)))
        try:
            # each host has its share: its own maps in its directory under the lab's
            shares = sorted(p.name for p in lab_dir(lab_name).iterdir())
            assert shares == ["@h1", "@h2", "@h3"]
            for h in shares:
                assert (lab_dir(lab_name) / h / "maps" / "sfc_labels").exists()
            for m in HOSTS.values():
                j = (machines.dir / f"state-{m}" / "labs" / lab_name / "journal").read_text()
                assert any(json.loads(x).get("op") == "bpffs" for x in j.splitlines())
            # ls and inspect (through the agents) say what the emulated lab says
            assert chains.listing(lab_name) == chains.listing(direct)
            seen, local = chains.inspect(lab_name), chains.inspect(direct)
            assert shape(seen) == shape(local)
            assert [p["nodes"] for p in seen["chains"]["web"]["directions"][0]["paths"]] == \
                [["src", "r1", "f1", "f2", "dst"]]
            # the probe takes every label in chain order, on the host that owns it
            t, tl = chains.trace(lab_name, "web"), chains.trace(direct, "web")
            assert t["in_order"] and t["delivered"]
            assert [h["seen_at"] for h in t["hops"]] == ["r1", "f1", "f1", "f2", "f2"]
            assert t["hops"] == tl["hops"]
            # classified traffic crosses both functions; unclassified traffic bypasses them
            before = chains.inspect(lab_name)["chains"]["web"]
            assert send(splan, 7999, 40) == 40
            mid = chains.inspect(lab_name)["chains"]["web"]
            for f in ("f1", "f2"):
                assert mid["instances"][f]["proxy_in"] - before["instances"][f]["proxy_in"] >= 40
            path = mid["directions"][0]["paths"][0]
            assert path["classified"] - before["directions"][0]["paths"][0]["classified"] >= 40
            assert send(splan, 8000, 40) == 40
            after = chains.inspect(lab_name)["chains"]["web"]
            for f in ("f1", "f2"):
                assert after["instances"][f]["proxy_in"] == mid["instances"][f]["proxy_in"]
            assert after["directions"][0]["paths"][0]["classified"] == path["classified"]
            # classify through the ingress's agent: port 8000 now rides the chain
            cf = tmp_path / "more.json"
            cf.write_text(json.dumps([{"ingress": "src", "proto": "udp", "dport": 8000}]))
            assert chains.classify(lab_name, "web", str(cf))["entries"] == 1
            assert send(splan, 8000, 30, sport=41001) == 30
            last = chains.inspect(lab_name)["chains"]["web"]
            for f in ("f1", "f2"):
                assert last["instances"][f]["proxy_in"] - after["instances"][f]["proxy_in"] >= 30
        finally:
            rep = lifecycle.down(lab_name)
        assert rep.errors == []
        assert nothing_left(lab_name) and not lab_dir(lab_name).exists()
        for m in HOSTS.values():
            assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()
    finally:
        lifecycle.down(direct)
    assert not lab_dir(direct).exists()
