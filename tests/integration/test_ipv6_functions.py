"""Function kinds that an IPv6 lab refused before, on real namespaces: the kernel
``balancer`` balances TCP connections to an IPv6 VIP over IPv6 backends (table ip6); a ``tun``
function passes ping -6 and ping -4 through its program in a dual-stack lab; a ``container``
function forwards IPv6 (routed reach) and queues IPv6 to its NFQUEUE (nfqueue reach, its
ip6tables rule); a balancer whose VIP or backends do not fit the lab's families exits 2 with
the place and makes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import image_recipes
from tests.integration.labtools import leftovers, nothing_left, ping

#: answers each connection with its own name, N times (on "::", port 9004)
NAMED_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 9004)); s.listen(16)
print("ready", flush=True)
s.settimeout(30)
while True:
    c, _ = s.accept(); c.sendall(sys.argv[1].encode()); c.close()
"""

#: N connections to [VIP]:9004, one line per answer
CLIENT = r"""
import socket, sys
for _ in range(int(sys.argv[2])):
    c = socket.create_connection((sys.argv[1], 9004), timeout=5)
    print(c.recv(100).decode() or "empty", flush=True); c.close()
"""

VIP6 = "2001:2:0:a::2"


def _ep(node: str, a6: str) -> dict:
    return {"node": node, "address6": a6}


def _balanced(lab_name: str, **lb: object) -> dict:
    """cl -> lb -> b0, b1: the VIP is lb's own address toward cl."""
    return {"name": lab_name, "ip": "dual",
            "nodes": {"cl": {"kind": "host"}, "b0": {"kind": "host"}, "b1": {"kind": "host"},
                      "lb": {"kind": "balancer", "vip": VIP6, "proto": "tcp", "ports": 9004,
                             "backends": [{"address": "2001:2:0:b::2"},
                                          {"address": "2001:2:0:c::2"}], **lb}},
            "links": [{"endpoints": [_ep("cl", "2001:2:0:a::1/64"), _ep("lb", VIP6 + "/64")]},
                      {"endpoints": [_ep("lb", "2001:2:0:b::1/64"), _ep("b0", "2001:2:0:b::2/64")]},
                      {"endpoints": [_ep("lb", "2001:2:0:c::1/64"),
                                     _ep("b1", "2001:2:0:c::2/64")]}]}


def test_balancer_spreads_tcp_to_an_ipv6_vip_over_ipv6_backends(running_lab, lab_name):
    lab = running_lab(_balanced(lab_name))
    servers = [lab.popen(b, [sys.executable, "-c", NAMED_SERVER, b], stdout=subprocess.PIPE,
                         text=True) for b in ("b0", "b1")]
    try:
        for s in servers:
            assert s.stdout.readline().strip() == "ready"
        out = lab.exec("cl", [sys.executable, "-c", CLIENT, VIP6, "16"], timeout=60).stdout
    finally:
        for s in servers:
            s.kill()
            s.wait()
    answers = out.split()
    assert len(answers) == 16 and set(answers) == {"b0", "b1"}, out
    info = lab.inspect()["nodes"]["lb"]["function"]
    assert info["program"].startswith("nftables (table ip6 sfclab_lb")
    assert info["vip"] == VIP6
    per = {b["address"]: b.get("packets", 0) for b in info["backends"]}
    assert per["2001:2:0:b::2"] > 0 and per["2001:2:0:c::2"] > 0, info
    assert info["replies"]["packets"] >= 16


def test_tun_function_passes_ipv6_and_ipv4_through_its_program(running_lab, lab_name):
    lab = running_lab({
        "name": lab_name, "ip": "dual",
        "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                  "t": {"kind": "tun",
                        "exec": ["{python}", "-m", "sfclab.functions.examples.tun_count"]}},
        "links": [{"endpoints": ["src", "t"]}, {"endpoints": ["t", "dst"]}]})
    src = lab.netns("src")
    assert ping(src, str(lab.address("dst", 6)), 3).returncode == 0
    assert ping(src, str(lab.address("dst")), 3).returncode == 0
    fn = lab.inspect()["nodes"]["t"]["function"]
    # 3 requests and 3 replies of each family went through the program
    assert fn["program"]["packets"] >= 12, fn
    rules = lab.exec("t", ["ip", "-6", "rule"]).stdout
    assert "lookup 100" in rules


@pytest.mark.parametrize("reach", ["routed", "nfqueue"])
def test_container_function_in_a_dual_stack_lab(running_lab, lab_name, reach):
    """Routed: the container's namespace forwards IPv6.  nfqueue without bypass: IPv6 goes
    to the queue (its ip6tables rule), where nothing reads it, so ping -6 stops."""
    keys = {"reach": "nfqueue", "bypass": False} if reach == "nfqueue" else {}
    lab = running_lab({
        "name": lab_name, "ip": "dual",
        "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                  "fn": {"kind": "container", **keys,
                         "image": {"name": image_recipes.table()["base"].latest,
                                   "cmd": ["sleep", "infinity"]}}},
        "links": [{"endpoints": ["src", "fn"]}, {"endpoints": ["fn", "dst"]}]})
    result = ping(lab.netns("src"), str(lab.address("dst", 6)), 3)
    fn = lab.inspect()["nodes"]["fn"]
    assert fn["container"]["running"]
    if reach == "routed":
        assert result.returncode == 0, result.stdout
    else:
        assert result.returncode != 0, result.stdout
        assert fn["function"]["queue"]["counters"]["packets"] >= 3
        assert "sfclab-container" in lab.exec("fn", ["ip6tables-legacy-save", "-t",
                                                     "mangle"]).stdout


def test_balancer_of_the_wrong_family_exits_2_and_makes_nothing(tmp_path: Path, lab_name):
    four = {"name": lab_name,
            "nodes": {"cl": {"kind": "host"}, "b0": {"kind": "host"},
                      "lb": {"kind": "balancer", "vip": VIP6,
                             "backends": [{"address": "2001:2:0:b::2"}]}},
            "links": [{"endpoints": ["cl", "lb"]}, {"endpoints": ["lb", "b0"]}]}
    mixed = _balanced(lab_name, backends=[{"address": "2001:2:0:b::2"},
                                          {"address": "198.18.0.2"}])
    for i, (d, expected) in enumerate([
            (four, "nodes.lb.vip: expected a vip of the lab's families (IPv4), got an IPv6"),
            (mixed, "backends of the vip's family (IPv6): 198.18.0.2 is IPv4")]):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump(d, sort_keys=False))
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "up", str(path)],
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 2 and f"{path}:" in cp.stderr and expected in cp.stderr, \
            cp.stderr
        assert nothing_left(lab_name), leftovers(lab_name)
