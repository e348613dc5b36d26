"""sfclab's frr image as routers: two ``router`` nodes whose processes are FRR in containers
learn each other's routes by OSPF, and traffic follows them.

sfclab's own static routes connect the lab's links; each router also holds an address on its
loopback (10.99.<n>.1, set by FRR's zebra from the bound frr.conf) that no static route covers,
so the only way to it is the route OSPF brings."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sfclab.kernel import image_recipes

CONF = """\
frr defaults traditional
hostname r{n}
interface lo
 ip address 10.99.{n}.1/32
{interfaces}
router ospf
 ospf router-id 10.99.{n}.1
 network 198.18.0.0/15 area 0
 redistribute connected
"""
#: point-to-point links (no DR election) and short timers: the adjacency forms in seconds
INTERFACE = """\
interface {name}
 ip ospf network point-to-point
 ip ospf hello-interval 1
 ip ospf dead-interval 4
"""


def test_two_frr_routers_learn_each_others_routes_by_ospf(running_lab, lab_name: str,
                                                          tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "sfclab.cli", "image", "build", "--quiet",
                            "frr"], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    frr = image_recipes.table()["frr"].latest
    nodes: dict[str, dict] = {"h1": {"kind": "host"}, "h2": {"kind": "host"}}
    for n in (1, 2):
        conf = tmp_path / f"r{n}.conf"
        conf.write_text(CONF.format(n=n, interfaces="".join(
            INTERFACE.format(name=f"eth{i}") for i in (0, 1))))
        nodes[f"r{n}"] = {"kind": "router", "image": {
            "name": frr, "caps": ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"],
            "binds": [f"{conf}:/etc/frr/frr.conf"]}}
    lab = running_lab({"name": lab_name, "nodes": nodes,
                       "links": [{"endpoints": ["h1", "r1"]}, {"endpoints": ["r1", "r2"]},
                                 {"endpoints": ["r2", "h2"]}]})
    assert not any("10.99." in r.dst for r in lab._plan().routes)  # no static route there

    learned: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(learned) < 2:
        for me, other in (("r1", 2), ("r2", 1)):
            out = lab.exec(me, ["ip", "route", "show", f"10.99.{other}.1"]).stdout
            if "proto ospf" in out:
                learned[me] = out.strip()
        time.sleep(0.5)
    assert set(learned) == {"r1", "r2"}, learned
    assert "via" in learned["r1"] and "via" in learned["r2"]
    # traffic follows them: each host reaches the far router's loopback through its own router
    for host, far in (("h1", "10.99.2.1"), ("h2", "10.99.1.1")):
        ping = lab.exec(host, ["ping", "-c", "2", "-i", "0.2", "-W", "1", far], check=False)
        assert ping.returncode == 0, ping.stdout + ping.stderr
    info = lab.inspect()["nodes"]
    assert info["r1"]["container"]["running"] and info["r2"]["container"]["running"]
