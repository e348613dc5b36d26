"""State and health of chains on hosts driven over SSH (issue 14, items 3 and 4), on the
emulated machines of :mod:`.sshd`: a NAT migrated between two SSH hosts under a TCP connection
takes its connection-tracking entries along (read by the old host's agent, made by the new
host's) and the connection goes on; the health watcher runs on the ingress's host (started
by its agent, journaled there), an instance killed there is out of its group's hash within a
second, ``chain inspect`` shows the event from that host's record, and ``down`` ends the
watcher with the rest."""

from __future__ import annotations

import pytest
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sfclab.cli import main
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.kinds import load_lab_dict
from sfclab.live.ops import chains
from sfclab.traffic.native import NativeGenerator

from .chains import TCP_CLIENT, TCP_SERVER
from .labtools import nothing_left
from .sshd import SPARE, ssh_machines
from .test_ssh_chains import chain_lab

pytestmark = pytest.mark.serial  # times or counts what the machine's load changes

COUNTER = [sys.executable, "-m", "sfclab.functions.examples.tun_count"]

def _in(ns: str, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _proxy_in(lab: str, chain: str, instance: str) -> int:
    return chains.inspect(lab, chain)["chains"][chain]["instances"][instance]["proxy_in"]


def test_a_nat_migrated_between_ssh_hosts_takes_its_connections_along(lab_name, tmp_path,
                                                                      capsys):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path, spare=True) as ms:
        plan = lifecycle.up(load_lab_dict(chain_lab(lab_name, ms, memory="256M")))
        server = client = None
        try:
            assert main(["host", "add", lab_name, "m4", "--ssh", f"root@{SPARE['m4']}",
                         "--key", str(ms.key), "--agent-state", str(ms.dir / "state-m4")]) == 0
            cf = tmp_path / "nat.json"
            cf.write_text(json.dumps({"name": "natted", "attach": "r1", "egress": "dst",
                                      "symmetric": True,
                                      "classifiers": [{"ingress": "src", "proto": "tcp",
                                                       "dport": 6000}],
                                      "functions": [{"name": "nat", "kind": "nat",
                                                     "memory": "200M"}]}))
            capsys.readouterr()
            assert main(["chain", "add", lab_name, str(cf), "--json"]) == 0
            (node, inst), = json.loads(capsys.readouterr().out)["instances"].items()
            assert inst["host"] == "h1"  # the first host with room, beside r1
            server = _in(plan.netns_of("dst"), [sys.executable, "-c", TCP_SERVER, "6000"])
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            stop = tmp_path / "stop"
            client = _in(plan.netns_of("src"), [sys.executable, "-c", TCP_CLIENT,
                                                str(plan.address_of("dst")), "6000", str(stop)])
            assert client.stdout is not None and client.stderr is not None
            assert client.stdout.readline().strip() == "connected", client.stderr.read()
            assert server.stdout.readline().strip() != str(plan.address_of("src"))  # NATed
            time.sleep(0.5)
            # the clone on m4 (another host's agent), the entries moved before the switch
            assert main(["chain", "migrate", lab_name, node, "--to", "m4", "--json"]) == 0
            m = json.loads(capsys.readouterr().out)
            assert m["host"] == "m4" and m["conntrack_moved"] >= 1, m
            assert m["conntrack_errors"] == [], m
            clone = m["clone"]
            print(f"migrate over SSH: {m['conntrack_moved']} conntrack entries moved, switch "
                  f"{1000 * m['switch_seconds']:.1f} ms, {m['seconds']} s in all")
            before = _proxy_in(lab_name, "natted", clone)
            time.sleep(1.0)  # the connection goes on through the clone alone
            stop.touch()
            # no reset (the old instance answering a reply it could not translate) and no
            # stall: the client ends well, having exchanged all along
            rc = client.wait(timeout=30)
            assert rc == 0, client.stderr.read()
            got = json.loads(client.stdout.read())
            print(f"TCP through the migration: {got['exchanges']} exchanges, longest gap "
                  f"{1000 * got['longest_gap']:.1f} ms")
            assert got["exchanges"] > 0 and got["longest_gap"] < 1.0, got
            assert _proxy_in(lab_name, "natted", clone) > before
            assert not os.path.exists(f"/run/netns/sfclab:{lab_name}:{node}")
            shown = chains.inspect(lab_name, "natted")["chains"]["natted"]["health"]["events"]
            ev = [e for e in shown if e["event"] == "migrated"]
            assert ev and ev[-1]["conntrack_moved"] == m["conntrack_moved"]
        finally:
            for p in (client, server):
                if p is not None and p.poll() is None:
                    p.kill()  # by its PID
                    p.wait()
            rep = lifecycle.down(lab_name)
        assert rep.errors == [] and nothing_left(lab_name) and not lab_dir(lab_name).exists()
        for mm in ("m1", "m2", "m3", "m4"):
            assert not (ms.dir / f"state-{mm}" / "labs" / lab_name).exists()


def add_video(lab: str, tmp_path: Path, capsys: Any) -> dict[str, Any]:
    """``chain add`` of ``video``: UDP 5000-5010 from ``src`` through two ``tun`` instances
    counting packets, attached at ``r1``; what ``--json`` printed."""
    cf = tmp_path / "video.json"
    cf.write_text(json.dumps({"name": "video", "attach": "r1", "egress": "dst",
                              "classifiers": [{"ingress": "src", "proto": "udp",
                                               "dport": "5000-5010"}],
                              "functions": [{"name": "m", "kind": "tun", "exec": COUNTER,
                                             "instances": 2, "cpu": 0.3,
                                             "memory": "64M"}]}))
    capsys.readouterr()
    assert main(["chain", "add", lab, str(cf), "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def all_flows_cross(lab: str, chain: str, g: NativeGenerator, other: str, victim: str) -> None:
    """A trial at 1 kpps loses nothing and every packet of it crosses ``other``, none
    ``victim`` (the instance taken out)."""
    before_v = _proxy_in(lab, chain, victim)
    before_o = _proxy_in(lab, chain, other)
    t = g.trial(1000, 1.0, 64)
    assert t.lost == 0, (t.sent, t.received)
    assert _proxy_in(lab, chain, victim) == before_v
    assert _proxy_in(lab, chain, other) - before_o >= t.sent


def _host_events(state_dir: Path, lab: str, kind: str) -> list[dict]:
    f = state_dir / "labs" / lab / "events.jsonl"
    if not f.exists():
        return []
    return [e for e in map(json.loads, f.read_text().splitlines()) if e["event"] == kind]


def test_an_instance_killed_on_the_ingress_host_fails_over_within_a_second(lab_name, tmp_path,
                                                                           capsys, sfcgen):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        plan = lifecycle.up(load_lab_dict(chain_lab(lab_name, ms)))
        g = None
        watcher = None
        try:
            d = add_video(lab_name, tmp_path, capsys)
            # a watcher on h1 (src, the ingress, is there), journaled in h1's journal (and
            # one on each host holding an instance: test_ssh_failover.py)
            assert "h1" in d["watcher"]
            watcher = d["watcher"]["h1"]
            assert os.stat(f"/proc/{watcher}/ns/net").st_ino == \
                os.stat(f"/run/netns/{plan.netns_of('src')}").st_ino
            j = (ms.dir / "state-m1" / "labs" / lab_name / "journal").read_text()
            assert any(e.get("op") == "watcher" and e.get("pid") == watcher
                       for e in map(json.loads, j.splitlines()))
            on = {n: i["host"] for n, i in d["instances"].items()}
            victim = sorted(n for n, h in on.items() if h == "h1")[0]
            other = next(n for n in on if n != victim)
            dst = str(plan.address_of("dst"))
            g = NativeGenerator(plan.netns_of("src"), plan.netns_of("dst"), dst, port=5003,
                                flows=64)
            t1 = g.trial(1000, 1.0, 64)
            assert t1.received > 0, (t1.sent, t1.received)
            assert _proxy_in(lab_name, "video", victim) > 0
            assert _proxy_in(lab_name, "video", other) > 0
            pids = subprocess.run(["ip", "netns", "pids", f"sfclab:{lab_name}:{victim}"],
                                  capture_output=True, text=True, check=True).stdout.split()
            assert pids  # its program
            t_kill = time.time()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
            deadline = time.monotonic() + 5
            h1 = ms.dir / "state-m1"
            # the failovers after the kill that take the victim out (on a loaded machine a
            # watcher starved past the peers' timeout is taken for lost and back, and its
            # instances go out of the hash and back in before the kill: events too, not these)
            def after_kill() -> list[dict]:
                return [e for e in _host_events(h1, lab_name, "failover")
                        if e["time"] >= t_kill and victim in e["instances_out"]]
            while not after_kill() and time.monotonic() < deadline:
                time.sleep(0.01)
            ev = after_kill()
            assert ev, ("no failover of the victim on h1",
                        _host_events(h1, lab_name, "failover"),
                        _host_events(h1, lab_name, "peer-lost"))
            assert ev[-1]["time"] - t_kill < 1.0, ev  # out of the group's hash within 1 s
            print(f"failover over SSH: kill to slot rewrite {ev[-1]['time'] - t_kill:.3f} s "
                  f"(detection to rewrite {ev[-1]['ms']} ms)")
            assert ev[-1]["instances_out"] == [victim] and ev[-1]["paths_left"] == 1
            # chain inspect shows it, from h1's record; the instance's health from h1
            health = chains.inspect(lab_name, "video")["chains"]["video"]["health"]
            assert health["watcher"]["h1"] == watcher
            assert health["instances"][victim] == {"alive": False, "stalled": False,
                                                   "host": "h1"}
            assert any(e["event"] == "failover" and e["host"] == "h1"
                       for e in health["events"])
            assert any(e["event"] == "instance-down" and e["instance"] == victim
                       for e in health["events"])
            assert any(e["event"] == "chain-added" for e in health["events"])  # this machine's
            assert main(["chain", "inspect", lab_name, "video"]) == 0
            assert "event failover" in capsys.readouterr().out
            all_flows_cross(lab_name, "video", g, other, victim)
        finally:
            if g is not None:
                g.close()
            rep = lifecycle.down(lab_name)
        assert rep.errors == [] and nothing_left(lab_name) and not lab_dir(lab_name).exists()
        assert watcher is not None and not _running(watcher)  # down ended it


def _running(pid: int) -> bool:
    """``pid`` runs (not gone, not a zombie nobody reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
