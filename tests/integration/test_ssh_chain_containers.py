"""``chain add`` and ``chain migrate`` of instances in containers on hosts driven over SSH (issue
25), on the emulated machines of :mod:`.sshd` (their podman and image store are this
machine's): the instance's host's agent checks its image there, journals its container, holds
its sysfs and starts it joined to the instance's namespace (beside the attach node by the build
engine, across a tunnel once the namespace exists); ``chain rm``, a migration's removal and
``down`` remove it by ID after its labels are checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.kernel import netns, podman, sysfs
from sfclab.live import record
from sfclab.live.ops import chains
from sfclab.realize import lifecycle
from sfclab.realize.inspect import inspect
from sfclab.realize.state import LabState

from .sshd import SPARE, ssh_machines
from .test_containers import image
from .test_ssh_chains import ENV, ROOT, send, ssh_lab

__all__ = ["image"]  # the session fixture that builds the test image

STREAM = [sys.executable, "-m", "tests.integration.udpstream"]

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


@pytest.fixture
def spare_machines(lab_name, tmp_path):
    """The three machines and a fourth, m4, to join a running lab."""
    with ssh_machines(f"m{lab_name[1:]}", tmp_path, spare=True) as ms:
        yield ms


def _add_m4(ms, lab: str) -> None:
    assert main(["host", "add", lab, "m4", "--ssh", f"root@{SPARE['m4']}", "--key",
                 str(ms.key), "--agent-state", str(ms.dir / "state-m4")]) == 0


def _chain(tmp_path: Path, functions: list[dict[str, Any]], name: str = "boxed") -> str:
    """A chain file: UDP 5002 from src through ``functions``, attached at r1, to dst."""
    f = tmp_path / f"{name}.json"
    f.write_text(json.dumps({"name": name, "attach": "r1", "egress": "dst",
                             "classifiers": [{"ingress": "src", "proto": "udp",
                                              "dport": 5002}],
                             "functions": functions}))
    return str(f)


def _journal(ms, m: str, lab: str) -> list[dict[str, Any]]:
    p = ms.dir / f"state-{m}" / "labs" / lab / "journal"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] \
        if p.exists() else []


def _containers(lab: str) -> dict[str, podman.State]:
    """The lab's containers (every host's: the machines share this machine's podman), by
    node."""
    return {st.labels["sfclab.node"]: st
            for st in podman.inspect(podman.find({"sfclab.lab": lab})).values()}


def _held(ms, m: str, lab: str, node: str) -> sysfs.Mount | None:
    return sysfs.mount_at(ms.dir / f"state-{m}" / "sysfs" / lab / node)


def _runs_in(st: podman.State, ns: str) -> bool:
    """The container's process is in namespace ``ns``."""
    return st.running and os.stat(f"/proc/{st.pid}/ns/net").st_ino == netns.inode(ns)[1]


def _proxy_in(lab: str, instance: str) -> int:
    return int(chains.inspect(lab, "boxed")["chains"]["boxed"]["instances"][instance]
               ["proxy_in"])


def test_container_instances_added_on_ssh_hosts_carry_traffic_and_rm_removes_them(
        spare_machines, lab_name, tmp_path, capsys, image):
    """Two instances with containers: box-1 (a ``container`` function) beside r1 on h1, made
    by h1's agent with the build engine; fw-1 (a firewall in a container, 512M: only m4, which
    host add --ssh joined, has room) across a tunnel, made by m4's agent.  Each container is
    journaled on its host, labelled, its sysfs held there, joined to its instance's namespace;
    traffic crosses both; chain rm leaves no container, held sysfs or namespace."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M") as splan:
        _add_m4(ms, lab_name)
        cf = _chain(tmp_path, [
            {"name": "box", "kind": "container", "image": image},
            {"name": "fw", "kind": "firewall", "rules": [], "memory": "512M",
             "image": {"name": image, "cmd": ["sleep", "infinity"]}}])
        capsys.readouterr()
        assert main(["chain", "add", lab_name, cf, "--json"]) == 0
        got = json.loads(capsys.readouterr().out)["instances"]
        assert {n: i["host"] for n, i in got.items()} == {"box-1": "h1", "fw-1": "m4"}
        _, plan = lifecycle.load_plan(lab_name)
        mine = _containers(lab_name)
        assert set(mine) == {"box-1", "fw-1"}, mine
        for node, m in (("box-1", "m1"), ("fw-1", "m4")):
            st = mine[node]
            assert _runs_in(st, plan.netns_of(node)), (node, st)
            assert {"op": "container", "name": st.name, "node": node} in \
                _journal(ms, m, lab_name), node
            assert st.labels["sfclab.mark"] == f"sfclab:{lab_name}:{node}:container"
            held = _held(ms, m, lab_name, node)
            assert held is not None and held.source == f"sfclab:{lab_name}:{node}:sysfs"
        shown = inspect(lab_name)["nodes"]  # read by each host's agent
        for node in ("box-1", "fw-1"):
            c = shown[node].get("container")
            assert c is not None and c["running"] and c["id"] == mine[node].id[:12], (node, c)
        # the chain carries its traffic through both
        before = {n: _proxy_in(lab_name, n) for n in ("box-1", "fw-1")}
        assert send(splan, 5002, 30) == 30
        for n in ("box-1", "fw-1"):
            assert _proxy_in(lab_name, n) - before[n] >= 30, n
        # chain rm: no container of the lab on any host's podman, nothing held, no namespace
        assert main(["chain", "rm", lab_name, "boxed"]) == 0
        capsys.readouterr()
        assert podman.find({"sfclab.lab": lab_name}) == []
        for node, m in (("box-1", "m1"), ("fw-1", "m4")):
            assert _held(ms, m, lab_name, node) is None, node
            assert not netns.exists(f"sfclab:{lab_name}:{node}"), node
        # straight to dst again, across the lab file's tunnels: the flow's first datagram may
        # meet a neighbour not resolved since the chain took it (as in test_chain_tunnels)
        assert send(splan, 5002, 10) >= 9
        # added again: down removes its containers with the rest
        assert main(["chain", "add", lab_name, cf]) == 0
        capsys.readouterr()
        assert set(_containers(lab_name)) == {"box-1", "fw-1"}
    assert podman.find({"sfclab.lab": lab_name}) == []
    assert _held(ms, "m4", lab_name, "fw-1") is None


def _under_udp(plan, pps: int, act) -> tuple[dict[str, Any], Any]:
    """``act()`` while a UDP stream at ``pps`` runs from src to dst:5002 and back (an echo),
    from before ``act`` starts until it has ended: (the stream's count, what ``act``
    returned)."""
    echo = subprocess.Popen(["ip", "netns", "exec", plan.netns_of("dst"), *STREAM, "udp-echo",
                             "5002"], stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    src = None
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        src = subprocess.Popen(["ip", "netns", "exec", plan.netns_of("src"), *STREAM,
                                "udp-stream", str(plan.address_of("dst")), "41500", "5002",
                                str(pps)], stdout=subprocess.PIPE, text=True, env=ENV,
                               cwd=ROOT)
        assert src.stdout is not None and src.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        done = act()
        time.sleep(0.5)
        src.terminate()  # by its PID: it stops sending and counts the last answers
        count = json.loads(src.stdout.readline())
    finally:
        for p in (src, echo):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
    return count, done


@pytest.mark.serial  # counts what the machine's load changes
def test_a_container_instance_migrates_to_an_ssh_host_and_back_under_udp(
        spare_machines, lab_name, tmp_path, capsys, image):
    """A firewall in a container on h1 (beside its attach node r1) migrated to m4 (its clone's
    container made by m4's agent across the tunnel) and back to h1, under UDP at 1 kpps that
    runs from before the first migration until after the second: the loss is reported (make-before-break: none), the old container goes each time, the clone's
    runs with the same memory limit, journaled on its host, its sysfs held there; traffic
    crosses the last clone; down leaves no container."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M") as splan:
        _add_m4(ms, lab_name)
        cf = _chain(tmp_path, [{"name": "fw", "kind": "firewall", "rules": [],
                                "memory": "200M",
                                "image": {"name": image, "cmd": ["sleep", "infinity"],
                                          "memory": "48M"}}])
        capsys.readouterr()
        assert main(["chain", "add", lab_name, cf, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["instances"]["fw-1"]["host"] == "h1"
        moves: list[dict[str, Any]] = []

        def there_and_back() -> int:
            node = "fw-1"
            for to, m, clone in (("m4", "m4", "fw-1.m1"), ("h1", "m1", "fw-1.m2")):
                rc = main(["chain", "migrate", lab_name, node, "--to", to, "--json"])
                if rc != 0:
                    return rc
                out = json.loads(capsys.readouterr().out)
                assert out["clone"] == clone and out["host"] == to, out
                _, plan = lifecycle.load_plan(lab_name)
                now = _containers(lab_name)
                assert set(now) == {clone}, now  # the old one removed
                assert _runs_in(now[clone], plan.netns_of(clone))
                assert {"op": "container", "name": now[clone].name, "node": clone} in \
                    _journal(ms, m, lab_name)
                held = _held(ms, m, lab_name, clone)
                assert held is not None and held.source == f"sfclab:{lab_name}:{clone}:sysfs"
                assert not netns.exists(f"sfclab:{lab_name}:{node}")
                cp = podman._podman(["container", "inspect", "--format",
                                     "{{.HostConfig.Memory}}", now[clone].id])
                assert int(cp.stdout.strip()) == 48 << 20
                moves.append(out)
                node = clone
            return 0

        stream, rc = _under_udp(splan, 1000, there_and_back)
        assert rc == 0
        switches = ", ".join(f"{1000 * m['switch_seconds']:.2f} ms" for m in moves)
        took = ", ".join(f"{m['seconds']} s" for m in moves)
        with capsys.disabled():
            print(f"\ncontainer instance fw-1 -> m4 -> h1 over SSH under UDP at 1 kpps: sent "
                  f"{stream['sent']} in {stream['seconds']} s, lost {stream['lost']}; "
                  f"(runs of sequence numbers {stream['gaps']}); switches {switches}; "
                  f"migrations {took}")
        assert stream["sent"] >= 1000 and stream["lost"] == 0, stream
        assert _held(ms, "m4", lab_name, "fw-1.m1") is None  # the first clone's, released
        before = _proxy_in(lab_name, "fw-1.m2")
        assert send(splan, 5002, 20) == 20
        assert _proxy_in(lab_name, "fw-1.m2") - before >= 20
    assert podman.find({"sfclab.lab": lab_name}) == []


def test_an_image_the_placed_ssh_host_lacks_exits_2_and_makes_nothing(
        spare_machines, lab_name, tmp_path, capsys, image):
    """An image that is in no store: chain add exits 2 naming the file, the function's image
    key and the host the instance was placed on (m4's agent checked it there), with nothing
    journaled, made or recorded on any host."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M"):
        _add_m4(ms, lab_name)
        cf = _chain(tmp_path, [{"name": "fw", "kind": "firewall", "rules": [],
                                "memory": "512M",
                                "image": "localhost/sfclab-test/absent:1"}])
        state = LabState(lab_name)
        before = (state.journal(), {m: _journal(ms, m, lab_name) for m in
                                    ("m1", "m2", "m3", "m4")})
        capsys.readouterr()
        assert main(["chain", "add", lab_name, cf]) == ExitStatus.BAD_INPUT
        err = capsys.readouterr().err
        assert cf in err and "functions[0].image.name" in err, err
        assert "on host m4" in err and "no image 'localhost/sfclab-test/absent:1'" in err, err
        assert (state.journal(), {m: _journal(ms, m, lab_name) for m in
                                  ("m1", "m2", "m3", "m4")}) == before
        assert record.additions(state) == {}
        assert podman.find({"sfclab.lab": lab_name}) == []
        assert not netns.exists(f"sfclab:{lab_name}:fw-1")


def test_kill_9_of_a_container_chain_add_on_ssh_hosts_then_down_leaves_nothing(
        spare_machines, lab_name, tmp_path, capsys, image):
    """``chain add`` killed (SIGKILL) once m4's agent has journaled the instance's container:
    ``down`` reaches m4, whose agent removes what its journal names, the container (made or
    not) and its held sysfs included; no container of the lab is left on any host."""
    ms = spare_machines
    with ssh_lab(ms, lab_name, memory="256M"):
        _add_m4(ms, lab_name)
        capsys.readouterr()
        cf = _chain(tmp_path, [{"name": "fw", "kind": "firewall", "rules": [],
                                "memory": "512M",
                                "image": {"name": image, "cmd": ["sleep", "infinity"]}}],
                    "k9")
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "chain", "add", lab_name, cf],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if any(e.get("op") == "container" for e in _journal(ms, "m4", lab_name)):
                break
            time.sleep(0.01)
        assert p.poll() is None, "chain add ended before m4's agent journaled the container"
        p.kill()  # SIGKILL, by its PID
        p.wait()
    assert podman.find({"sfclab.lab": lab_name}) == []
    assert _held(ms, "m4", lab_name, "fw-1") is None
    assert not netns.exists(f"sfclab:{lab_name}:fw-1")
