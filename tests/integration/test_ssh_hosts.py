"""Real hosts driven over SSH, tested on emulated hosts that run ``sshd`` (see :mod:`.sshd`):
one lab spread over three such hosts, compared object for object with the same lab on
emulated hosts driven directly (also with ``attach: ovs``/``hybrid``: each host's own OVS);
``down`` with one host unreachable keeps its part for a later ``down`` and says so (host,
address, why; exit 1); ``exec`` on a node of such a host runs there; a host that lacks what
it or its part needs (a function's tool) is refused before anything is made."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sfclab import api
from sfclab.errors import LabError, RealizeError, ToolError
from sfclab.hosts.attach import shortbridge_binary
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.inspect import inspect
from sfclab.realize.kinds import load_lab_dict

from .labtools import iperf3, nothing_left, ping
from .sshd import ADDRESSES, ssh_machines

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

HOSTS = {"h1": "m1", "h2": "m2", "h3": "m3"}


def three_hosts(name: str, ssh=None) -> dict:
    """a and d on h1, the router r and b on h2, c on h3: a shaped bridged tunnel, a
    shortbridged one, one terminated in its nodes (direct) and a plain veth."""
    hosts = {}
    for h, m in HOSTS.items():
        hosts[h] = {"address": ADDRESSES[m]}
        if ssh is not None:
            hosts[h]["ssh"] = ssh.ssh(m)
    return {"name": name, "hosts": hosts,
            "nodes": {"a": {"kind": "host", "host": "h1"},
                      "r": {"kind": "router", "host": "h2"},
                      "b": {"kind": "host", "host": "h2"},
                      "c": {"kind": "host", "host": "h3"},
                      "d": {"kind": "host", "host": "h1"}},
            "links": [{"endpoints": ["a", "r"], "rate": "50mbit"},
                      {"endpoints": ["r", "c"], "attach": "shortbridge"},
                      {"endpoints": ["b", "r"]},
                      {"endpoints": ["d", "c"], "attach": "direct"}]}


def objects(ns: str, skip: tuple[str, ...] = ()) -> dict:
    """Interfaces (kind, MTU, master's name, VNI, addresses) and routes of a namespace."""
    links = json.loads(netns.run(ns, ["ip", "-d", "-j", "link", "show"]).stdout)
    addrs = json.loads(netns.run(ns, ["ip", "-j", "addr", "show"]).stdout)
    by_index = {d["ifindex"]: d["ifname"] for d in links}
    out = {}
    for d in links:
        if d["ifname"] in skip:
            continue
        info = d.get("linkinfo", {})
        data = info.get("info_data", {})
        out[d["ifname"]] = {
            "kind": info.get("info_kind"), "mtu": d["mtu"], "up": "UP" in d["flags"],
            "master": d.get("master"), "vni": data.get("id"),
            "local": data.get("local"), "remote": data.get("remote"),
            "link": by_index.get(data.get("link")) if data.get("link") else None,
            "addresses": sorted(f"{a['local']}/{a['prefixlen']}" for x in addrs
                                if x["ifname"] == d["ifname"] for a in x["addr_info"]
                                if a["family"] == "inet")}
    qdiscs = {q["dev"]: q["kind"] for q in
              json.loads(netns.run(ns, ["tc", "-j", "qdisc", "show"]).stdout)
              if q.get("root")}
    for name, d in out.items():
        d["qdisc"] = qdiscs.get(name)
    routes = sorted((r["dst"], str(r.get("gateway")), str(r.get("dev")), str(r.get("table")))
                    for r in json.loads(netns.run(ns, ["ip", "-j", "route", "show", "table",
                                                       "all"]).stdout)
                    if r.get("dev") not in skip and r.get("table") != "local")
    rules = sorted(json.dumps(r, sort_keys=True)
                   for r in json.loads(netns.run(ns, ["ip", "-j", "rule", "show"]).stdout))
    return {"interfaces": out, "routes": routes, "rules": rules}


def tx_packets(ns: str, ifname: str) -> int:
    d = json.loads(netns.run(ns, ["ip", "-s", "-j", "link", "show", ifname]).stdout)[0]
    return int(d["stats64"]["tx"]["packets"])


def lab_objects(plan, context_of) -> dict:
    """Every node's namespace and every host context's objects of the lab, by node and host."""
    nodes = {n.node: objects(n.name) for n in plan.namespaces}
    hosts = {h.name: objects(context_of(h), skip=("lo", "ul0")) for h in plan.hosts}
    return {"nodes": nodes, "hosts": hosts}


@pytest.fixture
def machines(lab_name, tmp_path):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        yield ms


def test_tenants_over_ssh_are_the_tenants_emulated(machines, lab_name):
    """A shared router of two tenants with identical address plans, over SSH: the same
    interfaces, addresses, tenant tables and rules as on emulated hosts."""
    def tenants(name, ssh=None):
        d = three_hosts(name, ssh)
        d["tenants"] = {"red": {"nodes": ["a", "r"]}, "blue": {"nodes": ["b", "r"]}}
        d["nodes"]["c"]["tenant"] = "red"
        d["nodes"]["d"]["tenant"] = "red"
        return d
    direct = f"d{lab_name[1:]}"
    dplan = lifecycle.up(load_lab_dict(tenants(direct)))
    try:
        splan = lifecycle.up(load_lab_dict(tenants(lab_name, machines)))
        try:
            want = lab_objects(dplan, lambda h: h.netns)
            got = lab_objects(splan, lambda h: machines.context(HOSTS[h.name]))
            assert got == want
            assert any(r[3] not in ("None", "main") for r in got["nodes"]["r"]["routes"])
        finally:
            assert lifecycle.down(lab_name).errors == []
        assert nothing_left(lab_name)
    finally:
        lifecycle.down(direct)


def test_lab_over_ssh_is_the_lab_emulated(machines, lab_name):
    """Three hosts over SSH make exactly the objects three emulated hosts make (namespaces,
    interfaces, addresses, routes, VNIs); traffic crosses both tunnels; down removes all."""
    direct = f"d{lab_name[1:]}"
    dplan = lifecycle.up(load_lab_dict(three_hosts(direct)))
    try:
        ctl = machines.context("ctl")
        before = tx_packets(ctl, "ul0")
        splan = lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
        try:
            # SSH left from the client's place on the underlay (ctl's ul0), as configured
            assert tx_packets(ctl, "ul0") - before > 20
            want = lab_objects(dplan, lambda h: h.netns)
            got = lab_objects(splan, lambda h: machines.context(HOSTS[h.name]))
            assert sorted(n.node for n in splan.namespaces) == ["a", "b", "c", "d", "r"]
            assert got == want
            vnis = {i["vni"] for h in got["hosts"].values() for i in h["interfaces"].values()
                    if i["kind"] == "vxlan"}
            # 1001: shortbridged, ended by eBPF at the hosts' ul0 (no device); 1002: direct,
            # its tunnel ends are in d and c
            assert vnis == {1000}
            for h in ("h2", "h3"):
                ctx = machines.context(HOSTS[h])
                shown = netns.run(ctx, [str(shortbridge_binary()), "--netns", ctx, "--show",
                                        "ul0"]).stdout.split()
                assert "vxlan_decap" in shown, h
            assert {i["vni"] for i in got["nodes"]["d"]["interfaces"].values()} >= {1002}
            assert "tbf" in {i["qdisc"] for i in got["hosts"]["h1"]["interfaces"].values()}
            # this machine journals only which host got which part; each host its own part
            state = lifecycle.LabState(lab_name)
            assert [e["op"] for e in state.journal()] == ["remote-host"] * 3
            for h, m in HOSTS.items():
                assert (machines.dir / f"state-{m}" / "labs" / lab_name / "journal").exists()
            with pytest.raises(LabError, match="reached through its agent"):
                lifecycle.node_netns(lab_name, "a")  # exec: its namespace is on that host
            # inspect reads each part live on its host, through its agent
            seen = inspect(lab_name)
            assert {n: e["host"] for n, e in seen["nodes"].items()} == \
                {"a": "h1", "r": "h2", "b": "h2", "c": "h3", "d": "h1"}
            local = inspect(direct)
            for n, e in seen["nodes"].items():
                assert [i["name"] for i in e["interfaces"]] == \
                    [i["name"] for i in local["nodes"][n]["interfaces"]]
            assert all(x["present"] for hl in seen["host_links"] for x in hl["ends"])
            assert all(h["reachable"] for h in seen["hosts"].values())
            c_addr = next(i["addresses"][0] for i in got["nodes"]["c"]["interfaces"].values()
                          if i["addresses"] and not i["addresses"][0].startswith("127."))
            assert ping(splan.netns_of("a"), c_addr.split("/")[0], 3).returncode == 0
        finally:
            rep = lifecycle.down(lab_name)
        assert rep.errors == [] and rep.namespaces == 5
        assert nothing_left(lab_name)
        for m in HOSTS.values():  # the machines' contexts hold nothing of the lab any more
            names = set(objects(machines.context(m))["interfaces"])
            assert names == {"lo", "ul0"}
            ctx = machines.context(m)  # nor the shortbridge's programs on the underlay
            assert "vxlan_decap" not in netns.run(ctx, [str(shortbridge_binary()), "--netns",
                                                        ctx, "--show", "ul0"]).stdout.split()
    finally:
        lifecycle.down(direct)


def test_down_with_a_host_unreachable_keeps_its_part_for_later(machines, lab_name):
    """``down`` removes the reachable hosts' parts, names the unreachable one, keeps it
    journaled; a later ``down`` (the host back) removes the rest and the lab."""
    plan = lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    c_ns = plan.netns_of("c")
    machines.stop("m3")
    seen = inspect(lab_name)
    assert seen["hosts"]["h3"]["reachable"] is False and seen["hosts"]["h1"]["reachable"]
    rep = lifecycle.down(lab_name)
    assert len(rep.errors) == 1 and "host h3" in rep.errors[0] and "unreachable" in rep.errors[0]
    assert not netns.exists(plan.netns_of("a")) and not netns.exists(plan.netns_of("r"))
    assert netns.exists(c_ns)
    state = lifecycle.LabState(lab_name)
    assert state.exists and state.meta()["status"] == "removing"
    assert [e["host"] for e in state.journal()] == ["h3"]
    machines.start("m3")
    rep = lifecycle.down(lab_name)
    assert rep.errors == [] and rep.namespaces == 1
    assert not state.exists and nothing_left(lab_name)


@pytest.mark.parametrize("change, words", [
    ({"python": "/nonexistent/python3"}, "host h3: agent check failed"),  # no sfclab there
    ({"port": 2222}, "host h3 .* unreachable"),  # nothing listens there
    ({"known_hosts": None}, "host h3 .* unreachable.*not trusted"),  # unknown host key
])
def test_a_host_that_fails_its_check_is_refused_before_anything(machines, lab_name, change,
                                                                words, monkeypatch, tmp_path):
    """Every host is checked (reachable, its host key trusted, its agent runs, it has what it
    needs) before any part is sent: a failing host leaves nothing on any host and no state
    here."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ssh/known_hosts to trust
    d = three_hosts(lab_name, machines)
    d["hosts"]["h3"]["ssh"].update(change)
    with pytest.raises(RealizeError, match=words):
        lifecycle.up(load_lab_dict(d))
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    for m in HOSTS.values():
        assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()


@pytest.mark.parametrize("attach", [None, "hybrid"])
def test_kill_9_during_up_over_ssh_then_down_leaves_nothing_on_any_host(machines, lab_name,
                                                                         tmp_path, attach):
    """This machine journals every host before sending any its part: ``kill -9`` once a host's
    agent is making its part, then ``down`` (retried while an agent still finishes) leaves
    nothing on any host (with ``hybrid``: no OVS daemon either)."""
    f = tmp_path / "lab.json"  # JSON is YAML
    d = three_hosts(lab_name, machines) if attach is None else \
        ovs_lab(lab_name, attach, machines)
    f.write_text(json.dumps(d))
    journal = os.path.join(os.environ["SFCLAB_STATE_DIR"], "labs", lab_name, "journal")
    p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "up", str(f)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    made = [f"sfclab:{lab_name}:{n}" for n in ("a", "r", "c")]
    while p.poll() is None and time.monotonic() < deadline:
        if any(netns.exists(ns) for ns in made):  # a host's agent is making its part
            break
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert any(netns.exists(ns) for ns in made)
    with contextlib.suppress(FileNotFoundError):
        assert len(Path(journal).read_text().splitlines()) == 3  # journaled before sent
    for _ in range(20):  # a host whose agent still holds its lab's lock is retried
        rep = lifecycle.down(lab_name)
        if not lifecycle.LabState(lab_name).exists:
            break
        assert all("busy" in e or "unreachable" in e for e in rep.errors), rep.errors
        time.sleep(0.5)
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    for m in HOSTS.values():
        assert set(objects(machines.context(m))["interfaces"]) == {"lo", "ul0"}
        assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()
        assert ovs_processes(machines.context(m)) == []


def test_cli_down_with_a_host_unreachable_says_partly_removed_then_retries(machines, lab_name,
                                                                          capsys):
    """``sfclab down`` with one host's ``sshd`` stopped (by its PID): exit 1, the message names
    the host, its address and why, says its part stays journaled and that ``down`` again
    retries it; ``--json`` has each host's outcome.  With the host back, ``down`` removes
    every part on every host."""
    from sfclab.cli import main

    plan = lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    machines.stop("m3")
    try:
        partly_removed(main, capsys, lab_name, plan)
    finally:
        machines.start("m3")
        status = main(["down", lab_name, "--json"])  # the host back: the rest is removed
    assert status == 0
    d = json.loads(capsys.readouterr().out)[lab_name]
    assert d["complete"] is True and d["namespaces"] == 1
    assert [(h["host"], h["removed"]) for h in d["hosts"]] == [("h3", True)]
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    for m in HOSTS.values():  # every machine's context holds nothing of the lab any more
        assert set(objects(machines.context(m))["interfaces"]) == {"lo", "ul0"}
        assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()


def partly_removed(main, capsys, lab_name, plan) -> None:
    """``down`` with host h3 unreachable: exit 1, the message and the JSON."""
    assert main(["down", lab_name]) == 1
    out = capsys.readouterr().out
    assert f"lab '{lab_name}' is only partly removed" in out
    assert f"host h3 ({ADDRESSES['m3']}): connection refused" in out
    assert "stays journaled" in out and f"'sfclab down {lab_name}' again" in out
    assert f"lab '{lab_name}' removed" not in out
    assert netns.exists(plan.netns_of("c")) and not netns.exists(plan.netns_of("a"))
    assert main(["down", lab_name, "--json"]) == 1  # still unreachable: the same, as JSON
    d = json.loads(capsys.readouterr().out)[lab_name]
    assert d["complete"] is False
    assert [(h["host"], h["address"], h["removed"], h.get("reason")) for h in d["hosts"]] == \
        [("h3", ADDRESSES["m3"], False, "refused")]
    assert [e["host"] for e in lifecycle.LabState(lab_name).journal()] == ["h3"]


def sfclab(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                          text=True, input=input, timeout=60)


def test_exec_on_a_node_of_an_ssh_host_runs_there(machines, lab_name):
    """``sfclab exec LAB NODE -- CMD`` for a node on a host reached over SSH runs in the node's
    namespace on that host (its interfaces are the node's), stdout, stderr and stdin passed
    through, its exit status passed through; ``@HOST`` is the host's context; a bad node name
    exits 2.  The Python API's ``Lab.exec`` runs there too, output captured."""
    plan = lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    try:
        ctl = machines.context("ctl")
        before = tx_packets(ctl, "ul0")
        cp = sfclab("exec", lab_name, "c", "--", "sh", "-c",
                    "ip -j link show; echo to-stderr >&2; exit 7")
        assert cp.returncode == 7, cp.stderr
        assert cp.stderr == "to-stderr\n"
        seen = {d["ifname"] for d in json.loads(cp.stdout)}
        assert seen == set(objects(plan.netns_of("c"))["interfaces"])
        assert tx_packets(ctl, "ul0") - before > 5  # it went over SSH, from ctl
        cp = sfclab("exec", lab_name, "b", "--", "tr", "a-z", "A-Z", input="through\n")
        assert (cp.returncode, cp.stdout) == (0, "THROUGH\n")
        cp = sfclab("exec", lab_name, "@h2", "--", "ip", "-j", "link", "show")
        assert cp.returncode == 0, cp.stderr
        assert {d["ifname"] for d in json.loads(cp.stdout)} == \
            set(objects(machines.context("m2"))["interfaces"])
        c_addr = plan.address_of("c")
        cp = sfclab("exec", lab_name, "a", "--", "ping", "-c", "2", "-W", "2", str(c_addr))
        assert cp.returncode == 0 and "2 received" in cp.stdout, cp.stdout + cp.stderr
        cp = sfclab("exec", lab_name, "a", "--", "ping", "-c", "1", "-W", "1", "198.18.255.254")
        assert cp.returncode == 1  # ping's own status: no answer
        cp = sfclab("exec", lab_name, "nosuch", "--", "true")
        assert cp.returncode == 2 and "has no node 'nosuch'" in cp.stderr
        cp = sfclab("exec", lab_name, "@nosuch", "--", "true")
        assert cp.returncode == 2 and "has no host 'nosuch'" in cp.stderr
        # the Python API's exec: the same, output captured
        lab = api.Lab(load_lab_dict(three_hosts(lab_name, machines)))
        got = lab.exec("c", ["ip", "-j", "link", "show"]).stdout
        assert {d["ifname"] for d in json.loads(got)} == \
            set(objects(plan.netns_of("c"))["interfaces"])
        assert lab.exec("b", ["tr", "a-z", "A-Z"], input="api\n").stdout == "API\n"
        cp = lab.exec("c", ["sh", "-c", "echo e >&2; exit 3"], check=False)
        assert (cp.returncode, cp.stderr) == (3, "e\n")
        with pytest.raises(ToolError, match="status 3"):
            lab.exec("c", ["sh", "-c", "exit 3"])
    finally:
        assert lifecycle.down(lab_name).errors == []
    assert nothing_left(lab_name)


def path_without(tmp_path: Path, program: str) -> Path:
    """A Python that runs with a ``PATH`` of every program of this one's ``PATH`` but
    ``program`` (links in a directory of the test's own)."""
    bin_dir = tmp_path / f"bin-without-{program}"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name != program and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(d, name))
    wrapper = tmp_path / f"python-without-{program}"
    wrapper.write_text(f"#!/bin/sh\nPATH={bin_dir} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def test_a_host_without_a_tool_its_part_needs_is_refused_before_anything(machines, lab_name,
                                                                        tmp_path):
    """Each host's agent checks what its own part needs (here: the firewall on h3 runs
    ``nft``) before any host is sent its part: h3's agent runs without ``nft`` in its PATH, so
    ``up`` fails naming h3 and nft, and nothing is made anywhere.  With nft there, the same lab
    comes up (the check is h3's own, not this machine's)."""
    d = three_hosts(lab_name, machines)
    d["nodes"]["c"] = {"kind": "firewall", "host": "h3"}
    d["hosts"]["h3"]["ssh"]["python"] = str(path_without(tmp_path, "nft"))
    with pytest.raises(RealizeError, match=r"host h3: agent check failed.*the 'nft' program "
                       r"\(for firewall node c\)"):
        lifecycle.up(load_lab_dict(d))
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    for m in HOSTS.values():
        assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()
        assert set(objects(machines.context(m))["interfaces"]) == {"lo", "ul0"}
    d["hosts"]["h3"]["ssh"]["python"] = str(path_without(tmp_path, "nothing-missing"))
    plan = lifecycle.up(load_lab_dict(d))
    try:
        tables = netns.run(plan.netns_of("c"), ["nft", "list", "tables"]).stdout
        assert "inet" in tables  # the firewall's ruleset, loaded on h3
    finally:
        assert lifecycle.down(lab_name).errors == []
    assert nothing_left(lab_name)


def ovs_lab(name: str, attach: str, ssh=None) -> dict:
    """a on h1, the router r and b on h2, c on h3; every link joined by ``attach`` (b-r on one
    host: two ports of one bridge), one of them shaped."""
    d = three_hosts(name, ssh)
    d["links"] = [{"endpoints": ["a", "r"], "attach": attach, "rate": "200mbit"},
                  {"endpoints": ["r", "c"], "attach": attach},
                  {"endpoints": ["b", "r"], "attach": attach}]
    del d["nodes"]["d"]
    return d


def ovs_processes(ns: str) -> list[str]:
    """The command lines of the OVS daemons running in namespace ``ns``."""
    out = []
    for pid in netns.pids_in([ns]):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if os.path.basename(argv[0].decode()) in ("ovsdb-server", "ovs-vswitchd"):
                out.append(" ".join(a.decode() for a in argv))
    return out


@pytest.mark.parametrize("attach", ["ovs", "hybrid"])
def test_ovs_and_hybrid_over_ssh_are_the_lab_emulated(machines, lab_name, attach):
    """``attach: ovs``/``hybrid`` on hosts reached over SSH: each host's agent runs that host's
    own OVS (userspace datapath) in its context; ping and TCP cross the tunnels; the objects
    are those of the same lab on emulated hosts driven directly; ``down`` ends each host's OVS
    daemons and leaves nothing on any host."""
    direct = f"d{lab_name[1:]}"
    dplan = lifecycle.up(load_lab_dict(ovs_lab(direct, attach)))
    try:
        splan = lifecycle.up(load_lab_dict(ovs_lab(lab_name, attach, machines)))
        try:
            for m in HOSTS.values():  # each host's own OVS, in its context
                daemons = ovs_processes(machines.context(m))
                assert len(daemons) == 2
                assert all(str(machines.dir / f"state-{m}") in x for x in daemons)
            want = lab_objects(dplan, lambda h: h.netns)
            got = lab_objects(splan, lambda h: machines.context(HOSTS[h.name]))
            assert got == want
            kinds = {i["kind"] for h in got["hosts"].values() for i in h["interfaces"].values()}
            assert "openvswitch" in kinds or "tun" in kinds
            if attach == "hybrid":
                assert {n[:3] for n in got["hosts"]["h2"]["interfaces"]} >= {"qbr", "qvb", "qvo"}
            seen = inspect(lab_name)  # each host's agent reads its OVS-joined ends live
            assert all(x["present"] for hl in seen["host_links"] for x in hl["ends"])
            c_addr = str(splan.address_of("c"))
            assert ping(splan.netns_of("a"), c_addr, 3).returncode == 0
            assert ping(splan.netns_of("b"), c_addr, 3).returncode == 0
            out = iperf3(splan.netns_of("a"), splan.netns_of("c"), c_addr, seconds=1)
            assert out["end"]["sum_received"]["bytes"] > 1_000_000
        finally:
            rep = lifecycle.down(lab_name)
        assert rep.errors == [] and rep.namespaces == 4
        assert nothing_left(lab_name)
        for m in HOSTS.values():  # no device, daemon or state of the lab left on any host
            assert set(objects(machines.context(m))["interfaces"]) == {"lo", "ul0"}
            assert ovs_processes(machines.context(m)) == []
            assert not (machines.dir / f"state-{m}" / "labs" / lab_name).exists()
    finally:
        lifecycle.down(direct)


SILENT = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 22))
s.listen(8)
print("listening", flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accepted, never answered
"""


def test_down_says_why_a_host_is_left(machines, lab_name, tmp_path, capsys):
    """The reason ``down`` gives for a host whose part is left: its ``sshd`` refusing the key
    (``auth``), a listener that never speaks SSH (``timeout``); the host back, ``down``
    removes the rest."""
    from sfclab.cli import main

    lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    machines.stop("m3")
    empty = tmp_path / "no_keys"
    empty.write_text("")
    machines.start("m3", authorized_keys=empty)
    try:
        assert main(["down", lab_name, "--json"]) == 1
        d = json.loads(capsys.readouterr().out)[lab_name]
        assert [(h["host"], h["reason"]) for h in d["hosts"] if not h["removed"]] == \
            [("h3", "auth")]
        assert main(["down", lab_name]) == 1
        assert f"host h3 ({ADDRESSES['m3']}): authentication refused" in \
            capsys.readouterr().out
        machines.stop("m3")
        silent = netns.popen(machines.context("m3"),
                             [sys.executable, "-c", SILENT, ADDRESSES["m3"]],
                             stdout=subprocess.PIPE, text=True)
        try:
            assert silent.stdout is not None and silent.stdout.readline() == "listening\n"
            assert main(["down", lab_name]) == 1
            assert f"host h3 ({ADDRESSES['m3']}): timed out" in capsys.readouterr().out
        finally:
            netns.end_processes([silent.pid])
            silent.wait()
    finally:
        machines.stop("m3")
        machines.start("m3")
        status = main(["down", lab_name])
    assert status == 0 and f"lab '{lab_name}' removed" in capsys.readouterr().out
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    for m in HOSTS.values():
        assert set(objects(machines.context(m))["interfaces"]) == {"lo", "ul0"}


def test_traffic_rate_and_iperf_between_nodes_of_ssh_hosts_run_there(machines, lab_name,
                                                                     sfcgen):
    """``sfclab traffic rate`` between nodes of two hosts reached over SSH: the receiver is
    started and held on c's host by its agent (``proc-start``, asked for its counters by
    ``proc-read``), the sender run on a's host (over SSH, in a's namespace there); what arrived
    is counted, and the warnings say what could not be done there.  ``traffic iperf`` between
    them runs there too: the servers held in c's namespace on h3 by its agent
    (``procs-start``, ``procs-end``), the clients run in a's on h1; the result has the fields
    of a run here, through the 50 Mbit/s link; no iperf3 is left in either namespace, and no
    file of theirs on either host.  A bad request (an unknown node) is exit 2 before anything
    starts; nothing is left after."""
    lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    a_ns, c_ns = f"sfclab:{lab_name}:a", f"sfclab:{lab_name}:c"
    try:
        cp = sfclab("traffic", "rate", lab_name, "--from", "a", "--to", "c", "--rates", "2000",
                    "--duration", "1", "--json")
        assert cp.returncode == 0, cp.stderr
        out = json.loads(cp.stdout)
        (point,) = out["points"]
        # a and c are 2 hosts apart (a on h1, c on h3, through r on h2): 2000/s for 1 s
        assert point["sent"] >= 1000 and point["received"] >= 0.9 * point["sent"], point
        assert any("reached through their agents" in w for w in out["warnings"]), out
        # the receiver was held there, in c's namespace, and ended: no program left there
        assert netns.pids_in([c_ns]) == {}

        cp = sfclab("traffic", "iperf", lab_name, "--from", "a", "--to", "c", "--flows", "2",
                    "--duration", "1", "--json")
        assert cp.returncode == 0, cp.stderr
        out = json.loads(cp.stdout)
        m = out["metrics"]
        # what arrived, through a's 50 Mbit/s link to r: the lab's path, not a shortcut
        assert 1e6 < m["throughput_bps"] < 60e6, m
        assert m["flows"] == 2 and 0 < m["jain_fairness"] <= 1 and "retransmits" in m, m
        assert sum(out["per_flow_bps"]) == pytest.approx(m["throughput_bps"])
        assert out["params"]["from"] == "a" and out["params"]["to"] == "c"
        for f in out["per_flow"]:  # the fields of a run here; no cores pinned there
            assert f["protocol"] == "TCP" and f["received_bps"] > 0 and f["port"] > 0, f
            assert (f["client_core"], f["server_core"]) == (None, None), f
            assert f["client_cpu_s"] >= 0 and f["server_cpu_s"] >= 0, f  # the hosts' rusage
        assert len(out["cpu"]["process_cpu_s"]) == 4
        plan = lifecycle.load_plan(lab_name)[1]
        a_addr, c_addr = str(plan.address_of("a")), str(plan.address_of("c"))
        # the clients ran in a's namespace, the servers in c's: the addresses they used
        for doc in out["raw"]["clients"]:
            (conn,) = doc["start"]["connected"]
            assert (conn["local_host"], conn["remote_host"]) == (a_addr, c_addr), conn
        for doc in out["raw"]["servers"]:
            (conn,) = doc["start"]["connected"]
            assert (conn["local_host"], conn["remote_host"]) == (c_addr, a_addr), conn
        (w,) = out["warnings"]
        assert "h1, h3" in w and "not pinned to cores" in w, w
        # the servers and the clients ended: no program left in either namespace, no file
        assert netns.pids_in([a_ns, c_ns]) == {}
        assert [p for m in ("m1", "m3") for p in (machines.dir / f"state-{m}").rglob("procs/*")
                ] == []

        # a bad request: exit 2 with one line, before anything starts there
        cp = sfclab("traffic", "iperf", lab_name, "--from", "a", "--to", "nosuch",
                    "--duration", "1", "--json")
        assert cp.returncode == 2 and "has no node 'nosuch'" in cp.stderr, cp.stderr
        assert len(cp.stderr.strip().splitlines()) == 1 and cp.stdout == ""
        assert netns.pids_in([a_ns, c_ns]) == {}
    finally:
        assert lifecycle.down(lab_name).errors == []
    assert nothing_left(lab_name)


def test_exec_from_a_terminal_gets_a_terminal_there(machines, lab_name):
    """From a terminal, ``sfclab exec`` on a node of an SSH host gives the command a terminal
    there (an interactive shell reads what is typed), passes its exit status through, and
    leaves this terminal's modes as they were."""
    import pty
    import select
    import termios

    lifecycle.up(load_lab_dict(three_hosts(lab_name, machines)))
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "exec", lab_name, "c", "--",
                              "sh"], stdin=slave, stdout=slave, stderr=slave)
        os.write(master, b"tty; echo $((6*7)) >&2; exit 5\n")
        out = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                out += os.read(master, 65536)
            elif p.poll() is not None:
                break
        if p.poll() is None:
            p.kill()
            p.wait()
            raise AssertionError(f"exec did not end: {out!r}")
        assert p.returncode == 5, out
        text = out.decode(errors="replace")
        assert "/dev/pts/" in text and "42" in text, text  # its terminal; stderr comes too
        assert termios.tcgetattr(slave) == before  # this terminal's modes restored
    finally:
        os.close(master)
        os.close(slave)
        assert lifecycle.down(lab_name).errors == []
    assert nothing_left(lab_name)


def test_a_command_over_ssh_on_the_machines_runs_no_shell_start_up_file(machines):
    """The machines' sessions start at shell level 1 (:mod:`.sshd`), so the login shell runs
    a command as a nested shell would, reading no ``~/.bashrc``: an agent call costs the
    machine's SSH and the agent, not the start-up file of whoever runs the tests."""
    from sfclab.hosts.ssh import SshTarget, run_captured

    t = SshTarget.from_dict({"host": "m1", "address": ADDRESSES["m1"], **machines.ssh("m1")})
    status, out, err = run_captured(t, ["sh", "-c", "echo $SHLVL"])
    assert status == 0, err
    # bash adds one to the level it is given and gives it back when it execs its command:
    # given none it runs at level 1, reads ~/.bashrc, and the command sees 0
    assert int(out) >= 1, out
