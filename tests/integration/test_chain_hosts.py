"""Hosts of a running lab (issue 14): ``host add`` then placement onto it, ``host rm`` refused
while functions run there and ``--drain`` migrating them first, ``chain migrate --to`` another
host under UDP at 10 kpps (nothing lost), bad host commands (exit 2, nothing changed), and
``down`` after ``kill -9`` in the middle of ``host add`` leaving nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import LabError
from sfclab.hosts import cgroups as host_cgroups
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.state import LabState
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import hostops, migrate
from sfclab.live import request

from .test_chain_ops import base_lab, chain_file, counters, running, send, under_traffic

GROUP = {"name": "grp", "attach": "r1",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5002}],
         "egress": "dst",
         "functions": [{"name": "fw", "kind": "firewall", "rules": [], "instances": 2,
                        "cpu": 0.5, "memory": "32M"}]}


def named(name: str) -> dict:
    """The base lab of test_chain_ops with this test's unique name (conftest's lab_name)."""
    return {**base_lab(), "name": name}


def _host(lab: str, name: str) -> dict:
    return next(h for h in hostops.list_hosts(lab) if h["host"] == name)


def test_host_add_then_placement_spreads_onto_it_and_rm_refused_then_drained(
        lab_name: str, tmp_path: Path, capsys) -> None:
    with running(named(lab_name)) as lab:
        assert main(["host", "add", lab.name, "edge2", "--cpus", "1", "--memory", "256M"]) == 0
        cg = f"sfclab:{lab.name}:@edge2"
        assert netns.exists(f"sfclab:{lab.name}:@edge2")
        assert host_cgroups.usage(cg)["memory_limit_bytes"] == 256 << 20
        d = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, GROUP)))
        # first-fit decreasing, a group spread: one instance on the machine, one on edge2
        assert sorted(i["host"] for i in d["instances"].values()) == ["edge2", "local"]
        on_edge = next(n for n, i in d["instances"].items() if i["host"] == "edge2")
        e = _host(lab.name, "edge2")
        assert e["instances"] == [on_edge] and e["used_cpu"] == 0.5
        assert e["used_memory"] == 32 << 20
        # the instance's processes are in the host's cgroup
        _, plan = lifecycle.load_plan(lab.name)
        assert on_edge in next(h for h in plan.hosts if h.name == "edge2").nodes
        assert send(lab, "src", str(lab.address("dst")), 41000, 5002, 50) == 50
        capsys.readouterr()
        assert main(["host", "ls", lab.name, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert {r["host"] for r in rows} == {"local", "edge2"}
        # refused while a function runs there; nothing changed
        assert main(["host", "rm", lab.name, "edge2"]) == ExitStatus.BAD_INPUT
        assert "--drain" in capsys.readouterr().err
        assert _host(lab.name, "edge2")["instances"] == [on_edge]
        # --drain migrates it (make-before-break) to the machine, then the host goes
        d = hostops.remove_host(lab.name, "edge2", drain=True)
        assert [m["instance"] for m in d["moved"]] == [on_edge] and not d["errors"]
        assert d["moved"][0]["host"] == "local"
        assert not netns.exists(f"sfclab:{lab.name}:@edge2")
        assert not Path(f"/sys/fs/cgroup/memory/{cg}").exists()
        assert [r["host"] for r in hostops.list_hosts(lab.name)] == ["local"]
        assert send(lab, "src", str(lab.address("dst")), 41001, 5002, 50) == 50


@pytest.mark.serial  # times or counts what the machine's load changes
def test_migrate_to_another_host_under_udp_loses_nothing(lab_name: str, tmp_path: Path,
                                                         sfcgen: str) -> None:
    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        body = {"name": "one", "attach": "r1",
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5005}],
                "egress": "dst",
                "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.2}]}
        d = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert d["instances"]["fw-1"]["host"] == "local"
        g, t, out = under_traffic(lab, 5005, 10000, 4.0)
        try:
            import time
            time.sleep(1.5)
            m = migrate.migrate(request.MigrateInstance(lab.name, "fw-1", "edge2"))
        finally:
            t.join()
            g.close()
        assert m["host"] == "edge2" and m["clone"] == "fw-1.m1"
        trial = out.get("trial")
        assert trial is not None, out.get("error")
        assert trial.sent >= 30000 and trial.lost == 0, (trial.sent, trial.received)
        assert counters(lab.name)["fw-1.m1"]["proxy_in"] > 0
        assert _host(lab.name, "edge2")["instances"] == ["fw-1.m1"]
        assert _host(lab.name, "local")["instances"] == []
        # the clone crossed hosts: a tunnel in both contexts with its planned VNI, used
        from sfclab.live import record

        from .test_chain_tunnels import tunnel
        got = record.load_addition(LabState(lab.name), "one")
        assert got is not None
        vni = next(n.vni for n in got[0].nodes if n.node == "fw-1.m1")
        assert vni is not None
        for host in ("local", "edge2"):
            t = tunnel(lab.name, host, vni)
            assert t is not None and t["linkinfo"]["info_data"]["id"] == vni, host
            assert t["stats64"]["rx"]["packets"] > 0, host
        with pytest.raises(LabError, match="no host named 'nowhere'"):
            migrate.migrate(request.MigrateInstance(lab.name, "fw-1.m1", "nowhere"))


def test_bad_host_commands_exit_2_and_change_nothing(lab_name: str, tmp_path: Path,
                                                     capsys) -> None:
    with running(named(lab_name)) as lab:
        def mine() -> list[str]:
            return sorted(n for n in os.listdir("/run/netns")
                          if n.startswith(f"sfclab:{lab.name}:"))

        before = mine()
        key = tmp_path / "id"
        key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot used: refused before any "
                       "connection\n-----END OPENSSH PRIVATE KEY-----\n")
        bad = [["host", "add", lab.name, "bad:name", "--cpus", "1", "--memory", "64M"],
               ["host", "add", lab.name, "h2", "--cpus", "0", "--memory", "64M"],
               ["host", "add", lab.name, "h2", "--cpus", "1", "--memory", "1M"],
               ["host", "add", lab.name, "h2", "--cpus", "1", "--memory", "lots"],
               ["host", "add", lab.name, "local", "--cpus", "1", "--memory", "64M"],
               ["host", "add", "nosuchlab0", "h2", "--cpus", "1", "--memory", "64M"],
               ["host", "rm", lab.name, "nowhere"],
               ["host", "rm", lab.name, "local"],
               ["host", "ls", "nosuchlab0"],
               ["chain", "migrate", lab.name, "r1", "--to", "local"],  # no function
               ["chain", "migrate", lab.name, "f1", "--to", "nowhere"],
               ["host", "add", lab.name, "h2", "--cpus", "1"],
               ["host", "add", lab.name, "h2", "--ssh", "nobody", "--key", str(key)],
               ["host", "add", lab.name, "h2", "--ssh", "root@198.18.0.9",
                "--key", str(tmp_path / "missing")],
               ["host", "add", lab.name, "h2", "--ssh", "root@198.18.0.9", "--key", str(key),
                "--port", "0"],
               ["host", "add", lab.name, "h2", "--ssh", "root@198.18.0.9", "--key", str(key)]]
        for argv in bad:
            assert main(argv) == ExitStatus.BAD_INPUT, argv
            err = capsys.readouterr().err
            assert err.startswith("sfclab: error:") and len(err.strip().splitlines()) == 1, err
        assert mine() == before
        assert [r["host"] for r in hostops.list_hosts(lab.name)] == ["local"]
        # --ssh on a lab of emulated hosts: one line saying what is supported
        assert main(["host", "add", lab.name, "h2", "--ssh", "root@198.18.0.9", "--key",
                     str(key), "--port", "2222"]) == ExitStatus.BAD_INPUT
        err = capsys.readouterr().err
        assert "emulated hosts" in err and "--cpus N --memory SIZE" in err, err
        # too big for every host: exit 2 naming the function, its needs and the largest host
        big = dict(GROUP, functions=[dict(GROUP["functions"][0], instances=1, cpu=64)])
        assert main(["chain", "add", lab.name, chain_file(tmp_path, big)]) == 2
        err = capsys.readouterr().err
        assert "fw" in err and "64 CPU" in err and "largest free host is local" in err


def test_down_after_kill_9_of_host_add_leaves_nothing(lab_name: str) -> None:
    d = named(lab_name)
    with running(d) as lab:
        name = lab.name
        # what host add journals and makes, as if killed right after making it
        state = LabState(name)
        state.record([{"op": "netns", "name": f"sfclab:{name}:@h9"},
                      {"op": "host-cgroup", "name": f"sfclab:{name}:@h9"}])
        netns.create(f"sfclab:{name}:@h9", {}, iproute=False)
        host_cgroups.create(f"sfclab:{name}:@h9", [0], 64 << 20)
    assert not netns.exists(f"sfclab:{name}:@h9")
    assert not Path(f"/sys/fs/cgroup/memory/sfclab:{name}:@h9").exists()


@pytest.mark.parametrize("after_s", [0.0, 0.4, 0.8])
def test_kill_9_of_a_real_host_add_then_down_leaves_nothing(lab_name: str,
                                                            after_s: float) -> None:
    import signal
    import subprocess
    import sys
    import time

    with running(named(lab_name)) as lab:
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "host", "add", lab.name,
                              "k9", "--cpus", "1", "--memory", "64M"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(after_s)  # start-up takes about half a second: before, during, after
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert not netns.exists(f"sfclab:{lab_name}:@k9")
    for c in ("cpuset", "memory"):
        assert not Path(f"/sys/fs/cgroup/{c}/sfclab:{lab_name}:@k9").exists()


def test_hosts_and_chains_through_the_api(lab_name: str, tmp_path: Path) -> None:
    from tests.webclient import api_client

    with running(named(lab_name)) as lab, api_client() as c:
        base = f"/api/labs/{lab.name}"
        r = c.post(f"{base}/hosts", json={"name": "edge2", "cpus": 1, "memory": "128M"})
        assert r.status_code == 201, r.text
        assert c.post(f"{base}/hosts", json={"name": "edge2", "cpus": 1,
                                              "memory": "128M"}).status_code == 422
        r = c.post(f"{base}/chains", json=GROUP)
        assert r.status_code == 201, r.text
        placed = {n: i["host"] for n, i in r.json()["instances"].items()}
        assert sorted(placed.values()) == ["edge2", "local"]
        assert c.post(f"{base}/chains", json=GROUP).status_code == 422  # a second 'grp'
        assert send(lab, "src", str(lab.address("dst")), 41002, 5002, 30) == 30
        on_edge = next(n for n, h in placed.items() if h == "edge2")
        r = c.delete(f"{base}/hosts/edge2")
        assert r.status_code == 409 and "--drain" in r.json()["error"]
        r = c.post(f"{base}/chains/grp/migrate", json={"instance": on_edge, "to": "local"})
        assert r.status_code == 200, r.text
        assert r.json()["host"] == "local"
        assert c.post(f"{base}/chains/grp/migrate",
                      json={"instance": r.json()["clone"], "to": "mars"}).status_code == 404
        rows = {h["host"]: h for h in c.get(f"{base}/hosts").json()}
        assert rows["edge2"]["instances"] == [] and len(rows["local"]["instances"]) == 2
        r = c.delete(f"{base}/hosts/edge2")
        assert r.status_code == 200 and r.json()["moved"] == [], r.text
        r = c.delete(f"{base}/chains/grp")
        assert r.status_code == 200 and not r.json()["errors"], r.text
        assert c.delete(f"{base}/chains/grp").status_code == 404
        assert [h["host"] for h in c.get(f"{base}/hosts").json()] == ["local"]
        assert not [n for n in os.listdir("/run/netns")  # this lab's only: others run too
                    if n.startswith(f"sfclab:{lab.name}:fw") or n == f"sfclab:{lab.name}:@edge2"]


def test_a_customer_binary_placed_on_an_added_host_runs_in_its_cgroups(
        lab_name: str, tmp_path: Path) -> None:
    from .test_chain_ops import COUNTER

    with running(named(lab_name)) as lab:
        hostops.add_host(lab.name, "big", 2, 512 << 20)
        body = {"name": "m", "attach": "r1", "egress": "dst",
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5003}],
                "functions": [{"name": "meter", "kind": "tun", "exec": COUNTER, "cpu": 1.5,
                               "instances": 2, "memory": "64M"}]}
        d = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        # spread, and the machine has no 1.5 CPUs left for a second one anyway
        assert {n: i["host"] for n, i in d["instances"].items()} == \
            {"meter-1": "local", "meter-2": "big"}
        assert send(lab, "src", str(lab.address("dst")), 41003, 5003, 20) == 20
        pids = netns.pids_in([f"sfclab:{lab.name}:meter-2"])
        assert pids
        for pid in pids:
            groups = Path(f"/proc/{pid}/cgroup").read_text()
            assert f"sfclab:{lab.name}:@big" in groups, groups
        # the host's memory cgroup accounts the instance's (hierarchical)
        assert host_cgroups.usage(f"sfclab:{lab.name}:@big")["memory_usage_bytes"] > 0
    # down (the host still holding its instance) removed the added host's cgroups
    for c in ("cpuset", "memory"):
        assert not Path(f"/sys/fs/cgroup/{c}/sfclab:{lab_name}:@big").exists()


def test_placement_over_the_lab_files_hosts_with_a_path_through_a_tunnel(
        lab_name: str, tmp_path: Path) -> None:
    d = named(lab_name)
    d["hosts"] = {"c1": {"cpus": 1, "memory": "512M"}, "c2": {"cpus": 1, "memory": "512M"}}
    for n, h in (("src", "c1"), ("r1", "c1"), ("f1", "c2"), ("dst", "c2")):
        d["nodes"][n]["host"] = h
    with running(d) as lab:
        add = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, GROUP)))
        assert {n: i["host"] for n, i in add["instances"].items()} == \
            {"fw-1": "c1", "fw-2": "c2"}
        rows = {r["host"]: r for r in hostops.list_hosts(lab.name)}
        assert set(rows) == {"c1", "c2"}  # no implicit host in a lab with hosts
        assert rows["c2"]["instances"] == ["fw-2"] and rows["c2"]["free_cpu"] == 0.5
        assert rows["c2"]["nodes"] == ["f1", "dst"]
        # r1 (c1) reaches dst (c2) over the r1-f1 tunnel; the flow crosses one instance
        assert send(lab, "src", str(lab.address("dst")), 41004, 5002, 40) == 40
        c = counters(lab.name)
        assert c["fw-1"]["proxy_in"] + c["fw-2"]["proxy_in"] == 40
        with pytest.raises(LabError, match="lab file"):
            hostops.remove_host(lab.name, "c2", drain=True)
