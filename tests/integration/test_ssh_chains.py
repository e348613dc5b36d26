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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.hosts import cgroups as host_cgroups
from sfclab.kernel.cpus import online
from sfclab.plan.model import Plan
from sfclab.plan.tunnels import ADDED_VNI_BASE
from sfclab.realize import lifecycle
from sfclab.realize.agent_scan import mem_total
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.inspect import inspect
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.state import LabState
from sfclab.live.ops import chains, classify, hostops

from .labtools import nothing_left
from .sshd import ADDRESSES, SPARE, ssh_machines

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "tests.integration.sfcprobe"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
HOSTS = {"h1": "m1", "h2": "m2", "h3": "m3"}


def chain_lab(name: str, ssh=None, memory: str | None = None) -> dict:
    """src and r1 on h1, firewall f1 on h2, firewall f2 and dst on h3 (a bridged and a
    shortbridged tunnel); chain web: UDP to 7999 from src through f1 then f2 to dst."""
    hosts = {}
    for h, m in HOSTS.items():
        hosts[h] = {"address": ADDRESSES[m]} | ({"memory": memory} if memory else {})
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
    """``n`` datagrams from src to dst:``dport``, echoed back: how many were answered.  The
    echo answers until the sender is done (then it is ended by its PID), not for a fixed time
    a loaded machine's slow start of the sender could outlast."""
    dst = str(plan.address_of("dst"))
    echo = subprocess.Popen(["ip", "netns", "exec", plan.netns_of("dst"), *PROBE, "udp-echo",
                             str(dport), "120"], stdout=subprocess.PIPE, text=True, env=ENV,
                            cwd=ROOT)
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        cp = subprocess.run(["ip", "netns", "exec", plan.netns_of("src"), *PROBE, "udp-send",
                             dst, str(sport), str(dport), str(n)], capture_output=True,
                            text=True, env=ENV, cwd=ROOT, timeout=60, check=True)
    finally:
        echo.terminate()
        echo.wait(timeout=30)
    return int(cp.stdout.strip())


def shape(d: dict) -> dict:
    """``chain inspect`` without its counters: classifiers, paths, stacks, label owners."""
    return {c: [{k: v for k, v in di.items() if k != "paths"} |
                {"paths": [{k: v for k, v in p.items() if k not in ("classified", "share")}
                           for p in di["paths"]]} for di in x["directions"]]
            for c, x in d["chains"].items()}


@contextmanager
def ssh_lab(ms, name: str, on: Iterable[str] = ("m1", "m2", "m3", "m4"),
            memory: str | None = None) -> Iterator[Plan]:
    """:func:`chain_lab` on the SSH machines ``ms``, up for the body (its plan); then
    ``down``, which must leave nothing: no error, no namespace or state here, no state of the
    lab in the agents' directories of machines ``on``."""
    plan = lifecycle.up(load_lab_dict(chain_lab(name, ms, memory)))
    try:
        yield plan
    finally:
        rep = lifecycle.down(name)
    assert rep.errors == [] and nothing_left(name) and not lab_dir(name).exists()
    for m in on:
        assert not (ms.dir / f"state-{m}" / "labs" / name).exists()


@pytest.fixture
def machines(lab_name, tmp_path):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        yield ms


def test_chain_across_three_ssh_hosts_is_the_chain_emulated(machines, lab_name, tmp_path,
                                                            capsys):
    direct = f"d{lab_name[1:]}"
    lifecycle.up(load_lab_dict(chain_lab(direct)))
    try:
        with ssh_lab(machines, lab_name, HOSTS.values()) as splan:
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
            # each probe waits up to 1 s for its answer: the path is checked, not the speed
            t, tl = chains.trace(lab_name, "web", wait=1.0), chains.trace(direct, "web", wait=1.0)
            assert t["in_order"] and t["delivered"]
            assert [h["seen_at"] for h in t["paths"][0]["hops"]] == ["r1", "f1", "f1", "f2", "f2"]
            assert t["paths"][0]["hops"] == tl["paths"][0]["hops"]
            assert main(["chain", "trace", lab_name, "web"]) == 0  # the command, as a person
            assert main(["chain", "inspect", lab_name, "web", "--json"]) == 0
            # the lab's inspect: each host's nodes with their data-plane counters
            nodes = inspect(lab_name)["nodes"]
            assert {n: nodes[n]["sfc"]["node_id"] for n in ("f1", "f2")} == \
                {n: seen_id for n, seen_id in lifecycle.load_plan(lab_name)[1].steering
                    .node_ids.items() if n in ("f1", "f2")}
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
            assert classify.classify(lab_name, "web", str(cf))["entries"] == 1
            assert send(splan, 8000, 30, sport=41001) == 30
            last = chains.inspect(lab_name)["chains"]["web"]
            for f in ("f1", "f2"):
                assert last["instances"][f]["proxy_in"] - after["instances"][f]["proxy_in"] >= 30
    finally:
        lifecycle.down(direct)
    assert not lab_dir(direct).exists()


@pytest.fixture
def spare_machines(lab_name, tmp_path):
    """The three machines and a fourth, m4, to join a running lab."""
    with ssh_machines(f"m{lab_name[1:]}", tmp_path, spare=True) as ms:
        yield ms


def _add_m4(ms, lab: str, *more: str) -> list[str]:
    return ["host", "add", lab, "m4", "--ssh", f"root@{SPARE['m4']}", "--key", str(ms.key),
            "--agent-state", str(ms.dir / "state-m4"), *more]


def test_host_add_ssh_scans_checks_journals_and_rm_and_down_reach_it(spare_machines, lab_name,
                                                                     capsys, tmp_path):
    ms = spare_machines
    direct = f"d{lab_name[1:]}"
    lifecycle.up(load_lab_dict(chain_lab(direct)))
    try:  # a lab of emulated hosts: no real machine can join its underlay
        assert main(_add_m4(ms, direct)) == ExitStatus.BAD_INPUT
        err = capsys.readouterr().err
        assert "emulated hosts" in err and "no real machine can join" in err
        assert [r["host"] for r in hostops.list_hosts(direct)] == ["h1", "h2", "h3"]
    finally:
        lifecycle.down(direct)
    with ssh_lab(ms, lab_name):
        state = LabState(lab_name)
        before = state.journal()
        # more than it has: refused, nothing journaled
        assert main(_add_m4(ms, lab_name, "--cpus", str(len(online()) + 1))) == 2
        assert f"has {len(online())} CPUs" in capsys.readouterr().err
        assert main(_add_m4(ms, lab_name, "--memory", "900G")) == 2
        assert "of memory, asked for" in capsys.readouterr().err
        assert main(["host", "add", lab_name, "m5", "--ssh", "root@192.0.2.7", "--key",
                     str(ms.key)]) == 2  # not on the lab's underlay
        assert "underlay" in capsys.readouterr().err
        # an emulated host cannot join: said, exit 2
        assert main(["host", "add", lab_name, "e1", "--cpus", "1", "--memory", "64M"]) == 2
        assert "--ssh USER@ADDRESS" in capsys.readouterr().err
        assert state.journal() == before
        # defaults: what it has, scanned over SSH
        assert main(_add_m4(ms, lab_name, "--json")) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["cpus"] == online() and d["memory"] == mem_total()
        assert d["address"] == f"{SPARE['m4']}/24" and d["underlay_if"] == "ul0"
        m4 = [e for e in state.journal() if e.get("host") == "m4"]
        assert [e["op"] for e in m4] == ["remote-host"]
        assert main(["host", "ls", lab_name, "--json"]) == 0
        rows = {r["host"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows["m4"]["added"] and rows["m4"]["cpus"] == len(online())
        assert rows["m4"]["memory"] == mem_total()
        assert inspect(lab_name)["hosts"]["m4"]["reachable"] is True
        # host rm: its agent asked to remove its part; it leaves the journal
        assert main(["host", "rm", lab_name, "m4"]) == 0
        assert not [e for e in state.journal() if e.get("host") == "m4"]
        assert "m4" not in {r["host"] for r in hostops.list_hosts(lab_name)}
        # added again: down reaches it too
        assert main(_add_m4(ms, lab_name, "--cpus", "1", "--memory", "64M")) == 0
        capsys.readouterr()
        assert hostops.list_hosts(lab_name)[-1]["memory"] == 64 << 20
    assert not Path(f"/sys/fs/cgroup/memory/sfclab:{lab_name}:@m4").exists()
    for m in ("m1", "m4"):  # the tunnel's devices in the hosts' contexts: removed by mark
        for dev in ("pn", "vxn", "brn"):
            assert not _context_link(ms, m, f"{dev}{ADDED_VNI_BASE}"), (m, dev)


def _context_link(ms, m: str, dev: str) -> bool:
    return subprocess.run(["ip", "-n", ms.context(m), "link", "show", "dev", dev],
                          capture_output=True, check=False).returncode == 0


def _alias(ms, m: str, dev: str) -> str | None:
    cp = subprocess.run(["ip", "-n", ms.context(m), "-j", "link", "show", "dev", dev],
                        capture_output=True, text=True, check=False)
    return json.loads(cp.stdout)[0].get("ifalias") if cp.returncode == 0 else None


def test_chain_add_lands_on_an_added_ssh_host_carries_traffic_and_rm_and_down_remove_it(
        spare_machines, lab_name, tmp_path, capsys):
    """host add --ssh m4, then chain add: the instance placed on m4 (the only host with room:
    the lab file's have 256M) is made by m4's agent (namespace, function, tunnel end to r1's host
    h1, whose agent makes the other end); classified traffic goes through it (trace and counters say
    so), other traffic does not; chain rm removes it everywhere; down after a second add too."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M") as splan:
        assert main(_add_m4(ms, lab_name)) == 0
        capsys.readouterr()
        cf = tmp_path / "chain.json"
        cf.write_text(json.dumps({"name": "more", "attach": "r1", "egress": "dst",
                                  "classifiers": [{"ingress": "src", "proto": "udp",
                                                   "dport": 5002}],
                                  "functions": [{"name": "fw", "kind": "firewall",
                                                 "rules": [], "cpu": 0.5,
                                                 "memory": "512M"}]}))
        assert main(["chain", "add", lab_name, str(cf), "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        (node, inst), = d["instances"].items()
        assert inst["host"] == "m4"
        plan = lifecycle.load_plan(lab_name)[1]
        ns = plan.netns_of(node)
        assert subprocess.run(["ip", "netns", "exec", ns, "true"]).returncode == 0
        # made by m4's agent, journaled there; the tunnel's ends in m4's and h1's contexts
        j = (ms.dir / "state-m4" / "labs" / lab_name / "journal").read_text()
        entries = [json.loads(x) for x in j.splitlines()]
        # journaled by the engine's parts, as up journals a node: its namespace and function
        assert {"op": "netns", "name": ns} in entries
        assert {"op": "function", "node": node, "kind": inst["kind"]} in entries
        # a second chain with an entry this one holds: refused before anything (exit 2)
        journal_m4 = (ms.dir / "state-m4" / "labs" / lab_name / "journal").read_text()
        clash = tmp_path / "clash.json"
        clash.write_text(json.dumps({"name": "clash", "attach": "r1", "egress": "dst",
                                     "classifiers": [{"ingress": "src", "proto": "udp",
                                                      "dport": 5002}],
                                     "functions": [{"name": "fw2", "kind": "firewall",
                                                    "rules": []}]}))
        assert main(["chain", "add", lab_name, str(clash)]) == 2
        assert "belongs to another chain" in capsys.readouterr().err
        assert (ms.dir / "state-m4" / "labs" / lab_name / "journal").read_text() == journal_m4
        assert "clash" not in {r["chain"] for r in chains.listing(lab_name)}
        # placed by what it needs; its host's cgroup (made by m4's agent) holds its limits
        m4 = next(h for h in hostops.list_hosts(lab_name) if h["host"] == "m4")
        assert m4["instances"] == [node] and m4["used_cpu"] == 0.5
        assert m4["used_memory"] == 512 << 20
        assert host_cgroups.usage(f"sfclab:{lab_name}:@m4")["memory_limit_bytes"] == \
            mem_total()
        vni = next(n for n in lifecycle.load_plan(lab_name)[1].hosts if n.name == "m4")
        assert vni.nodes == [node]
        assert _context_link(ms, "m4", f"vxn{ADDED_VNI_BASE}")
        assert _context_link(ms, "m1", f"vxn{ADDED_VNI_BASE}")  # r1's host, h1
        # the tunnel is a hosted link of this machine's plan, shown like the lab file's
        assert main(["host", "ls", lab_name]) == 0
        assert f"tunnel added: r1@h1 - {node}@m4, vni {ADDED_VNI_BASE}, attach bridge" in \
            capsys.readouterr().out
        # each agent made its end by the hosted links' part of the build engine: every device
        # in its root namespace marked, VXLAN device and bridge journaled by mark (as up
        # journals a real host's)
        for m, host in (("m4", "m4"), ("m1", "h1")):
            jm = [json.loads(x) for x in
                  (ms.dir / f"state-{m}" / "labs" / lab_name / "journal").read_text().splitlines()]
            for dev in (f"pn{ADDED_VNI_BASE}", f"vxn{ADDED_VNI_BASE}", f"brn{ADDED_VNI_BASE}"):
                mark = f"sfclab:{lab_name}:@{host}:{dev}"
                assert _alias(ms, m, dev) == mark, (m, dev)
                assert {"op": "link", "name": dev, "alias": mark} in jm, (m, dev)
        got = chains.inspect(lab_name)["chains"]["more"]
        assert node in got["directions"][0]["paths"][0]["nodes"]
        t = chains.trace(lab_name, "more")
        assert t["in_order"] and t["delivered"], t
        assert node in [h["seen_at"] for h in t["paths"][0]["hops"]]
        before = chains.inspect(lab_name)["chains"]["more"]["instances"][node]["proxy_in"]
        assert send(splan, 5002, 30) == 30
        mid = chains.inspect(lab_name)["chains"]["more"]["instances"][node]["proxy_in"]
        assert mid - before >= 30
        assert send(splan, 5003, 20) == 20  # not classified: bypasses the function
        assert chains.inspect(lab_name)["chains"]["more"]["instances"][node]["proxy_in"] == mid
        # no other host has room for it: migrate and host rm --drain refused before
        # anything; host rm of the machine running it refused
        journal_before = LabState(lab_name).journal()
        assert main(["chain", "migrate", lab_name, node, "--to", "h2"]) == 2
        assert "no room for the clone" in capsys.readouterr().err
        assert main(["host", "rm", lab_name, "m4", "--drain"]) == 2  # no other host has room
        assert "cannot drain host 'm4'" in capsys.readouterr().err
        assert main(["host", "rm", lab_name, "m4"]) == 2
        capsys.readouterr()
        assert LabState(lab_name).journal() == journal_before
        assert send(splan, 5002, 10) == 10
        # chain rm: gone on every host
        assert main(["chain", "rm", lab_name, "more"]) == 0
        capsys.readouterr()
        assert not os.path.exists(f"/run/netns/{ns}")
        leftovers = [(m, dev) for m in ("m1", "m4") for dev in
                     ("pn", "vxn", "brn") if any(_context_link(ms, m, f"{dev}{v}")
                                           for v in range(ADDED_VNI_BASE, ADDED_VNI_BASE + 8))]
        assert leftovers == []
        assert send(splan, 5002, 10) == 10  # unclassified again: straight to dst
        # added again: down removes it with the rest
        assert main(["chain", "add", lab_name, str(cf)]) == 0
        capsys.readouterr()
    assert not Path(f"/sys/fs/cgroup/memory/sfclab:{lab_name}:@m4").exists()
    for m in ("m1", "m4"):  # the tunnel's devices in the hosts' contexts: removed by mark
        for dev in ("pn", "vxn", "brn"):
            assert not _context_link(ms, m, f"{dev}{ADDED_VNI_BASE}"), (m, dev)


def test_kill_9_of_a_chain_add_on_ssh_hosts_then_down_leaves_nothing(spare_machines, lab_name,
                                                                    tmp_path, capsys):
    """``chain add`` killed (SIGKILL) once m4's agent has journaled the instance it is
    making: ``down`` reaches every host, whose agent removes what its journal names (the
    agent finishes its step first: a host's part is changed under its lock)."""
    import signal
    import time

    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M"):
        assert main(_add_m4(ms, lab_name)) == 0
        capsys.readouterr()
        cf = tmp_path / "chain.json"
        cf.write_text(json.dumps({"name": "k9", "attach": "r1", "egress": "dst",
                                  "classifiers": [{"ingress": "src", "proto": "udp",
                                                   "dport": 5002}],
                                  "functions": [{"name": "fw", "kind": "firewall",
                                                 "rules": [], "memory": "512M"}]}))
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "add", lab_name,
                              str(cf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        journal = ms.dir / "state-m4" / "labs" / lab_name / "journal"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            if journal.exists() and '"netns"' in journal.read_text():
                break
            time.sleep(0.01)
        assert p.poll() is None, "chain add ended before m4's agent journaled its instance"
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert not [ln for ln in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                            text=True).stdout.splitlines()
                if f"sfclab:{lab_name}:" in ln]
    for m in ("m1", "m4"):
        for dev in ("vxn", "brn"):
            assert not _context_link(ms, m, f"{dev}{ADDED_VNI_BASE}"), (m, dev)


def add_mig(lab: str, tmp_path: Path, capsys: Any) -> tuple[str, dict[str, Any]]:
    """``chain add`` of ``mig`` (UDP 5002 from ``src`` through one firewall of 200M, attached
    at ``r1``): its one instance's node and what ``--json`` said of it."""
    cf = tmp_path / "mig.json"
    cf.write_text(json.dumps({"name": "mig", "attach": "r1", "egress": "dst",
                              "classifiers": [{"ingress": "src", "proto": "udp",
                                               "dport": 5002}],
                              "functions": [{"name": "fw", "kind": "firewall",
                                             "rules": [], "memory": "200M"}]}))
    capsys.readouterr()
    assert main(["chain", "add", lab, str(cf), "--json"]) == 0
    (node, inst), = json.loads(capsys.readouterr().out)["instances"].items()
    return node, inst


def test_migrate_between_ssh_hosts_and_host_rm_drain(spare_machines, lab_name, tmp_path,
                                                     capsys):
    """An instance on h1 (beside its attach node r1) migrated to m4 (a machine host add --ssh
    joined: a clone made by m4's agent, tunnel ends on m4 and h1), traffic through the clone;
    host rm m4 --drain migrates it back to h1, then m4 leaves; down leaves nothing."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M") as splan:
        assert main(_add_m4(ms, lab_name)) == 0
        node, inst = add_mig(lab_name, tmp_path, capsys)
        assert inst["host"] == "h1"  # the first host with room, beside r1: a plain veth
        assert send(splan, 5002, 10) == 10
        assert main(["chain", "migrate", lab_name, node, "--to", "m4", "--json"]) == 0
        m = json.loads(capsys.readouterr().out)
        assert m["host"] == "m4" and m["clone"] == f"{node}.m1"
        clone = m["clone"]
        plan = lifecycle.load_plan(lab_name)[1]
        assert next(h for h in plan.hosts if h.name == "m4").nodes == [clone]
        assert not os.path.exists(f"/run/netns/sfclab:{lab_name}:{node}")
        t = chains.trace(lab_name, "mig")
        assert t["in_order"] and t["delivered"] and clone in [h["seen_at"] for h in t["paths"][0]["hops"]]
        before = chains.inspect(lab_name)["chains"]["mig"]["instances"][clone]["proxy_in"]
        assert send(splan, 5002, 30) == 30
        after = chains.inspect(lab_name)["chains"]["mig"]["instances"][clone]["proxy_in"]
        assert after - before >= 30
        # host rm --drain: migrated back (h1 has room), then m4 leaves
        assert main(["host", "rm", lab_name, "m4", "--drain", "--json"]) == 0
        capsys.readouterr()
        assert "m4" not in {r["host"] for r in hostops.list_hosts(lab_name)}
        assert not (ms.dir / "state-m4" / "labs" / lab_name).exists()
        for dev in ("vxn", "brn"):
            assert not _context_link(ms, "m1", f"{dev}{ADDED_VNI_BASE}")
        back = next(iter(chains.inspect(lab_name)["chains"]["mig"]["instances"]))
        assert back == f"{node}.m2"
        assert send(splan, 5002, 20) == 20
        got = chains.inspect(lab_name)["chains"]["mig"]["instances"][back]["proxy_in"]
        assert got >= 20
