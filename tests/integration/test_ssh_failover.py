"""Failover over SSH of an instance on a host that is not its direction's ingress's host
(issue 14, item 4; the model: :mod:`sfclab.live.health.peerwatch`): the instance's host's watcher
probes it and reports to the ingress host's watcher over the hosts' underlay.  Killing that
host's watcher (a dead host) takes its instances out within a second; ``chain watch`` starts it
again and they are put back; a forged report is ignored; ``kill -9`` of the instance's program
moves its flows to the other instance within a second with nothing lost after; ``chain
inspect`` shows the events; ``down`` leaves no watcher on any host."""

from __future__ import annotations

import pytest
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.state import LabState
from sfclab.live.ops import chains
from sfclab.live.health.peermsg import Report, encode
from sfclab.traffic.native import NativeGenerator

from .labtools import nothing_left
from .sshd import ADDRESSES, ssh_machines
from .test_ssh_chains import HOSTS, chain_lab
from .test_ssh_health import (_host_events, _proxy_in, _running, add_video,
                               all_flows_cross)

pytestmark = pytest.mark.serial  # times or counts what the machine's load changes


def _failovers(state_dir: Path, lab: str) -> list[dict]:
    """The failover events of chain ``video`` on a host: a silent host also takes out chain
    ``web``'s function there (``f1`` on h2, ``f2`` on h3), in an event of its own."""
    return [e for e in _host_events(state_dir, lab, "failover") if e["chain"] == "video"]


def _wait(f, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not (got := f()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_an_instance_on_another_host_fails_over_within_a_second(lab_name, tmp_path, capsys,
                                                                sfcgen):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        plan = lifecycle.up(load_lab_dict(chain_lab(lab_name, ms)))
        g = None
        watchers: dict[str, int] = {}
        try:
            d = add_video(lab_name, tmp_path, capsys)
            on = {n: i["host"] for n, i in d["instances"].items()}
            victim = next(n for n, h in on.items() if h != "h1")  # not beside the ingress
            other = next(n for n in on if n != victim)
            vhost = on[victim]
            watchers = dict(d["watcher"])
            assert {"h1", vhost} <= set(watchers)  # the ingress's host and the instance's
            h1 = ms.dir / "state-m1"
            vstate = ms.dir / f"state-{HOSTS[vhost]}"
            dst = str(plan.address_of("dst"))
            g = NativeGenerator(plan.netns_of("src"), plan.netns_of("dst"), dst, port=5003,
                                flows=64)
            t1 = g.trial(1000, 1.0, 64)
            assert t1.received > 0 and _proxy_in(lab_name, "video", victim) > 0
            assert _proxy_in(lab_name, "video", other) > 0

            # 0. a host busy changing its slot tables (the slot lock held 1 s, as a long
            # chain add or a switch holds it) still beats: nobody takes it for silent
            lock = os.open(vstate / "labs" / lab_name / "slots.lock", os.O_RDWR)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                time.sleep(1.0)
            finally:
                os.close(lock)
            time.sleep(0.2)
            assert not _host_events(h1, lab_name, "peer-lost")
            assert not _host_events(h1, lab_name, "failover")

            # 1. the instance's host goes silent (its watcher killed): out within a second
            t_kill = time.time()
            os.kill(watchers[vhost], signal.SIGKILL)
            ev = _wait(lambda: _failovers(h1, lab_name))
            assert ev, "no failover on h1 after the silence of " + vhost
            silent = ev[-1]["time"] - t_kill
            assert ev[-1]["time"] - t_kill < 1.0, ev
            assert ev[-1]["instances_out"] == [victim] and ev[-1]["paths_left"] == 1
            assert _host_events(h1, lab_name, "peer-lost")[-1]["peer"] == vhost
            # 2. its watcher again (chain watch): heartbeats say the instance lives, back in
            capsys.readouterr()
            assert main(["chain", "watch", lab_name, "--json"]) == 0
            w2 = json.loads(capsys.readouterr().out)["watcher"]
            assert w2[vhost] != watchers[vhost] and w2["h1"] == watchers["h1"]
            watchers = dict(w2)
            back = _wait(lambda: [e for e in _failovers(h1, lab_name)
                                  if e["paths_left"] == 2])
            assert back and back[-1]["instances_out"] == [], back
            # 3. a forged report (not signed with the lab's secret) changes nothing
            port = json.loads((LabState(lab_name).dir / "peerwatch.json").read_text())["port"]
            forged = encode(Report(lab_name, vhost, time.time_ns(), 1, "change", [],
                                   [victim]), "00" * 32)
            netns.run(ms.context(HOSTS[vhost]), [sys.executable, "-c",
                      "import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                      ".sendto(bytes.fromhex(sys.argv[1]), (sys.argv[2], int(sys.argv[3])))",
                      forged.hex(), ADDRESSES["m1"], str(port)])
            time.sleep(0.3)
            assert _failovers(h1, lab_name)[-1]["paths_left"] == 2

            # 4. kill -9 of the instance's program on its host: out within a second
            pids = subprocess.run(["ip", "netns", "pids", f"sfclab:{lab_name}:{victim}"],
                                  capture_output=True, text=True, check=True).stdout.split()
            assert pids
            n_before = len(_failovers(h1, lab_name))
            t_kill = time.time()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
            ev = _wait(lambda: _failovers(h1, lab_name)[n_before:])
            assert ev, "no failover on h1"
            print(f"failover over SSH, {vhost}'s watcher killed: {silent:.3f} s; instance on "
                  f"{vhost} killed: kill to slot rewrite {ev[-1]['time'] - t_kill:.3f} s")
            assert ev[-1]["time"] - t_kill < 1.0, ev
            assert ev[-1]["instances_out"] == [victim] and ev[-1]["paths_left"] == 1
            down = _host_events(vstate, lab_name, "instance-down")
            assert down and down[-1]["instance"] == victim
            health = chains.inspect(lab_name, "video")["chains"]["video"]["health"]
            assert health["watcher"] == watchers
            assert health["instances"][victim]["alive"] is False
            assert health["instances"][victim]["host"] == vhost  # probed there
            assert any(e["event"] == "instance-down" and e["host"] == vhost
                       and e["instance"] == victim for e in health["events"])
            assert any(e["event"] == "failover" and e["host"] == "h1"
                       for e in health["events"])
            all_flows_cross(lab_name, "video", g, other, victim)
        finally:
            if g is not None:
                g.close()
            rep = lifecycle.down(lab_name)
        assert rep.errors == [] and nothing_left(lab_name) and not lab_dir(lab_name).exists()
        assert watchers and not any(_running(p) for p in watchers.values())  # down ended all
