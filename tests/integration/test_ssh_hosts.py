"""Real hosts driven over SSH, tested on emulated hosts that run ``sshd`` (see :mod:`.sshd`):
one lab spread over three such hosts, compared object for object with the same lab on
emulated hosts driven directly; ``down`` with one host unreachable keeps its part for a later
``down``; a host that lacks what it needs is refused before anything is made."""

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

from sfclab.errors import LabError, RealizeError
from sfclab.hosts.attach import shortbridge_binary
from sfclab.kernel import netns
from sfclab.realize import lifecycle
from sfclab.realize.inspect import inspect
from sfclab.realize.kinds import load_lab_dict

from .labtools import nothing_left, ping
from .sshd import ADDRESSES, ssh_machines

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
            with pytest.raises(LabError, match="reached over SSH"):
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


def test_kill_9_during_up_over_ssh_then_down_leaves_nothing_on_any_host(machines, lab_name,
                                                                         tmp_path):
    """This machine journals every host before sending any its part: ``kill -9`` once a host's
    agent is making its part, then ``down`` (retried while an agent still finishes) leaves
    nothing on any host."""
    f = tmp_path / "lab.json"  # JSON is YAML
    f.write_text(json.dumps(three_hosts(lab_name, machines)))
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
