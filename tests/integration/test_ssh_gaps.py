"""Gaps of labs of hosts driven over SSH found while finishing issue 14, on the emulated
machines of :mod:`.sshd`:

- a lab file's SSH host with no node on it comes up (its share gets empty maps:
  :mod:`sfclab.realize.steering`), takes a migrated instance later, traffic crosses it, and
  ``down`` leaves nothing;
- a host that joined with ``host add --ssh`` and then got an instance by ``chain migrate
  --to`` knows its peers (``chain migrate`` starts and refreshes the watchers,
  :mod:`sfclab.live.runtime.agents_migrate`): killing the instance's program there fails it over at the
  ingress's host within a second, nothing lost after.
"""

from __future__ import annotations

import pytest
import json
import os
import signal
import subprocess
import time

from sfclab.cli import main
from sfclab.realize import lifecycle
from sfclab.realize.dataplane import lab_dir
from sfclab.realize.kinds import load_lab_dict
from sfclab.live.ops import chains
from sfclab.traffic.native import NativeGenerator

from .labtools import nothing_left
from .sshd import ADDRESSES, SPARE, ssh_machines
from .test_ssh_chains import add_mig, chain_lab, send
from .test_ssh_health import COUNTER, _host_events, _proxy_in, _running

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

MACHINES = {"h1": "m1", "h2": "m2", "h3": "m3"}


def empty_host_lab(name: str, ms) -> dict:
    """src and r1 on h1; f1, f2 and dst on h2 (256M each); h3 holds nothing (all its
    memory); chain web through f1 and f2."""
    hosts = {h: {"address": ADDRESSES[m], "ssh": ms.ssh(m)} for h, m in MACHINES.items()}
    for h in ("h1", "h2"):
        hosts[h]["memory"] = "256M"
    return {"name": name, "hosts": hosts,
            "nodes": {"src": {"kind": "host", "host": "h1"},
                      "r1": {"kind": "router", "host": "h1"},
                      "f1": {"kind": "firewall", "rules": [], "host": "h2"},
                      "f2": {"kind": "firewall", "rules": [], "host": "h2"},
                      "dst": {"kind": "host", "host": "h2"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "f1"]},
                      {"endpoints": ["f1", "f2"]}, {"endpoints": ["f2", "dst"]}],
            "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                "dport": 7999}],
                               "functions": ["f1", "f2"], "egress": "dst"}}}


def _down_leaves_nothing(ms, lab: str, on: tuple[str, ...]) -> None:
    rep = lifecycle.down(lab)
    assert rep.errors == [] and nothing_left(lab) and not lab_dir(lab).exists()
    for m in on:
        assert not (ms.dir / f"state-{m}" / "labs" / lab).exists()


def test_an_ssh_host_with_no_node_comes_up_and_takes_a_migrated_instance(lab_name, tmp_path,
                                                                         capsys):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        try:
            plan = lifecycle.up(load_lab_dict(empty_host_lab(lab_name, ms)))
            # the empty host's share has its maps (empty), so every reader finds them
            assert (lab_dir(lab_name) / "@h3" / "maps" / "sfc_masks").exists()
            assert [h.nodes for h in plan.hosts if h.name == "h3"] == [[]]
            assert send(plan, 7999, 10) == 10
            assert main(["chain", "ls", lab_name, "--json"]) == 0
            node, inst = add_mig(lab_name, tmp_path, capsys)
            assert inst["host"] == "h1"  # the first host with room
            assert main(["chain", "migrate", lab_name, node, "--to", "h3", "--json"]) == 0
            m = json.loads(capsys.readouterr().out)
            assert m["host"] == "h3"
            clone = m["clone"]
            after = lifecycle.load_plan(lab_name)[1]
            assert next(h for h in after.hosts if h.name == "h3").nodes == [clone]
            t = chains.trace(lab_name, "mig")
            assert t["in_order"] and t["delivered"], t
            assert clone in [h["seen_at"] for h in t["paths"][0]["hops"]]
            before = _proxy_in(lab_name, "mig", clone)
            assert send(plan, 5002, 30) == 30
            assert _proxy_in(lab_name, "mig", clone) - before >= 30
            assert send(plan, 7999, 10) == 10  # the lab file's chain is untouched
        finally:
            _down_leaves_nothing(ms, lab_name, ("m1", "m2", "m3"))


def _wait(f, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not (got := f()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


@pytest.mark.serial  # times or counts what the machine's load changes
def test_an_instance_migrated_to_a_joined_host_fails_over_within_a_second(lab_name, tmp_path,
                                                                          capsys, sfcgen):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path, spare=True) as ms:
        g = None
        watchers: dict[str, int] = {}
        try:
            plan = lifecycle.up(load_lab_dict(chain_lab(lab_name, ms, memory="256M")))
            capsys.readouterr()
            assert main(["host", "add", lab_name, "m4", "--ssh", f"root@{SPARE['m4']}",
                         "--key", str(ms.key), "--agent-state", str(ms.dir / "state-m4"),
                         "--json"]) == 0
            joined = json.loads(capsys.readouterr().out)
            assert "m4" not in joined["watcher"]  # it holds nothing yet
            # every running host's agent already knows m4 as a peer
            for m in ("m1", "m3"):
                peers = json.loads((ms.dir / f"state-{m}" / "labs" / lab_name /
                                    "peers.json").read_text())["peers"]
                assert peers["m4"].split("/")[0] == SPARE["m4"], (m, peers)
            cf = tmp_path / "video.json"
            cf.write_text(json.dumps({"name": "video", "attach": "r1", "egress": "dst",
                                      "classifiers": [{"ingress": "src", "proto": "udp",
                                                       "dport": "5000-5010"}],
                                      "functions": [{"name": "m", "kind": "tun",
                                                     "exec": COUNTER, "instances": 2,
                                                     "cpu": 0.2, "memory": "64M"}]}))
            assert main(["chain", "add", lab_name, str(cf), "--json"]) == 0
            d = json.loads(capsys.readouterr().out)
            names = sorted(d["instances"])
            assert "m4" not in {i["host"] for i in d["instances"].values()}
            assert main(["chain", "migrate", lab_name, names[0], "--to", "m4", "--json"]) == 0
            m = json.loads(capsys.readouterr().out)
            victim, other = m["clone"], names[1]
            # the migration started m4's watcher, with the lab's peers
            assert m["host"] == "m4" and m["watcher_errors"] == [], m
            watchers = dict(m["watcher"])
            assert {"h1", "m4"} <= set(watchers) and _running(watchers["m4"])
            m4 = ms.dir / "state-m4" / "labs" / lab_name
            assert set(json.loads((m4 / "peers.json").read_text())["peers"]) == \
                {"h1", "h2", "h3", "m4"}
            h1 = ms.dir / "state-m1"
            dst = str(plan.address_of("dst"))
            g = NativeGenerator(plan.netns_of("src"), plan.netns_of("dst"), dst, port=5003,
                                flows=64)
            assert g.trial(1000, 1.0, 64).received > 0
            assert _proxy_in(lab_name, "video", victim) > 0
            # kill -9 of the clone's program on m4: out of the hash at h1 within a second
            pids = subprocess.run(["ip", "netns", "pids", f"sfclab:{lab_name}:{victim}"],
                                  capture_output=True, text=True, check=True).stdout.split()
            assert pids
            n_before = len(_host_events(h1, lab_name, "failover"))
            t_kill = time.time()
            lost = _host_events(h1, lab_name, "peer-lost")
            assert not [e for e in lost if e["peer"] == "m4"], lost  # m4 reports all along
            for pid in pids:
                if int(pid) != watchers["m4"]:  # its program, not m4's watcher beside it
                    os.kill(int(pid), signal.SIGKILL)
            ev = _wait(lambda: _host_events(h1, lab_name, "failover")[n_before:])
            assert ev, "no failover on h1 for the instance on m4"
            print(f"failover of an instance migrated to a joined SSH host: kill to slot "
                  f"rewrite {ev[-1]['time'] - t_kill:.3f} s")
            assert ev[-1]["time"] - t_kill < 1.0, ev
            assert ev[-1]["instances_out"] == [victim] and ev[-1]["paths_left"] == 1
            # reported by m4's watcher (m4 is no silent peer)
            assert not [e for e in _host_events(h1, lab_name, "peer-lost")
                        if e["peer"] == "m4"]
            down = _wait(lambda: _host_events(ms.dir / "state-m4", lab_name, "instance-down"))
            assert down and down[-1]["instance"] == victim, \
                (down, sorted(p.name for p in m4.iterdir()))
            before_o = _proxy_in(lab_name, "video", other)
            t2 = g.trial(1000, 1.0, 64)
            assert t2.lost == 0, (t2.sent, t2.received)
            assert _proxy_in(lab_name, "video", other) - before_o >= t2.sent
        finally:
            if g is not None:
                g.close()
            _down_leaves_nothing(ms, lab_name, ("m1", "m2", "m3", "m4"))
        assert watchers and not any(_running(p) for p in watchers.values())
