"""Labs spread over emulated hosts: links across hosts as VXLAN tunnels for every attach kind,
a bridge segment over three hosts, shaping out of the tenant's reach, nothing in this machine's
root namespace, and ``kill -9`` during ``up`` of a three-host lab."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.hosts.attach import shortbridge_binary
from sfclab.kernel import netns

from .labtools import iperf3, kill_9_during_up_then_down, leftovers, nothing_left, ping


def counters(ns: str | None) -> dict[str, tuple[int, int]]:
    """(rx, tx) packets of every interface of a namespace (None: the root namespace)."""
    ipr = netns.iproute(ns)
    try:
        out = {}
        for m in ipr.get_links():
            st = m.get_attr("IFLA_STATS64")
            out[m.get_attr("IFLA_IFNAME")] = (st["rx_packets"], st["tx_packets"])
        return out
    finally:
        ipr.close()


def links_of(ns: str) -> dict[str, dict]:
    cp = netns.run(ns, ["ip", "-d", "-j", "link", "show"])
    return {d["ifname"]: d for d in json.loads(cp.stdout)}


def two_hosts(name: str, attach: str, **link) -> dict:
    return {"name": name, "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1}},
            "nodes": {"a": {"kind": "host"}, "b": {"kind": "host", "host": "h2"}},
            "links": [{"endpoints": ["a", "b"], "attach": attach, **link}]}


@pytest.mark.parametrize("attach", ["bridge", "shortbridge", "shortbridge-vxlandev", "ovs",
                                    "hybrid"])
def test_ping_and_tcp_across_hosts(running_lab, lab_name, attach):
    """Every attach kind carries ping and TCP; the tunnel ends in the host contexts (at a
    kernel VXLAN device there, or at the shortbridge's own eBPF end: see
    test_shortbridge_tunnel.py)."""
    lab = running_lab(two_hosts(lab_name, attach))
    plan = lab.plan
    a, b = lab.netns("a"), lab.netns("b")
    assert ping(a, str(lab.address("b")), 3).returncode == 0
    out = iperf3(a, b, str(lab.address("b")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    # the tunnel ends in the host contexts, never in a node; the node's MTU fits the underlay
    hl = plan.host_links[0]
    assert hl.vni is not None and hl.mtu == 1450
    for end in hl.ends:
        ctx = links_of(end.netns)
        if attach == "shortbridge":
            assert end.vxlan not in ctx  # the eBPF programs are the tunnel's end
        else:
            vx = ctx[end.vxlan]["linkinfo"]
            assert vx["info_kind"] == "vxlan" and vx["info_data"]["id"] == hl.vni
        node = links_of(end.node_netns)
        assert not any(d.get("linkinfo", {}).get("info_kind") == "vxlan" for d in node.values())
        assert node[end.node_if]["mtu"] == 1450
    if attach.startswith("shortbridge"):  # no bridge at all: only the tc programs join port and tunnel
        for end in hl.ends:
            ctx = links_of(end.netns)
            assert not any(d.get("linkinfo", {}).get("info_kind") in ("bridge", "openvswitch")
                           or d.get("master") for d in ctx.values())


def test_direct_termination_puts_the_tunnel_in_the_node(running_lab, lab_name):
    """``attach: direct`` (for comparisons): the node's interface is the VXLAN device itself,
    its socket still in the host context (the node has no underlay route)."""
    lab = running_lab(two_hosts(lab_name, "direct"))
    hl = lab.plan.host_links[0]
    assert ping(lab.netns("a"), str(lab.address("b")), 3).returncode == 0
    out = iperf3(lab.netns("a"), lab.netns("b"), str(lab.address("b")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    for end in hl.ends:
        node = links_of(end.node_netns)[end.node_if]
        assert node["linkinfo"]["info_kind"] == "vxlan" and node["mtu"] == 1450
        assert node["linkinfo"]["info_data"]["id"] == hl.vni
        assert end.vxlan not in links_of(end.netns)  # moved out of the host context


def test_bridge_segment_with_three_members_on_three_hosts(running_lab, lab_name):
    lab = running_lab({
        "name": lab_name, "hosts": {"h1": {}, "h2": {}, "h3": {}},
        "nodes": {"sw": {"kind": "linux-bridge"}, "m1": {"kind": "host"},
                  "m2": {"kind": "host", "host": "h2"}, "m3": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["m1", "sw"]}, {"endpoints": ["m2", "sw"]},
                  {"endpoints": ["m3", "sw"], "attach": "bridge"}]})
    members = ["m1", "m2", "m3"]
    for x in members:
        for y in members:
            if x != y:
                assert ping(lab.netns(x), str(lab.address(y))).returncode == 0, (x, y)
    out = iperf3(lab.netns("m2"), lab.netns("m3"), str(lab.address("m3")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    assert len({hl.vni for hl in lab.plan.host_links if hl.vni is not None}) == 2


def test_a_tenant_cannot_lift_its_links_rate(running_lab, lab_name):
    """The shaper is in the host context: replacing or deleting the node's own qdisc changes
    nothing."""
    rate = 10_000_000
    lab = running_lab(two_hosts(lab_name, "shortbridge", rate="10mbit"))
    a, b = lab.netns("a"), lab.netns("b")
    netns.run(a, ["tc", "qdisc", "replace", "dev", "eth0", "root", "pfifo", "limit", "10000"])
    netns.run(b, ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
    for src, dst, node in ((a, b, "b"), (b, a, "a")):
        out = iperf3(src, dst, str(lab.address(node)), seconds=3)
        got = out["end"]["sum_received"]["bits_per_second"]
        assert 0 < got <= rate * 1.05, got
    ctx = lab.plan.host_links[0].ends[0].netns
    assert "tbf" in netns.run(ctx, ["tc", "qdisc", "show", "dev", "p0e0"]).stdout


def test_emulated_hosts_traffic_never_appears_in_the_root_namespace(running_lab, lab_name):
    lab = running_lab(two_hosts(lab_name, "bridge"))
    plan = lab.plan
    frames = 5000
    before = counters(None)
    cp = netns.run(lab.netns("a"), ["ping", "-f", "-q", "-c", str(frames), "-w", "30",
                                    str(lab.address("b"))], check=False, timeout=60)
    assert f" {frames} received" in cp.stdout, cp.stdout
    after = counters(None)
    # every frame crossed the underlay, in the lab's namespaces
    ul = counters(plan.hosts[0].netns)[plan.hosts[0].underlay_if]
    assert ul[1] >= frames
    for ifname, (rx, tx) in after.items():
        rx0, tx0 = before.get(ifname, (0, 0))
        assert rx - rx0 < frames and tx - tx0 < frames, (ifname, rx - rx0, tx - tx0)
    # nothing of the underlay or the tunnels exists there
    root = links_of_root()
    assert not any(d.get("linkinfo", {}).get("info_kind") == "vxlan" and
                   (d.get("ifalias") or "").startswith(f"sfclab:{lab_name}:") for d in root)
    routes = subprocess.run(["ip", "-j", "route", "show"], capture_output=True, text=True,
                            check=True).stdout
    assert plan.underlay is not None and plan.underlay.subnet not in routes


def links_of_root() -> list[dict]:
    cp = subprocess.run(["ip", "-d", "-j", "link", "show"], capture_output=True, text=True,
                        check=True)
    return json.loads(cp.stdout)


THREE_HOSTS = """
hosts: {h1: {cpus: 1, memory: 256M}, h2: {cpus: 1}, h3: {}}
nodes:
  a: {kind: host}
  r: {kind: router, host: h2}
  b: {kind: host, host: h3}
links:
  - endpoints: [a, r]
    attach: ovs
  - endpoints: [r, b]
    attach: shortbridge
    rate: 50mbit
"""


def host_cgroups_left(lab: str) -> list[str]:
    return sorted(str(p) for c in ("cpuset", "memory")
                  for p in Path("/sys/fs/cgroup", c).glob(f"sfclab:{lab}:@*"))


def test_kill_9_during_up_of_a_three_host_lab_then_down_leaves_nothing(tmp_path, lab_name):
    caught_midway = kill_9_during_up_then_down(
        tmp_path, lab_name, THREE_HOSTS.rstrip("\n"), (0.05, 0.2, 0.5),
        also_gone=lambda name: not host_cgroups_left(name))
    assert caught_midway >= 1


def test_three_host_lab_up_inspect_down(tmp_path, lab_name):
    f = tmp_path / "lab.yaml"
    f.write_text(f"name: {lab_name}\n{THREE_HOSTS}")
    cli = [sys.executable, "-m", "sfclab.cli"]
    subprocess.run([*cli, "up", str(f)], check=True, capture_output=True)
    try:
        d = json.loads(subprocess.run([*cli, "inspect", lab_name, "--json"], check=True,
                                      capture_output=True, text=True).stdout)
        assert {n: v["host"] for n, v in d["nodes"].items()} == {"a": "h1", "r": "h2", "b": "h3"}
        assert d["hosts"]["h1"]["cgroups"]["memory_limit_bytes"] == 256 * 2**20
        assert [hl["vni"] for hl in d["host_links"]] == [1000, 1001]
        assert [hl["attach"] for hl in d["host_links"]] == ["ovs", "shortbridge"]
        assert all(e["present"] for hl in d["host_links"] for e in hl["ends"])
        assert ping(f"sfclab:{lab_name}:a", d["nodes"]["b"]["interfaces"][0]["addresses"][0]
                    .split("/")[0]).returncode == 0
        text = subprocess.run([*cli, "inspect", lab_name], check=True, capture_output=True,
                              text=True).stdout
        assert "host h2:" in text and "vni 1001" in text
        # a host's context is reachable by exec as @HOST: the tunnel's end is there (link 1 is
        # shortbridged: the eBPF decapsulation at the underlay interface, no VXLAN device)
        cp = subprocess.run([*cli, "exec", lab_name, "@h2", "--", str(shortbridge_binary()),
                             "--netns", "-", "--show", "ul0"], capture_output=True, text=True)
        assert cp.returncode == 0 and "vxlan_decap" in cp.stdout.split(), cp.stderr
        cp = subprocess.run([*cli, "exec", lab_name, "@h9", "--", "true"], capture_output=True,
                            text=True)
        assert cp.returncode == 2 and "no host 'h9'" in cp.stderr
    finally:
        subprocess.run([*cli, "down", lab_name], check=True, capture_output=True)
    assert nothing_left(lab_name) and not host_cgroups_left(lab_name)


def test_a_failure_in_a_host_context_rolls_everything_back(lab_name, monkeypatch):
    """The shortbridge loader missing fails ``up`` at the second link, after the host's OVS
    started and the first link was joined: the error names what is missing, and nothing of
    the lab is left (OVS daemons, cgroups)."""
    from sfclab.api import Lab
    from sfclab.errors import RealizeError

    monkeypatch.setenv("SFCLAB_SHORTBRIDGE", "/nonexistent/sfc-shortbridge")
    spec = {"name": lab_name, "hosts": {"h1": {"memory": "64M"}, "h2": {}},
            "nodes": {"a": {"kind": "host"}, "b": {"kind": "host", "host": "h2"}},
            "links": [{"endpoints": ["a", "b"], "attach": "ovs"},
                      {"endpoints": ["a:s", "b:s"], "attach": "shortbridge"}]}
    with pytest.raises(RealizeError) as ei:
        Lab.from_dict(spec).up()
    assert "/nonexistent/sfc-shortbridge" in str(ei.value)
    assert "shortbridge loader is not built" in str(ei.value)
    assert nothing_left(lab_name), leftovers(lab_name)
    assert not host_cgroups_left(lab_name)


def test_a_functions_process_runs_in_its_hosts_cpuset_and_memory(running_lab, lab_name):
    """A node's processes join its host's cgroups: the host's CPUs (cpuset) and its memory
    limit, with the node's own memory limit inside the host's."""
    counter = [sys.executable, "-m", "sfclab.functions.examples.tun_count"]
    lab = running_lab({
        "name": lab_name, "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1, "memory": "256M"}},
        "nodes": {"a": {"kind": "host"},
                  "f": {"kind": "tun", "exec": counter, "memory": "128M", "host": "h2"}},
        "links": [{"endpoints": ["a", "f"]}]})
    h2 = lab.plan.hosts[1]
    cg = Path("/sys/fs/cgroup")
    pids = (cg / "cpuset" / h2.cgroup / "cgroup.procs").read_text().split()
    assert len(pids) == 1
    own = (cg / "memory" / h2.cgroup / f"sfclab:{lab_name}:f")
    assert own.is_dir() and (own / "cgroup.procs").read_text().split() == pids
    assert (cg / "cpuset" / h2.cgroup / "cpuset.cpus").read_text().strip() == \
        ",".join(map(str, h2.cpus))
    assert int((cg / "memory" / h2.cgroup / "memory.limit_in_bytes").read_text()) == 256 * 2**20
    assert ping(lab.netns("a"), str(lab.address("f"))).returncode == 0


@pytest.mark.parametrize("attach", ["bridge", "shortbridge"])
def test_a_service_chain_across_hosts(running_lab, lab_name, attach):
    """The SFC data plane (XDP and tc programs in the nodes) over hosted links: labelled frames
    cross the tunnels (the MTU keeps the label room), and the function's proxy sees them."""
    lab = running_lab({
        "name": lab_name, "hosts": {"h1": {}, "h2": {}, "h3": {}},
        "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router", "host": "h2"},
                  "fw": {"kind": "firewall", "rules": [], "host": "h2"},
                  "r2": {"kind": "router", "host": "h2"}, "dst": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["src", "r1"], "attach": attach},
                  {"endpoints": ["r1", "fw"]}, {"endpoints": ["fw", "r2"]},
                  {"endpoints": ["r2", "dst"], "attach": attach}],
        "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "tcp"}],
                           "functions": ["fw"], "egress": "dst", "symmetric": True}}})
    plan = lab.plan
    assert plan.underlay is not None and plan.underlay.mtu == 1514 + 50  # label room carried
    out = iperf3(lab.netns("src"), lab.netns("dst"), str(lab.address("dst")), seconds=1)
    assert out["end"]["sum_received"]["bytes"] > 1_000_000
    info = lab.inspect()["nodes"]
    assert info["src"]["sfc"]["counters"]["classified"] > 100
    assert info["fw"]["sfc"]["counters"]["proxy_in"] > 100
