"""Live-added function instances in a dual-stack lab (``ip: dual``) on real namespaces: ``chain
add`` gives each instance an IPv6 link (a /64 from the top of 2001:2::/48) and an IPv6 default
route via its attach node beside the IPv4 /30, so an IPv6 flow classified by an ``ipv6``
classifier passes through it and reaches the egress; ``chain migrate`` gives the clone, on
an emulated host across a tunnel, the same, and the flow keeps passing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sfclab.live import request
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import hostops, migrate

from .test_chain_ops import base_lab, chain_file, counters, running
from .test_sfc_family import RECEIVER, SENDER, UNTIL_SENT

PORT = 7300


def _through(lab, n: int = 20) -> dict[str, int]:
    """``n`` IPv6 datagrams src -> dst:PORT; what dst received, by family."""
    rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, str(PORT), *UNTIL_SENT],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    lab.exec("src", [sys.executable, "-c", SENDER, str(lab.address("dst", 6)), str(PORT), str(n)])
    return json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])


def _v6(lab, node: str) -> tuple[str, str]:
    addr = lab.exec(node, ["ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope",
                           "global"]).stdout
    route = lab.exec(node, ["ip", "-6", "route", "show", "default"]).stdout
    return addr, route


def test_added_and_migrated_instances_carry_an_ipv6_flow(tmp_path: Path) -> None:
    with running({**base_lab(), "ip": "dual"}) as lab:
        hostops.add_host(lab.name, "edge2", 1, 256 << 20)
        body = {"name": "six", "attach": "r1",
                "classifiers": [{"ingress": "src", "proto": "udp", "dport": PORT,
                                 "family": "ipv6"}],
                "egress": "dst",
                "functions": [{"name": "fw", "kind": "firewall", "rules": [], "cpu": 0.2}]}
        chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        addr, route = _v6(lab, "fw-1")
        assert "inet6 2001:2:0:ffff::2/64" in addr, addr
        assert route.startswith("default via 2001:2:0:ffff::1 dev eth0"), route
        assert lab.exec("fw-1", ["sysctl", "-n", "net.ipv6.conf.all.forwarding"]).stdout \
            .strip() == "1"
        before = counters(lab.name)["fw-1"]["proxy_in"]
        assert _through(lab) == {"4": 0, "6": 20}
        assert counters(lab.name)["fw-1"]["proxy_in"] - before >= 20
        # the clone, on another (emulated) host behind a tunnel, gets its own /64
        m = migrate.migrate(request.MigrateInstance(lab.name, "fw-1", "edge2",
                                                    conntrack=False))
        assert m["clone"] == "fw-1.m1" and m["host"] == "edge2"
        addr, route = _v6(lab, "fw-1.m1")
        assert "inet6 2001:2:0:fffe::2/64" in addr, addr
        assert route.startswith("default via 2001:2:0:fffe::1 dev eth0"), route
        assert _through(lab) == {"4": 0, "6": 20}
        assert counters(lab.name)["fw-1.m1"]["proxy_in"] >= 20
