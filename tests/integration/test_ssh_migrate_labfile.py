"""``chain migrate`` of a function of the lab file's own chains on hosts driven over SSH, and
``chain rm`` of entries ``chain classify`` added (issue 14, items 3 and 1), on the emulated
machines of :mod:`.sshd`: a lab-file NAT on h2 moved to h3 (dst's host; its clone hangs off
r1 on h1 through a tunnel) make-before-break under UDP at
10 kpps (its clone made and checked ready by h3's agent, the NAT's function stopped by h2's
agent, its namespace left as transit), traffic through the clone afterwards, the record
``moved/<chain>.json`` kept; ``kill -9`` of the migration then ``down`` leaves nothing on any
host; ``chain rm`` takes out the classifier entries ``chain classify`` added."""

from __future__ import annotations

import pytest
import json
import os
import signal
import subprocess
import sys
import time
import threading
from pathlib import Path
from typing import Any

from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.plan.model import Plan
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import DataPlane, lab_dir, share_dir
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.state import LabState
from sfclab.live.ops import chains, hostops
from sfclab.live import record
from sfclab.traffic.native import NativeGenerator

from .labtools import leftovers, nothing_left
from .sshd import ADDRESSES, ssh_machines
from .test_ssh_chains import send

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
HOSTS = {"h1": "m1", "h2": "m2", "h3": "m3"}


def natted_lab(name: str, ms: Any) -> dict[str, Any]:
    """src and r1 on h1, a NAT (outside: dst) on h2, dst on h3 (every host holds a node);
    chain base: UDP to 5005 from src through the NAT to dst, symmetric."""
    hosts = {h: {"address": ADDRESSES[m], "ssh": ms.ssh(m)} for h, m in HOSTS.items()}
    return {"name": name, "hosts": hosts,
            "nodes": {"src": {"kind": "host", "host": "h1"},
                      "r1": {"kind": "router", "host": "h1"},
                      "nat": {"kind": "nat", "outside": "dst", "host": "h2"},
                      "dst": {"kind": "host", "host": "h3"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "nat"]},
                      {"endpoints": ["nat", "dst"]}],
            "chains": {"base": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                 "dport": 5005}],
                                "functions": ["nat"], "egress": "dst", "symmetric": True}}}


def _nat_table(ns: str) -> bool:
    cp = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "ip", "sfclab_nat"],
                        capture_output=True, text=True, check=False)
    return cp.returncode == 0


def _proxy_in(lab: str, chain: str, instance: str) -> int:
    return chains.inspect(lab, chain)["chains"][chain]["instances"][instance]["proxy_in"]


def _agent_part(ms: Any, m: str, lab: str) -> Plan:
    return Plan.from_dict(json.loads(
        (ms.dir / f"state-{m}" / "labs" / lab / "plan.json").read_text()))


def _gone_everywhere(ms: Any, lab: str) -> None:
    assert nothing_left(lab), leftovers(lab)
    assert not lab_dir(lab).exists()
    for m in HOSTS.values():
        assert not (ms.dir / f"state-{m}" / "labs" / lab).exists(), m


@pytest.mark.serial  # times or counts what the machine's load changes
def test_a_lab_file_nat_migrates_between_ssh_hosts_under_udp(lab_name, tmp_path, capsys,
                                                             sfcgen):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        plan = lifecycle.up(load_lab_dict(natted_lab(lab_name, ms)))
        g = None
        try:
            old_ns = plan.netns_of("nat")
            assert _nat_table(old_ns)
            g = NativeGenerator(plan.netns_of("src"), plan.netns_of("dst"),
                                str(plan.address_of("dst")), port=5005)
            out: dict[str, Any] = {}

            def run() -> None:
                try:
                    out["trial"] = g.trial(10000, 4.0, 64)
                except Exception as e:  # reported below
                    out["error"] = e

            t = threading.Thread(target=run)
            t.start()
            try:
                time.sleep(1.5)
                rc = main(["chain", "migrate", lab_name, "nat", "--to", "h3", "--json"])
            finally:
                t.join()
            assert rc == 0
            m = json.loads(capsys.readouterr().out)
            assert m["clone"] == "nat.m1" and m["host"] == "h3" and m["drained"], m
            assert m["conntrack_moved"] >= 1 and m["conntrack_errors"] == [], m
            trial = out.get("trial")
            assert trial is not None, out.get("error")
            print(f"lab-file NAT over SSH under UDP: sent {trial.sent}, lost {trial.lost}, "
                  f"switch {1000 * m['switch_seconds']:.2f} ms, {m['seconds']} s in all")
            assert trial.sent >= 30000 and trial.lost == 0, (trial.sent, trial.received)
            # the lab-file node stays on h2 as transit, its NAT gone; the clone is h3's
            assert netns.exists(old_ns) and not _nat_table(old_ns)
            assert _nat_table(f"sfclab:{lab_name}:nat.m1")
            h3 = _agent_part(ms, "m3", lab_name)
            assert "nat.m1" in h3.hosts[0].nodes and "nat.m1" in h3.functions
            j3 = (ms.dir / "state-m3" / "labs" / lab_name / "journal").read_text()
            assert {"op": "netns", "name": f"sfclab:{lab_name}:nat.m1"} in \
                [json.loads(x) for x in j3.splitlines()]
            h2 = _agent_part(ms, "m2", lab_name)
            assert "nat" in h2.hosts[0].nodes and "nat" not in h2.functions
            # the clone takes its place: plan, ls, host ls, record
            _, now = lifecycle.load_plan(lab_name)
            assert "nat" not in now.functions and "nat.m1" in now.functions
            rows = [r["functions"] for r in chains.listing(lab_name) if r["chain"] == "base"]
            assert rows and all(r == ["nat.m1"] for r in rows), rows
            on_h3 = next(h for h in hostops.list_hosts(lab_name) if h["host"] == "h3")
            assert "nat.m1" in on_h3["instances"]
            assert record.moves(LabState(lab_name))["base"][1] == {"nat": "nat.m1"}
            assert chains.inspect(lab_name, "base")["chains"]["base"]["moved"] == \
                {"nat": "nat.m1"}
            # traffic goes on through the clone alone
            before = _proxy_in(lab_name, "base", "nat.m1")
            after_trial = g.trial(1000, 1.0, 64)
            assert after_trial.lost == 0, (after_trial.sent, after_trial.received)
            assert _proxy_in(lab_name, "base", "nat.m1") - before >= after_trial.sent
            tr = chains.trace(lab_name, "base")
            assert tr["in_order"] and tr["delivered"], tr
            assert "nat.m1" in [h["seen_at"] for h in tr["paths"][0]["hops"]]
        finally:
            if g is not None:
                g.close()
            rep = lifecycle.down(lab_name)
        assert rep.errors == []
        _gone_everywhere(ms, lab_name)


def test_kill_9_in_a_lab_file_migration_over_ssh_then_down_leaves_nothing(lab_name,
                                                                          tmp_path):
    """``kill -9`` of ``chain migrate`` once the clone's namespace exists on h3, then ``down``:
    nothing is left on any host (namespaces, tunnel devices, the agents' state)."""
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        lifecycle.up(load_lab_dict(natted_lab(lab_name, ms)))
        try:
            p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "migrate",
                                  lab_name, "nat", "--to", "h3"],
                                 env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while not netns.exists(f"sfclab:{lab_name}:nat.m1") and \
                    time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.002)
            assert p.poll() is None, p.communicate()[1]
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        finally:
            rep = lifecycle.down(lab_name)
        assert rep.errors == []
        _gone_everywhere(ms, lab_name)


def _entries(lab: str, host: str) -> int:
    with DataPlane(lab, share_dir(lab, host)) as dp:
        return sum(1 for _ in dp.maps["sfc_classes"].keys())


def test_chain_rm_over_ssh_removes_the_entries_chain_classify_added(lab_name, tmp_path,
                                                                    capsys):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        plan = lifecycle.up(load_lab_dict(natted_lab(lab_name, ms)))
        try:
            before = _entries(lab_name, "h1")  # src, the ingress, is h1's
            cf = tmp_path / "more.json"
            cf.write_text(json.dumps({"name": "more", "attach": "r1", "egress": "dst",
                                      "classifiers": [{"ingress": "src", "proto": "udp",
                                                       "dport": 5002}],
                                      "functions": [{"name": "fw", "kind": "firewall",
                                                     "rules": []}]}))
            assert main(["chain", "add", lab_name, str(cf), "--json"]) == 0
            (node, _), = json.loads(capsys.readouterr().out)["instances"].items()
            added = _entries(lab_name, "h1")
            assert added > before
            extra = tmp_path / "extra.json"
            extra.write_text(json.dumps([{"ingress": "src", "proto": "udp", "dport": 8000},
                                         {"ingress": "src", "proto": "udp", "dport": 8001}]))
            assert main(["chain", "classify", lab_name, "more", "--from-file", str(extra),
                         "--json"]) == 0
            n = json.loads(capsys.readouterr().out)["entries"]
            assert n >= 2 and _entries(lab_name, "h1") == added + n
            p0 = _proxy_in(lab_name, "more", node)
            assert send(plan, 8000, 20) == 20
            assert _proxy_in(lab_name, "more", node) - p0 >= 20  # classify's entry steers it
            assert main(["chain", "rm", lab_name, "more", "--json"]) == 0
            assert json.loads(capsys.readouterr().out)["errors"] == []
            # every entry of the chain is gone, classify's too; the lab file's chain stays
            assert _entries(lab_name, "h1") == before
            assert not netns.exists(f"sfclab:{lab_name}:{node}")
            assert send(plan, 8000, 20, sport=41002) == 20  # straight to dst again
            assert {r["chain"] for r in chains.listing(lab_name)} == {"base"}
        finally:
            rep = lifecycle.down(lab_name)
        assert rep.errors == []
        _gone_everywhere(ms, lab_name)
