"""The ``container`` function kind with real containers: a chain src -> firewall -> HAProxy
(sfclab's haproxy image) steered by labels, TCP connections balanced over two servers and the
firewall's rule applied; the container's limits are those the lab file gave; and the NFQUEUE
reach puts the forward path through the queue (with bypass packets pass while nothing reads it,
without it they stop).  Each lab is removed after and leaves no container."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sfclab.kernel import image_recipes, podman
from sfclab.plan.names import LABEL_LAB

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "container-lb.yaml"

#: the client: N connections to the balancer, one line per answer (the server's name), then
#: whether port 8081 (dropped by the firewall) answered
CLIENT = """
import sys, urllib.request
n, vip = int(sys.argv[1]), sys.argv[2]
for _ in range(n):
    print(urllib.request.urlopen(f"http://{vip}/name", timeout=5).read().decode().strip())
try:
    urllib.request.urlopen(f"http://{vip}:8081/name", timeout=2)
    print("8081 answered")
except OSError as e:
    print("8081 refused:", e)
"""


def build(*names: str) -> None:
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "image", "build", "--quiet", *names],
                        capture_output=True, text=True, timeout=900)
    assert cp.returncode == 0, cp.stderr


def containers_of(lab: str) -> list[str]:
    return podman.find({LABEL_LAB: lab})


def test_a_chain_through_haproxy_balances_connections_over_two_servers(
        running_lab, lab_name: str, tmp_path: Path) -> None:
    build("haproxy")
    doc = yaml.safe_load(SCENARIO.read_text())
    lab = running_lab({**doc, "name": lab_name})
    servers = []
    try:
        for s in ("s1", "s2"):
            (tmp_path / s).mkdir()
            (tmp_path / s / "name").write_text(s + "\n")
            servers.append(lab.popen(s, [sys.executable, "-m", "http.server", "8080", "--bind",
                                         str(lab.address(s)), "--directory",
                                         str(tmp_path / s)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for s in ("s1", "s2"):  # each server answers (by routes) before the client starts
            lab.exec("r", [sys.executable, "-c", "import socket,time,sys\n"
                           "for _ in range(100):\n"
                           " try: socket.create_connection((sys.argv[1], 8080), 1); break\n"
                           " except OSError: time.sleep(0.05)\n", str(lab.address(s))])
        vip = "198.18.1.2"
        out = lab.exec("src", [sys.executable, "-c", CLIENT, "8", vip], timeout=60).stdout
    finally:
        for p in servers:
            p.kill()
            p.wait()
    lines = out.splitlines()
    answers = lines[:8]
    assert sorted(answers) == ["s1"] * 4 + ["s2"] * 4, out  # round-robin over both servers
    assert lines[8].startswith("8081 refused"), out         # the firewall's rule

    info = lab.inspect()["nodes"]
    assert info["lb"]["container"]["running"] and info["lb"]["function"] == {"reach": "routed"}
    rule = info["fw"]["function"]["hooks"]["forward"]["rules"][0]
    assert rule["rule"]["dport"] == 8081 and rule["packets"] >= 1
    # the connections came by labels: classified at src, through both functions' proxies
    chains = subprocess.run([sys.executable, "-m", "sfclab.cli", "chain", "inspect", lab_name,
                             "--json"], capture_output=True, text=True, check=True).stdout
    counters = json.loads(chains)["chains"]["web"]["nodes"]
    assert counters["src"]["classified"] >= 8 * 3
    assert counters["fw"]["proxy_in"] >= counters["lb"]["proxy_in"] >= 8 * 3
    # the container's limits are the node's cpu and memory, as for tun functions
    cid = containers_of(lab_name)
    assert len(cid) == 1
    limits = subprocess.run(["podman", "inspect", "--format",
                             "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}", cid[0]],
                            capture_output=True, text=True, env=podman.env(), check=True)
    assert limits.stdout.split() == [str(128 << 20), str(500_000_000)]
    lab.down()
    assert containers_of(lab_name) == []


@pytest.mark.parametrize("bypass, passes", [(True, True), (False, False)])
def test_nfqueue_reach_sends_forwarded_packets_to_the_queue(
        running_lab, lab_name: str, bypass: bool, passes: bool) -> None:
    build("base")
    lab = running_lab({
        "name": lab_name,
        "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                  "fn": {"kind": "container", "reach": "nfqueue", "queue": 5, "bypass": bypass,
                         "image": {"name": image_recipes.table()["base"].latest,
                                   "cmd": ["sleep", "infinity"]}}},
        "links": [{"endpoints": ["src", "fn"]}, {"endpoints": ["fn", "dst"]}]})
    ping = lab.exec("src", ["ping", "-c", "3", "-i", "0.2", "-W", "1", str(lab.address("dst"))],
                    check=False)
    assert (ping.returncode == 0) == passes, ping.stdout
    fn = lab.inspect()["nodes"]["fn"]
    assert fn["function"]["queue"]["number"] == 5
    assert fn["function"]["queue"]["counters"]["packets"] >= 3  # every request was queued
    cid = containers_of(lab_name)
    caps = subprocess.run(["podman", "inspect", "--format", "{{.EffectiveCaps}}", cid[0]],
                          capture_output=True, text=True, env=podman.env(), check=True).stdout
    assert "CAP_NET_ADMIN" in caps


def test_a_squid_container_function_is_a_forward_proxy(running_lab, lab_name: str,
                                                        tmp_path: Path) -> None:
    """sfclab's squid image as a function: src fetches a page from dst through it."""
    build("squid")
    lab = running_lab({
        "name": lab_name,
        "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                  "px": {"kind": "container", "memory": "256M",
                         "image": image_recipes.table()["squid"].latest}},
        "links": [{"endpoints": ["src", "px"]}, {"endpoints": ["px", "dst"]}]})
    (tmp_path / "name").write_text("dst\n")
    server = lab.popen("dst", [sys.executable, "-m", "http.server", "8080", "--directory",
                               str(tmp_path)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    toward_src = lab.function("px").ctx.interface_toward("src").address
    proxy = f"http://{toward_src.ip}:3128"
    try:
        fetch = ("import sys, time, urllib.request\n"
                 "opener = urllib.request.build_opener(urllib.request.ProxyHandler("
                 "{'http': sys.argv[1]}))\n"
                 "for _ in range(100):  # squid takes a moment to listen\n"
                 "    try:\n"
                 "        r = opener.open(sys.argv[2], timeout=3); break\n"
                 "    except OSError: time.sleep(0.1)\n"
                 "print(r.headers.get('Via', ''), r.read().decode().strip())\n")
        out = lab.exec("src", [sys.executable, "-c", fetch, proxy,
                               f"http://{lab.address('dst')}:8080/name"], timeout=60).stdout
    finally:
        server.kill()
        server.wait()
    assert out.split()[-1] == "dst" and "squid" in out.lower(), out
