"""Chains changed on a running lab (issue 14): ``chain add``/``rm`` under constant traffic on
another chain (nothing lost), traffic through the added functions, placement refusal and bad
chain files (exit 2, nothing changed), the lab's lock, ``kill -9`` in the middle then ``down``,
a customer binary through ``tun`` with CPU and memory limits, and make-before-break migration
of a NAT under UDP at 10 kpps and a TCP connection (nothing lost, no reset)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sfclab.api import Lab
from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import LabError, SpecError
from sfclab.kernel import netns
from sfclab.realize.dataplane import DataPlane, lab_dir
from sfclab.realize.state import LabState
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import chains, classify, migrate
from sfclab.live.ops import health
from sfclab.live import record, request
from sfclab.traffic.native import NativeGenerator

from .chains import TCP_CLIENT, TCP_SERVER

ROOT = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "tests.integration.sfcprobe"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
COUNTER = [sys.executable, "-m", "sfclab.functions.examples.tun_count"]


def base_lab() -> dict[str, Any]:
    """src - r1 - f1 - dst with one chain of the lab file: UDP to 7999 through f1."""
    return {"name": "o" + secrets.token_hex(3),
            "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                      "f1": {"kind": "firewall", "rules": []}, "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "f1"]},
                      {"endpoints": ["f1", "dst"]}],
            "chains": {"base": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                 "dport": 7999}],
                                "functions": ["f1"], "egress": "dst"}}}


@contextmanager
def running(d: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(d, source="test_chain_ops")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()
        assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{lab.name}:")]
        assert not lab_dir(lab.name).exists()


def chain_file(tmp_path: Path, body: dict[str, Any], name: str = "chain.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(body))
    return str(p)


VIDEO = {"name": "video", "attach": "r1",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": "5000-5010"}],
         "egress": "dst",
         "functions": [{"name": "fw", "kind": "firewall", "rules": [], "instances": 2,
                        "weight": [1, 3], "cpu": 0.25, "memory": "32M"},
                       {"name": "rt", "kind": "router", "cpu": 0.1}]}


def counters(lab: str) -> dict[str, dict[str, int]]:
    from sfclab.realize import lifecycle

    _, plan = lifecycle.load_plan(lab)
    sp = plan.steering
    with DataPlane(lab) as dp:
        return {n: dp.counters(i) for n, i in sp.node_ids.items()}


def echo(lab: Lab, port: int, seconds: float = 6.0) -> subprocess.Popen:
    p = lab.popen("dst", [*PROBE, "udp-echo", str(port), str(seconds)], stdout=subprocess.PIPE,
                  text=True, env=ENV, cwd=ROOT)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def send(lab: Lab, node: str, dst: str, sport: int, dport: int, n: int) -> int:
    """``n`` datagrams from ``node`` to ``dst``:``dport`` (echoed by :func:`echo`): how many
    were answered.  The echo answers until the sender is done (then it is ended by its PID),
    not for a fixed time a loaded machine's slow start of the sender could outlast."""
    server = echo(lab, dport, 120.0)
    try:
        cp = subprocess.run(["ip", "netns", "exec", lab.netns(node), *PROBE, "udp-send", dst,
                             str(sport), str(dport), str(n)], capture_output=True, text=True,
                            env=ENV, cwd=ROOT, timeout=60, check=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return int(cp.stdout.strip())


def under_traffic(lab: Lab, port: int, pps: float, seconds: float
                  ) -> tuple[NativeGenerator, threading.Thread, dict[str, Any]]:
    g = NativeGenerator(lab.netns("src"), lab.netns("dst"), str(lab.address("dst")), port=port)
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["trial"] = g.trial(pps, seconds, 64)
        except Exception as e:  # reported by the test
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return g, t, out


@pytest.mark.serial  # times or counts what the machine's load changes
def test_add_and_remove_under_traffic_on_another_chain(tmp_path: Path, sfcgen: str) -> None:
    with running(base_lab()) as lab:
        dst = str(lab.address("dst"))
        before = counters(lab.name)
        g, t, out = under_traffic(lab, 7999, 10000, 5.0)
        try:
            time.sleep(1.0)
            got = chain_add.add_chain(request.read_chain_file(lab.name,
                                                              chain_file(tmp_path, VIDEO)))
            assert set(got["instances"]) == {"fw-1", "fw-2", "rt-1"}
            # the added chain carries its own traffic, through its instances
            assert send(lab, "src", dst, 41000, 5005, 50) == 50
            mid = counters(lab.name)
            assert mid["rt-1"]["proxy_in"] == 50
            assert mid["fw-1"]["proxy_in"] + mid["fw-2"]["proxy_in"] == 50
            rows = {r["chain"]: r for r in chains.listing(lab.name)}
            assert rows["video"]["functions"] == ["fw-1|fw-2", "rt-1"]
            # down/inspect know the new nodes: they are in the saved plan
            assert "fw-1" in lab.inspect()["nodes"]
            rm = chain_add.remove_chain(request.RemoveChain(lab.name, "video"))
            assert rm["errors"] == [] and sorted(rm["removed"]) == ["fw-1", "fw-2", "rt-1"]
        finally:
            t.join()
            g.close()
        trial = out.get("trial")
        assert trial is not None, out.get("error")
        assert trial.sent > 40000 and trial.lost == 0, (trial.sent, trial.received)
        after = counters(lab.name)
        assert after["f1"]["proxy_in"] - before["f1"]["proxy_in"] >= trial.sent
        assert {r["chain"] for r in chains.listing(lab.name)} == {"base"}
        for n in ("fw-1", "fw-2", "rt-1"):
            assert not netns.exists(f"sfclab:{lab.name}:{n}")
        # the removed chain's traffic is no longer classified: it follows routes
        c0 = counters(lab.name)["src"]["classified"]
        assert send(lab, "src", dst, 41001, 5005, 5) == 5
        assert counters(lab.name)["src"]["classified"] == c0


def _snapshot(lab: Lab) -> tuple[list[str], str | None]:
    spaces = sorted(n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{lab.name}:"))
    return spaces, (LabState(lab.name).dir / "plan.json").read_text()


BAD = [
    ({**VIDEO, "functions": [{"name": "x", "kind": "teleporter"}]}, "functions[0].kind"),
    ({**VIDEO, "functions": [{"name": "x", "kind": "firewall", "policy": "maybe"}]},
     "functions[0].policy"),
    ({**VIDEO, "classifiers": [{"ingress": "nowhere", "proto": "udp"}]},
     "classifiers[0].ingress"),
    ({**VIDEO, "egress": "r9"}, "egress"),
    ({**VIDEO, "attach": "src"}, "attach"),
    ({**VIDEO, "functions": [{"name": "x", "kind": "firewall", "cpu": 64}]}, "functions[0]"),
    ({**VIDEO, "functions": [{"name": "x", "kind": "firewall", "weight": [1, 2]}]},
     "functions[0].weight"),
    ({**VIDEO, "name": "base"}, "name"),
    ({**VIDEO, "classifiers": [{"ingress": "src", "proto": "udp", "dport": 7999}]},
     "classifiers[0]"),
]


def test_bad_chain_files_exit_2_and_change_nothing(tmp_path: Path, capsys) -> None:
    with running(base_lab()) as lab:
        before = _snapshot(lab)
        for i, (body, place) in enumerate(BAD):
            path = chain_file(tmp_path, body, f"bad{i}.json")
            assert main(["chain", "add", lab.name, path]) == ExitStatus.BAD_INPUT, place
            err = capsys.readouterr().err
            assert path in err and place in err, (place, err)
            assert _snapshot(lab) == before, place
        # placement refusal names the function, its needs and the largest free host
        path = chain_file(tmp_path, BAD[5][0], "big.json")
        with pytest.raises(SpecError) as e:
            chain_add.add_chain(request.read_chain_file(lab.name, path))
        assert "function x" in str(e.value) and "needs 64 CPU" in str(e.value)
        assert "largest free host is local" in str(e.value)
        # YAML with a line number
        y = tmp_path / "bad.yaml"
        y.write_text("name: v\nclassifiers: [{ingress: src}]\negress: dst\nfunctions:\n"
                     "  - {name: a, kind: nat, outside: nobody}\n")
        assert main(["chain", "add", lab.name, str(y)]) == ExitStatus.BAD_INPUT
        err = capsys.readouterr().err
        assert f"{y}:5" in err and "outside" in err, err
        assert _snapshot(lab) == before


def test_a_second_command_waits_for_the_lock_or_fails_clearly(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        req = request.read_chain_file(lab.name, chain_file(tmp_path, VIDEO))
        state = LabState(lab.name)
        with record.lab_lock(state):
            with pytest.raises(LabError, match="busy"):
                chain_add.add_chain(request.AddChain(req.lab, req.chain, req.functions,
                                                     req.source, wait_s=0.3))
        # released after 0.5 s by another holder: the command waits and succeeds
        def hold() -> None:
            with record.lab_lock(state):
                time.sleep(0.5)

        h = threading.Thread(target=hold)
        h.start()
        time.sleep(0.1)
        t0 = time.monotonic()
        chain_add.add_chain(req)
        assert time.monotonic() - t0 >= 0.3
        h.join()
        assert "video" in record.additions(state)


def test_kill_9_in_the_middle_of_add_then_down_leaves_nothing(tmp_path: Path) -> None:
    d = base_lab()
    lab = Lab.from_dict(d, source="test_chain_ops").up()
    name = lab.name
    try:
        path = chain_file(tmp_path, {**VIDEO, "functions": [
            {"name": "t", "kind": "tun", "exec": COUNTER, "instances": 3, "cpu": 0.2,
             "memory": "64M"}]})
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "add", name, path],
                             env=dict(ENV, SFCLAB_STATE_DIR=os.environ["SFCLAB_STATE_DIR"]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # kill it once its first namespace exists (the journal names it by then)
        deadline = time.monotonic() + 20
        while not netns.exists(f"sfclab:{name}:t-1") and time.monotonic() < deadline:
            if p.poll() is not None:
                break
            time.sleep(0.005)
        time.sleep(0.05)
        assert p.poll() is None, p.communicate()[1]  # killed in the middle, not after
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert netns.exists(f"sfclab:{name}:t-1")
        # the half-made chain is known: chain rm removes it and the lab goes on
        assert record.load_addition(LabState(name), "video")[1] == "adding"  # type: ignore[index]
        chain_add.remove_chain(request.RemoveChain(name, "video"))
        assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{name}:t-")]
        assert {r["chain"] for r in chains.listing(name)} == {"base"}
    finally:
        lab.down()
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{name}:")]
    assert not lab_dir(name).exists()
    for c in ("cpu", "memory"):
        assert not [x for x in os.listdir(f"/sys/fs/cgroup/{c}") if x.startswith(f"sfclab:{name}:")]
    assert not netns.pids_in([f"sfclab:{name}:t-{k}" for k in (1, 2, 3)])


@pytest.mark.serial  # times or counts what the machine's load changes
def test_customer_binary_through_tun_with_cpu_and_memory_limits(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        body = {**VIDEO, "functions": [{"name": "meter", "kind": "tun", "exec": COUNTER,
                                        "cpu": 0.5, "memory": "64M"}]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert send(lab, "src", str(lab.address("dst")), 41000, 5001, 30) == 30
        lab.plan = None  # the saved plan changed: read it again
        f = lab.function("meter-1")
        assert f is not None
        info = f.inspect()
        assert info["running"] and info["program"]["packets"] >= 30
        assert info["cpu"]["cores"] == 0.5
        assert info["memory"]["limit_bytes"] == 64 * 1024 * 1024
        assert counters(lab.name)["meter-1"]["proxy_in"] == 30


def migrate_under_udp_and_tcp(lab: Lab, instance: str, to: str | None = None
                              ) -> tuple[dict[str, Any], str]:
    """Migrate ``instance`` while a TCP connection (to 6000) and UDP at 10 kpps (to 5005)
    cross it; check nothing was lost, its conntrack entries moved and the connection went on.
    Returns the migration's result and the address the TCP server saw."""
    dst = str(lab.address("dst"))
    server = lab.popen("dst", [sys.executable, "-c", TCP_SERVER, "6000"],
                       stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    client = lab.popen("src", [sys.executable, "-c", TCP_CLIENT, dst, "6000", "4"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert client.stdout is not None and client.stdout.readline().strip() == "connected"
    seen_from = server.stdout.readline().strip()
    g, t, out = under_traffic(lab, 5005, 10000, 4.0)
    try:
        time.sleep(1.5)
        d = migrate.migrate(request.MigrateInstance(lab.name, instance, to))
    finally:
        t.join()
        g.close()
    try:
        assert d["drained"], d
        assert d["conntrack_moved"] >= 2, d  # the UDP flow and the TCP connection
        trial = out.get("trial")
        assert trial is not None, out.get("error")
        assert trial.sent >= 30000 and trial.lost == 0, (trial.sent, trial.received)
        rc = client.wait(timeout=30)
        err = client.stderr.read() if client.stderr else ""
        assert rc == 0, err  # no reset, no timeout: the connection went on through the clone
        done = json.loads(client.stdout.read())
        print(f"TCP through the migration: {done['exchanges']} exchanges, longest gap "
              f"{1000 * done['longest_gap']:.1f} ms")
        assert done["exchanges"] > 0
    finally:
        server.kill()
        server.wait()
    return d, seen_from


def natted(**more: Any) -> dict[str, Any]:
    """A chain file: a symmetric chain at r1 through one NAT, for UDP to 5005 and TCP to 6000
    (what :func:`migrate_under_udp_and_tcp` sends), with ``more`` keys."""
    return {"name": "natted", "attach": "r1", "symmetric": True,
            "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5005},
                            {"ingress": "src", "proto": "tcp", "dport": 6000}],
            "egress": "dst", "functions": [{"name": "nat", "kind": "nat", "cpu": 0.2}],
            **more}


@pytest.mark.serial  # times or counts what the machine's load changes
def test_migrate_a_nat_under_udp_and_tcp_loses_nothing(tmp_path: Path, sfcgen: str) -> None:
    with running(base_lab()) as lab:
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, natted())))
        d, seen_from = migrate_under_udp_and_tcp(lab, "nat-1")
        assert d["clone"] == "nat-1.m1" and d["drained"]
        # the server saw the NAT's address, not the client's
        assert seen_from != str(lab.address("src"))
        assert not netns.exists(f"sfclab:{lab.name}:nat-1")
        c = counters(lab.name)
        assert c["nat-1.m1"]["proxy_in"] > 0 and "nat-1" not in c
        assert [r["functions"] for r in chains.listing(lab.name) if r["chain"] == "natted"] == \
            [["nat-1.m1"]]
        ev = [e for e in record.events(LabState(lab.name)) if e["event"] == "migrated"]
        assert ev and ev[-1]["clone"] == "nat-1.m1"


def test_migrate_refuses_unknown_instances_and_chain_rm_lab_file_chains() -> None:
    with running(base_lab()) as lab:
        with pytest.raises(LabError, match="no function instance"):
            migrate.migrate(request.MigrateInstance(lab.name, "r1"))
        with pytest.raises(LabError, match="no added chain"):
            chain_add.remove_chain(request.RemoveChain(lab.name, "nothing"))
        with pytest.raises(LabError, match="lab file"):
            chain_add.remove_chain(request.RemoveChain(lab.name, "base"))


def _events(lab: Lab, kind: str) -> list[dict[str, Any]]:
    return [e for e in record.events(LabState(lab.name)) if e["event"] == kind]


def _wait(cond, timeout: float = 3.0) -> float:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)
    return time.monotonic() - t0


@pytest.mark.serial  # times or counts what the machine's load changes
def test_failover_when_an_instance_dies_and_drop_when_none_is_left(tmp_path: Path,
                                                                   sfcgen: str) -> None:
    with running(base_lab()) as lab:
        body = {**VIDEO, "functions": [{"name": "m", "kind": "tun", "exec": COUNTER,
                                        "instances": 2, "cpu": 0.3, "memory": "64M"}]}
        got = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert got["watcher"]
        lab.plan = None
        dst = str(lab.address("dst"))
        # many flows: both instances carry some
        g = NativeGenerator(lab.netns("src"), lab.netns("dst"), dst, port=5003, flows=64)
        try:
            t1 = g.trial(1000, 1.0, 64)
            assert t1.lost == 0
            c = counters(lab.name)
            assert c["m-1"]["proxy_in"] > 0 and c["m-2"]["proxy_in"] > 0
            f1 = lab.function("m-1")
            assert f1 is not None
            pid = f1.running_pids()[0]  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
            t_kill = time.monotonic()
            took = _wait(lambda: bool(_events(lab, "failover")))
            assert took < 1.0, took  # out of the group's hash within 1 s
            ev = _events(lab, "failover")[-1]
            assert ev["instances_out"] == ["m-1"] and ev["paths_left"] == 1
            assert _events(lab, "instance-down")[-1]["instance"] == "m-1"
            assert time.monotonic() - t_kill < 2.0
            before = counters(lab.name)
            t2 = g.trial(1000, 1.0, 64)
            after = counters(lab.name)
            assert t2.lost == 0, (t2.sent, t2.received)  # every flow on the survivor
            assert after["m-1"]["proxy_in"] == before["m-1"]["proxy_in"]
            assert after["m-2"]["proxy_in"] - before["m-2"]["proxy_in"] >= t2.sent
            shown = chains.inspect(lab.name, "video")["chains"]["video"]["health"]
            assert shown["instances"]["m-1"]["alive"] is False
            assert any(e["event"] == "failover" for e in shown["events"])
            # the last instance dies: the chain's traffic is dropped and counted, not leaked
            f2 = lab.function("m-2")
            assert f2 is not None
            os.kill(f2.running_pids()[0], signal.SIGKILL)  # type: ignore[attr-defined]
            _wait(lambda: any(e["dropping"] for e in _events(lab, "failover")))
            before = counters(lab.name)
            t3 = g.trial(1000, 1.0, 64)
            after = counters(lab.name)
            assert t3.received == 0 and t3.sent > 0
            assert after["src"]["no_instance"] - before["src"]["no_instance"] == t3.sent
            assert after["f1"]["proxy_in"] == before["f1"]["proxy_in"]  # nothing went past
        finally:
            g.close()
    # the watcher was the lab's: down ended it
    assert not os.path.exists(f"/proc/{got['watcher']}") or \
        open(f"/proc/{got['watcher']}/stat").read().split(")")[1].split()[0] == "Z"


def test_classify_entries_are_saved_shown_and_go_with_an_added_chain(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, VIDEO)))
        more = tmp_path / "more.yaml"
        more.write_text("- {ingress: src, proto: udp, dport: 6100-6103}\n")
        got = classify.classify(lab.name, "video", str(more))
        assert got["entries"] == 1
        base_more = tmp_path / "base-more.yaml"
        base_more.write_text("- {ingress: src, proto: udp, dport: 7001}\n")
        classify.classify(lab.name, "base", str(base_more))
        state = LabState(lab.name)
        saved = record.saved_classifiers(state, "video")
        assert saved[0]["classifiers"] == 1 and saved[0]["source"] == str(more)
        assert chains.read_classifiers(saved[0]["file"])[0].dport == (6100, 6103)
        shown = chains.inspect(lab.name)["chains"]
        assert shown["video"]["classified_later"] == [{"source": str(more), "classifiers": 1,
                                                       "entries": 1}]
        assert shown["base"]["classified_later"][0]["entries"] == 1
        assert shown["video"]["added"]["attach"] == "r1"
        dst = str(lab.address("dst"))
        c0 = counters(lab.name)["src"]["classified"]
        assert send(lab, "src", dst, 41000, 6101, 3) == 3
        assert counters(lab.name)["src"]["classified"] == c0 + 3
        chain_add.remove_chain(request.RemoveChain(lab.name, "video"))
        # the classified-later entries went with the chain: 6101 follows routes again
        assert send(lab, "src", dst, 41000, 6101, 3) == 3
        assert counters(lab.name)["src"]["classified"] == c0 + 3
        assert record.saved_classifiers(state, "video") == []
        assert record.saved_classifiers(state, "base")  # the lab file's chain keeps its own


def test_kill_9_in_the_middle_of_migrate_then_down_leaves_nothing(tmp_path: Path) -> None:
    lab = Lab.from_dict(base_lab(), source="test_chain_ops").up()
    name = lab.name
    try:
        body = {**VIDEO, "functions": [{"name": "t", "kind": "tun", "exec": COUNTER,
                                        "cpu": 0.2, "memory": "64M"}]}
        chain_add.add_chain(request.read_chain_file(name, chain_file(tmp_path, body)))
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "migrate", name,
                              "t-1"], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not netns.exists(f"sfclab:{name}:t-1.m1") and time.monotonic() < deadline:
            if p.poll() is not None:
                break
            time.sleep(0.002)
        assert p.poll() is None, p.communicate()[1]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        lab.down()
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{name}:")]
    assert not lab_dir(name).exists()
    for c in ("cpu", "memory"):
        assert not [x for x in os.listdir(f"/sys/fs/cgroup/{c}") if x.startswith(f"sfclab:{name}:")]


def test_an_instance_that_stops_forwarding_is_shown_stalled(tmp_path: Path, sfcgen: str) -> None:
    with running(base_lab()) as lab:
        body = {**VIDEO, "functions": [{"name": "s", "kind": "tun", "exec": COUNTER}]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        lab.plan = None
        f = lab.function("s-1")
        assert f is not None
        pid = f.running_pids()[0]  # type: ignore[attr-defined]
        g = NativeGenerator(lab.netns("src"), lab.netns("dst"), str(lab.address("dst")),
                            port=5002)
        try:
            os.kill(pid, signal.SIGSTOP)  # alive, but nothing crosses it
            try:
                t = g.trial(500, 2.5, 64)
                _wait(lambda: bool(_events(lab, "stalled")), timeout=3.0)
            finally:
                os.kill(pid, signal.SIGCONT)
            assert t.received < t.sent
            shown = chains.inspect(lab.name, "video")["chains"]["video"]["health"]
            assert shown["instances"]["s-1"] == {"alive": True, "stalled": True}
            assert not _events(lab, "failover")  # shown, not acted on (see steer.health)
            g.trial(500, 2.5, 64)
            _wait(lambda: bool(_events(lab, "crossing")), timeout=3.0)
        finally:
            g.close()


@pytest.mark.serial  # times or counts what the machine's load changes
def test_migration_keeps_a_dead_instance_out_and_watch_starts_the_watcher(
        tmp_path: Path, sfcgen: str) -> None:
    with running(base_lab()) as lab:
        first = health.start(lab.name)  # a lab with only its own chains
        assert first["started"] and first["instances"] == ["f1"]
        assert health.start(lab.name) == {**first, "started": False}
        body = {**VIDEO, "functions": [{"name": "m", "kind": "tun", "exec": COUNTER,
                                        "instances": 3}]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        lab.plan = None
        f = lab.function("m-1")
        assert f is not None
        os.kill(f.running_pids()[0], signal.SIGKILL)  # type: ignore[attr-defined]
        _wait(lambda: bool(_events(lab, "failover")))
        migrate.migrate(request.MigrateInstance(lab.name, "m-2"))
        time.sleep(0.2)  # the watcher has read the new plan
        before = counters(lab.name)
        with NativeGenerator(lab.netns("src"), lab.netns("dst"), str(lab.address("dst")),
                             port=5004, flows=64) as g:
            t = g.trial(1000, 1.0, 64)
        after = counters(lab.name)
        assert t.lost == 0, (t.sent, t.received)
        assert after["m-1"]["proxy_in"] == before["m-1"]["proxy_in"]
        assert after["m-2.m1"]["proxy_in"] > before["m-2.m1"]["proxy_in"]
        assert after["m-3"]["proxy_in"] > before["m-3"]["proxy_in"]


def test_a_function_that_fails_at_start_rolls_the_add_back(tmp_path: Path) -> None:
    from sfclab.errors import RealizeError

    with running(base_lab()) as lab:
        before = _snapshot(lab)
        body = {**VIDEO, "functions": [{"name": "fw", "kind": "firewall", "instances": 2},
                                       {"name": "bad", "kind": "tun", "exec": "/bin/false"}]}
        with pytest.raises(RealizeError, match="bad-1"):
            chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert _snapshot(lab) == before
        assert record.additions(LabState(lab.name)) == {}
        assert not [x for x in os.listdir("/sys/fs/cgroup/cpu") if x.startswith(f"sfclab:{lab.name}:")]
        # the lab goes on: its own chain still carries traffic, and the chain can be added fixed
        assert send(lab, "src", str(lab.address("dst")), 41000, 7999, 3) == 3
        good = {**body, "functions": body["functions"][:1]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, good, "g.json")))


def test_two_commands_at_once_take_turns(tmp_path: Path) -> None:
    with running(base_lab()) as lab:
        paths = []
        for k in (1, 2):
            body = {**VIDEO, "name": f"c{k}", "functions": [
                {"name": f"g{k}", "kind": "firewall", "instances": 2}],
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5100 + k}]}
            paths.append(chain_file(tmp_path, body, f"c{k}.json"))
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        procs = [subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "add", lab.name,
                                   p, "--json"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for p in paths]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
        got = [json.loads(o[0]) for o in outs]
        assert not set(got[0]["labels"]) & set(got[1]["labels"])
        assert not set(got[0]["directions"]) & set(got[1]["directions"])
        dst = str(lab.address("dst"))
        for k in (1, 2):
            assert send(lab, "src", dst, 41000, 5100 + k, 4) == 4
        c = counters(lab.name)
        for k in (1, 2):
            assert c[f"g{k}-1"]["proxy_in"] + c[f"g{k}-2"]["proxy_in"] == 4


def _running(pid: int) -> bool:
    """Is process ``pid`` there and not a zombie waiting to be reaped?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_kill_9_in_the_middle_of_rm_then_down_leaves_nothing(tmp_path: Path) -> None:
    lab = Lab.from_dict(base_lab(), source="test_chain_ops").up()
    name = lab.name
    try:
        body = {**VIDEO, "functions": [{"name": "t", "kind": "tun", "exec": COUNTER,
                                        "instances": 4, "cpu": 0.2, "memory": "64M"}]}
        chain_add.add_chain(request.read_chain_file(name, chain_file(tmp_path, body)))
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "rm", name, "video"],
                             env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        spaces = [f"sfclab:{name}:t-{i}" for i in range(1, 5)]
        programs = [int(pid) for ns in spaces for pid in subprocess.run(
            ["ip", "netns", "pids", ns], capture_output=True, text=True,
            check=True).stdout.split()]
        assert len(programs) >= 4
        deadline = time.monotonic() + 20
        # the kill lands as the first instance's program is ended (the engine's teardown
        # ends the programs, then takes the namespaces out together)
        while all(map(_running, programs)) and time.monotonic() < deadline:
            if p.poll() is not None:
                break
            time.sleep(0.001)
        assert p.poll() is None, p.communicate()[1]  # killed in the middle, not after
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert any(map(netns.exists, spaces))  # some of the chain was left for down
    finally:
        lab.down()
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"sfclab:{name}:")]
    assert not lab_dir(name).exists()
    for c in ("cpu", "memory"):
        assert not [x for x in os.listdir(f"/sys/fs/cgroup/{c}") if x.startswith(f"sfclab:{name}:")]
