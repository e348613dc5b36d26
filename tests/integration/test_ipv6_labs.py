"""Labs of ``ip: dual`` and ``ip: 6`` on real namespaces: a dual-stack chain of router,
firewall and NAT carries ping -6 and iperf3 over IPv6; an IPv6 firewall rule drops one port and
passes another; an IPv6-only lab has no IPv4 and measures over IPv6 by default; a dual-stack
lab over two emulated hosts carries IPv6 through the VXLAN tunnel on the IPv4 underlay;
``inspect --json`` shows the IPv6 addresses; ``down`` leaves nothing; the root namespace's
IPv6 settings are never touched."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import netns
from tests.integration.labtools import leftovers, nothing_left, ping

TCP_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1]))); s.listen(4)
print("ready", flush=True)
s.settimeout(15)
for _ in range(int(sys.argv[2])):
    c, addr = s.accept(); c.sendall(b"hello"); c.close()
    print(addr[0], flush=True)
"""

TCP_CLIENT = r"""
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print(c.recv(100).decode())
except OSError as e:
    print("failed", type(e).__name__)
"""


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *argv], capture_output=True,
                          text=True, timeout=180)


def _root_ipv6() -> tuple[str, str]:
    with open("/proc/sys/net/ipv6/conf/all/disable_ipv6") as a, \
            open("/proc/sys/net/ipv6/conf/all/forwarding") as f:
        return a.read().strip(), f.read().strip()


def _chain(name: str, ip: str | int) -> dict:
    return {"name": name, "ip": ip,
            "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                      "fw": {"kind": "firewall", "rules": [
                          {"action": "drop", "proto": "tcp", "dst": "2001:2::/48",
                           "dport": 9002}]},
                      "nat": {"kind": "nat", "outside": "dst"}, "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "fw"]},
                      {"endpoints": ["fw", "nat"]}, {"endpoints": ["nat", "dst"]}]}


def _connect(lab, node: str, ip: str, port: int, timeout: float = 2) -> str:
    return lab.exec(node, [sys.executable, "-c", TCP_CLIENT, ip, str(port),
                           str(timeout)]).stdout.strip()


def test_dual_stack_chain_router_firewall_nat(tmp_path: Path, lab_name: str):
    root_before = _root_ipv6()
    path = tmp_path / "dual.yaml"
    path.write_text(yaml.safe_dump(_chain(lab_name, "dual"), sort_keys=False))
    cp = _cli("up", str(path))
    assert cp.returncode == 0, cp.stderr
    from sfclab.api import Lab

    lab = Lab.from_file(str(path))
    try:
        dst6, dst4 = str(lab.address("dst", 6)), str(lab.address("dst"))
        assert dst6 == "2001:2:0:3::2" and dst4 == "198.18.3.2"
        ns = lab.netns("src")
        assert ping(ns, dst6).returncode == 0
        assert ping(ns, dst4).returncode == 0
        # iperf3 over IPv6 through router, firewall and NAT (TCP)
        cp = _cli("traffic", "iperf", lab_name, "--ip", "6", "--duration", "1", "--json")
        assert cp.returncode == 0, cp.stderr
        m = json.loads(cp.stdout)
        assert m["params"]["dst_ip"] == dst6
        assert m["metrics"]["throughput_bps"] > 1e6
        # the firewall's IPv6 rule drops port 9002 and passes 9001; IPv4 to 9002 passes;
        # the receiver sees the NAT's outside IPv6 address (NAT66 by masquerade)
        srv = lab.popen("dst", [sys.executable, "-c", TCP_SERVER, "9002", "1"],
                        stdout=subprocess.PIPE, text=True)
        srv1 = lab.popen("dst", [sys.executable, "-c", TCP_SERVER, "9001", "1"],
                         stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        assert srv1.stdout.readline().strip() == "ready"
        assert _connect(lab, "src", dst6, 9001) == "hello"
        assert _connect(lab, "src", dst6, 9002).startswith("failed")
        assert _connect(lab, "src", dst4, 9002) == "hello"
        nat_out6 = str(lab.address("nat", 6))
        assert srv1.communicate(timeout=10)[0].split() == ["2001:2:0:3::1"]
        assert srv.communicate(timeout=10)[0].split() == ["::ffff:198.18.3.1"]
        assert nat_out6 == "2001:2:0:2::2"  # its first interface; the outside one is ...3::1
        fw = lab.inspect()["nodes"]["fw"]["function"]["hooks"]["forward"]["rules"]
        assert fw[0]["packets"] >= 1
        # inspect --json: the IPv6 addresses, routes and segments
        cp = _cli("inspect", lab_name, "--json")
        assert cp.returncode == 0, cp.stderr
        info = json.loads(cp.stdout)
        eth0 = info["nodes"]["src"]["interfaces"][0]
        assert eth0["addresses"] == ["198.18.0.1/24"]
        assert eth0["addresses6"] == ["2001:2::1/64"]
        assert info["nodes"]["r1"]["forwarding6"] is True
        assert {"dst": "default6", "gateway": "2001:2::2", "dev": "eth0", "family": 6} in \
            info["nodes"]["src"]["routes"]
        assert [s["subnet6"] for s in info["segments"]] == [
            "2001:2::/64", "2001:2:0:1::/64", "2001:2:0:2::/64", "2001:2:0:3::/64"]
        nat = info["nodes"]["nat"]["function"]["connections"]
        assert nat["masquerade6"]["packets"] >= 2 and nat["masquerade"]["packets"] >= 1
    finally:
        cp = _cli("down", lab_name)
    assert cp.returncode == 0, cp.stderr
    assert nothing_left(lab_name), leftovers(lab_name)
    assert _root_ipv6() == root_before


def test_ipv6_only_lab(running_lab, lab_name):
    root_before = _root_ipv6()
    lab = running_lab(_chain(lab_name, 6))
    src = lab.netns("src")
    out = netns.run(src, ["ip", "-4", "-o", "addr", "show", "scope", "global"]).stdout
    assert out.strip() == ""
    assert ping(src, str(lab.address("dst", 6))).returncode == 0
    # without --ip the lab's family: IPv6, for a lab of ip: 6
    cp = _cli("traffic", "iperf", lab_name, "--duration", "1", "--json")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["params"]["dst_ip"] == "2001:2:0:3::2"
    cp = _cli("traffic", "iperf", lab_name, "--ip", "4", "--duration", "1")
    assert cp.returncode == 2 and "--ip" in cp.stderr and "no IPv4" in cp.stderr
    for node in ("src", "r1", "dst"):
        assert netns.read_sysctl(lab.netns(node), "net.ipv6.conf.all.disable_ipv6") == "0"
    assert netns.read_sysctl(lab.netns("r1"), "net.ipv6.conf.all.forwarding") == "1"
    assert netns.read_sysctl(lab.netns("dst"), "net.ipv6.conf.all.forwarding") == "0"
    # beside it, a lab of the default ip: 4 is today's: IPv6 off in every namespace
    v4 = running_lab({"name": lab_name + "4", "chain": {"length": 3}})
    for node in ("src", "r1", "dst"):
        assert netns.read_sysctl(v4.netns(node), "net.ipv6.conf.all.disable_ipv6") == "1"
    assert _root_ipv6() == root_before


@pytest.mark.parametrize("attach", ["bridge", "shortbridge", "ovs", "hybrid"])
def test_dual_stack_over_two_hosts(running_lab, lab_name, attach):
    """IPv6 inside, the VXLAN tunnel between the emulated hosts on the IPv4 underlay."""
    lab = running_lab({
        "name": lab_name, "ip": "dual", "hosts": {"h1": {}, "h2": {}},
        "nodes": {"a": {"kind": "host"}, "r": {"kind": "router", "host": "h2"},
                  "b": {"kind": "host", "host": "h2"}},
        "links": [{"endpoints": ["a", "r"], "attach": attach}, {"endpoints": ["r", "b"]}]})
    info = lab.inspect()
    assert any(hl.get("vni") for hl in info["host_links"])
    a = lab.netns("a")
    assert ping(a, str(lab.address("b", 6))).returncode == 0
    assert ping(a, str(lab.address("b"))).returncode == 0
    assert _connect_ok(lab, "a", str(lab.address("b", 6)))


def _connect_ok(lab, node: str, ip: str) -> bool:
    srv = lab.popen("b", [sys.executable, "-c", TCP_SERVER, "9003", "1"],
                    stdout=subprocess.PIPE, text=True)
    assert srv.stdout.readline().strip() == "ready"
    ok = _connect(lab, node, ip, 9003, 5) == "hello"
    srv.communicate(timeout=10)
    return ok


def test_bad_ip_values_exit_2_and_make_nothing(tmp_path: Path, lab_name: str):
    cases = [
        ({"ip": 5}, "ip: 4, 6 or dual"),
        ({"links": [{"endpoints": [{"node": "src", "address6": "2001:2:0:9::1/64"}, "dst"]}]},
         "links[0].endpoints[0].address6: an IPv6 address in a lab of 'ip: 4'"),
        ({"ip": "dual", "links": [{"endpoints": [{"node": "src", "address6": "2001:2:0:9::1/64"},
                                                {"node": "dst", "address6": "2001:2:0:8::2/64"}]}]},
         "links[0].endpoints[1].address6: expected an address in 2001:2:0:9::/64"),
        ({"nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                    "nat": {"kind": "nat", "outside": "dst",
                            "forward": [{"port": 80, "to": "[2001:2::5]:80"}]}},
          "links": [{"endpoints": ["src", "nat"]}, {"endpoints": ["nat", "dst"]}]},
         "nodes.nat.forward.0.to: an IPv6 address in a lab without IPv6"),
    ]
    for i, (change, expected) in enumerate(cases):
        d = {"name": lab_name, "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"}},
             "links": [{"endpoints": ["src", "dst"]}], **change}
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump(d, sort_keys=False))
        cp = _cli("up", str(path))
        assert cp.returncode == 2, (change, cp.stderr)
        assert f"{path}:" in cp.stderr and expected in cp.stderr, cp.stderr
        assert nothing_left(lab_name), leftovers(lab_name)


HTTP_GET = r"""
import sys, urllib.request
print(urllib.request.urlopen("http://%s:8000/" % sys.argv[1], timeout=5).status)
"""


def test_dpi_classifies_ipv6_flows(tmp_path: Path, running_lab, lab_name):
    """In a dual-stack lab the dpi node queues IPv6 too and names an HTTP flow over IPv6."""
    (tmp_path / "index.html").write_text("<html>sfclab</html>\n")
    lab = running_lab({
        "name": lab_name, "ip": "dual",
        "nodes": {"src": {"kind": "host"}, "fn": {"kind": "dpi", "interval": 0.5},
                  "dst": {"kind": "host"}},
        "links": [{"endpoints": ["src", "fn"]}, {"endpoints": ["fn", "dst"]}]})
    dst6, dst4 = str(lab.address("dst", 6)), str(lab.address("dst"))
    http = lab.popen("dst", [sys.executable, "-m", "http.server", "8000", "--bind", "::",
                             "--directory", str(tmp_path)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if ":8000 " in lab.exec("dst", ["ss", "-ltnH"]).stdout:
                break
            time.sleep(0.05)
        assert lab.exec("src", [sys.executable, "-c", HTTP_GET, f"[{dst6}]"]).stdout.strip() \
            == "200"
        assert lab.exec("src", [sys.executable, "-c", HTTP_GET, dst4]).stdout.strip() == "200"
    finally:
        netns.end_processes([http.pid])
        http.wait()
    info = lab.inspect()["nodes"]["fn"]["function"]
    flows = {f["dst"]: f for f in info["flows"] if f["dport"] == 8000}
    assert set(flows) == {dst6, dst4}, info["flows"]
    assert "HTTP" in (flows[dst6]["master"], flows[dst6]["app"]), flows[dst6]
    assert flows[dst6]["src"] == str(lab.address("src", 6))
    assert flows[dst6]["packets_to_src"] >= 1
    assert info["totals"]["ipv6"] >= flows[dst6]["packets"]


def test_dual_stack_tenants_share_a_nat(running_lab, lab_name):
    """Two tenants with identical IPv6 address plans reach a server through the NAT they
    share: each tenant's IPv6 table and rules in the shared node, NAT66 toward the server."""
    lab = running_lab({
        "name": lab_name, "ip": "dual",
        "tenants": {"red": {"nodes": ["a1", "nat"]}, "blue": {"nodes": ["b1", "nat"]}},
        "nodes": {"a1": {"kind": "host"}, "b1": {"kind": "host"},
                  "nat": {"kind": "nat", "outside": "srv"}, "srv": {"kind": "host"}},
        "links": [{"endpoints": ["a1", "nat"]}, {"endpoints": ["b1", "nat"]},
                  {"endpoints": ["nat", "srv"]}]})
    assert lab.address("a1", 6) == lab.address("b1", 6)
    srv = str(lab.address("srv", 6))
    for client in ("a1", "b1"):
        assert ping(lab.netns(client), srv, 3).returncode == 0, client
    rules = netns.run(lab.netns("nat"), ["ip", "-6", "rule"]).stdout
    assert "lookup 100" in rules and "lookup 101" in rules
