"""The plan split per host (pure): every object of a lab in exactly one host's part, each part
a plan of its own that round-trips through JSON (what the agent is sent); the SSH section and
the agent's request handling."""

from __future__ import annotations

import io
import json
import textwrap

import pytest

from sfclab.hosts.ssh import SshTarget
from sfclab.plan.build import build_plan
from sfclab.plan.model import Plan
from sfclab.plan.split import SplitError, check_partition, host_part, split
from sfclab.realize import agent
from sfclab.realize.kinds import load_lab_text

THREE = """
name: p
hosts: {h1: {}, h2: {}, h3: {}}
tenants: {red: {nodes: [a, r]}}
nodes:
  a: {kind: host}
  r: {kind: router, host: h2, tenant: [red, blue]}
  b: {kind: host, host: h3, tenant: blue}
  c: {kind: host, host: h3, tenant: blue}
  s: {kind: host, host: h2}
links:
  - endpoints: [a, r]
  - endpoints: [r, b]
    attach: shortbridge
  - endpoints: [b, c]
  - endpoints: ["b:x", "c:x"]
    attach: bridge
    rate: 20mbit
  - endpoints: [r, s]
"""


def plan(text: str = THREE) -> Plan:
    return build_plan(load_lab_text(textwrap.dedent(text), "lab.yaml"), cpus=[0, 1])


def test_every_object_is_in_exactly_one_part():
    p = plan()
    parts = split(p)
    assert list(parts) == ["h1", "h2", "h3"]
    check_partition(p, parts)
    assert [n.node for n in parts["h1"].namespaces] == ["a"]
    assert sorted(n.node for n in parts["h2"].namespaces) == ["r", "s"]
    assert sorted(n.node for n in parts["h3"].namespaces) == ["b", "c"]
    # routes, functions and tenant tables follow their node
    assert set(parts["h2"].functions) == {"r"} and not parts["h1"].functions
    assert [t.node for t in parts["h2"].tenancy] == ["r"]
    assert {r.node for r in parts["h3"].routes} <= {"b", "c"}
    # the plain veth between b and c (same host) is h3's alone
    assert [(v.a.node, v.b.node) for v in parts["h3"].veths] == [("b", "c")]


def test_a_tunnel_has_one_end_in_each_of_its_two_parts():
    p = plan()
    parts = split(p)
    tunnel = next(hl for hl in p.host_links if hl.link == 1)
    for h, other in (("h2", "h3"), ("h3", "h2")):
        mine = next(hl for hl in parts[h].host_links if hl.link == 1)
        assert [e.host for e in mine.ends] == [h]
        assert mine.vni == tunnel.vni and mine.mtu == tunnel.mtu
        e = mine.ends[0]
        hosts = {x.name: x.address.split("/")[0] for x in p.hosts}
        assert (e.local, e.remote) == (hosts[h], hosts[other])
    # a link within one host keeps both its ends in that host's part
    shaped = next(hl for hl in parts["h3"].host_links if hl.link == 3)
    assert [e.node for e in shaped.ends] == ["b", "c"] and shaped.rate == 20_000_000
    assert not any(hl.link == 3 for hl in parts["h1"].host_links + parts["h2"].host_links)


def test_a_part_names_one_host_and_round_trips_through_json():
    p = plan()
    part = host_part(p, "h2")
    assert [h.name for h in part.hosts] == ["h2"] and part.lab == p.lab
    again = Plan.from_dict(json.loads(json.dumps(part.to_dict())))
    assert again == part
    assert p.to_dict() == plan().to_dict()  # the split changed nothing of the plan


def test_unsplittable_plans_are_refused():
    with pytest.raises(SplitError, match="no host"):
        host_part(plan(), "h9")
    p = plan()
    parts = split(p)
    parts["h1"].namespaces.append(parts["h2"].namespaces[0])
    with pytest.raises(SplitError, match="in 2 parts"):
        check_partition(p, parts)


def test_ssh_keys_resolve_against_the_lab_files_folder(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n"
                                          "(only the first line is checked here)\n"
                                          "-----END OPENSSH PRIVATE KEY-----\n")
    f = tmp_path / "lab.yaml"
    f.write_text("name: s\nhosts:\n  h1: {address: 198.19.255.9, ssh: {key: keys/id, port: "
                 "2222, python: /opt/sfclab/bin/python}}\nnodes:\n  a: {kind: host}\n")
    from sfclab.realize.kinds import load_lab

    lb = load_lab(str(f))
    ssh = lb.hosts["h1"].ssh
    assert ssh is not None and ssh.key == str(tmp_path / "keys" / "id")
    assert (ssh.user, ssh.port, ssh.state) == ("root", 2222, "/run/sfclab")
    p = build_plan(lb, cpus=[0])
    assert [h.emulated for h in p.hosts] == [False]


def test_the_agent_command_quotes_what_it_is_given():
    t = SshTarget("h1", "198.19.255.9", python="/opt/my python/bin/python3", state="/x y")
    assert t.command("up") == ("SFCLAB_STATE_DIR='/x y' '/opt/my python/bin/python3' -m "
                               "sfclab.live.runtime.agent_verbs up")
    assert SshTarget.from_dict(t.to_dict()) == t


@pytest.mark.parametrize("argv, stdin, status, words", [
    ([], "", 2, "usage"),
    (["format"], "", 2, "usage"),
    (["down"], "[1, 2]", 2, "JSON object"),
    (["down"], "{not json", 2, "bad request"),
])
def test_the_agent_refuses_bad_requests(monkeypatch, capsys, argv, stdin, status, words):
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert agent.main(argv) == status
    assert words in capsys.readouterr().err


def test_the_agent_down_of_an_absent_lab_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    monkeypatch.setattr("sys.stdin", io.StringIO('{"lab": "nolab"}'))
    assert agent.main(["down"]) == 0
    assert json.loads(capsys.readouterr().out) == {"absent": True, "errors": []}


def test_vxlan_is_found_loaded_built_in_or_as_a_module(tmp_path):
    import os

    sysm, lib = tmp_path / "sys", tmp_path / "lib"
    kdir = lib / os.uname().release
    kdir.mkdir(parents=True)
    sysm.mkdir()
    assert not agent.has_vxlan(sysm, lib)
    (kdir / "modules.dep").write_text("kernel/drivers/net/vxlan/vxlan.ko.xz: "
                                      "kernel/net/ipv4/udp_tunnel.ko\n")
    assert agent.has_vxlan(sysm, lib)
    (kdir / "modules.dep").unlink()
    (sysm / "vxlan").mkdir()
    assert agent.has_vxlan(sysm, lib)


def test_a_real_hosts_part_journals_its_context_devices_not_its_context():
    from sfclab.realize import journal

    p = plan(THREE.replace("hosts: {h1: {}, h2: {}, h3: {}}",
                           "hosts: {h1: {address: 198.19.255.1, ssh: {}}, h2: {address: "
                           "198.19.255.2, ssh: {}}, h3: {address: 198.19.255.3, ssh: {}}}"))
    part = host_part(p, "h3")
    entries = journal.entries(part)
    spaces = [e["name"] for e in entries if e["op"] == "netns"]
    assert sorted(spaces) == ["sfclab:p:b", "sfclab:p:c"]  # never the host's own root
    links = {e["name"]: e["alias"] for e in entries if e["op"] == "link"}
    # the bridge of link 3 (within h3) and the ports of h3's ends: marked (a port would go
    # with its peer's namespace, but later than down returns); the shortbridged tunnel of
    # link 1 has no device (its ends are eBPF programs; see docs/hosts.md on real hosts)
    assert links == {n: f"sfclab:p:@h3:{n}" for n in ("br3", "p1e1", "p3e0", "p3e1")}
    # ... whose decapsulation on the host's underlay interface is journaled by its tunnel
    tunnels = [(e["vni"], e["local"], e["remote"]) for e in entries if e["op"] == "tcx-tunnel"]
    assert tunnels == [(1001, "198.19.255.3", "198.19.255.2")]


def test_a_real_hosts_own_ovs_and_hybrid_plugs_are_journaled():
    """On a real host, ``attach: hybrid`` journals the host's own OVS (its daemons outlive the
    lab's namespaces) and each end's plug (``qbr`` bridge, ``qvb`` veth) with its mark; an
    emulated host journals neither (its context namespace holds them)."""
    from sfclab.realize import journal

    hybrid = THREE.replace("    attach: shortbridge", "    attach: hybrid")
    real = hybrid.replace("hosts: {h1: {}, h2: {}, h3: {}}",
                          "hosts: {h1: {address: 198.19.255.1, ssh: {}}, h2: {address: "
                          "198.19.255.2, ssh: {}}, h3: {address: 198.19.255.3, ssh: {}}}")
    part = host_part(plan(real), "h3")
    entries = journal.entries(part)
    assert [e["host"] for e in entries if e["op"] == "host-ovs"] == ["h3"]
    end = next(e for hl in part.host_links if hl.attach == "hybrid" for e in hl.ends)
    links = {e["name"]: e["alias"] for e in entries if e["op"] == "link"}
    for name in (end.hybrid["qbr"], end.hybrid["qvb"], end.vxlan):
        assert links[name] == f"sfclab:p:@h3:{name}"
    assert end.hybrid["qvo"] not in links  # goes with its peer
    assert not [e for e in journal.entries(host_part(plan(real), "h1")) if e["op"] == "host-ovs"]
    emulated = journal.entries(plan(hybrid))
    assert not [e for e in emulated if e["op"] in ("host-ovs", "link")]


def test_why_a_host_is_unreachable_in_one_word():
    import asyncio
    import errno

    import asyncssh

    from sfclab.hosts.ssh import reason_of

    assert reason_of(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == "refused"
    assert reason_of(asyncio.TimeoutError()) == "timeout"
    assert reason_of(TimeoutError()) == "timeout"
    assert reason_of(asyncssh.PermissionDenied("no")) == "auth"
    assert reason_of(asyncssh.HostKeyNotVerifiable("untrusted")) == "host-key"
    assert reason_of(OSError(errno.EHOSTUNREACH, "no route to host")) == "network"
    assert reason_of(asyncssh.ConnectionLost("lost")) == "ssh"


def test_a_down_before_its_up_arrives_marks_that_up_refused(tmp_path, monkeypatch):
    """The agent's ``down`` of a lab it has no part of marks the ``up`` (token) that may still
    be on its way; that ``up`` finds the mark (used up once); old marks are pruned."""
    import os
    import time

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    assert agent.down({"lab": "late", "token": "t1"}) == {"absent": True, "errors": []}
    assert agent._removed_before("late", "t1") and not agent._removed_before("late", "t1")
    assert not agent._removed_before("late", "t2")
    agent.down({"lab": "late", "token": "../x"})  # not a token: no mark, no path from it
    agent.down({"lab": "late"})
    assert [p.name for p in (tmp_path / "labs").iterdir()] == []
    agent.down({"lab": "late", "token": "old"})
    old = tmp_path / "labs" / ".late.removed-old"
    stale = time.time() - agent.REMOVED_KEEP_S - 60
    os.utime(old, (stale, stale))
    agent.down({"lab": "late", "token": "new"})
    assert sorted(p.name for p in (tmp_path / "labs").iterdir()) == [".late.removed-new"]


def test_a_container_goes_to_its_nodes_part_only():
    """A node's container is built by the host its node is on (its agent, over SSH)."""
    p = plan(THREE.replace("s: {kind: host, host: h2}",
                           "s: {kind: host, host: h2, image: localhost/x:1}"))
    parts = split(p)
    check_partition(p, parts)
    assert [c.node for c in parts["h2"].containers] == ["s"]
    assert not parts["h1"].containers and not parts["h3"].containers
    assert Plan.from_dict(json.loads(json.dumps(parts["h2"].to_dict()))).containers == \
        parts["h2"].containers
    parts["h3"].containers = list(parts["h2"].containers)  # on two hosts: refused
    with pytest.raises(SplitError, match="containers"):
        check_partition(p, parts)
