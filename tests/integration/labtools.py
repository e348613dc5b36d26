"""Small helpers shared by the integration tests: what a lab left on the machine, iperf3."""

from __future__ import annotations

import json
import os
import subprocess
import time

from pyroute2 import IPRoute

from sfclab.plan.names import lab_tag, netns_name
from sfclab.kernel import netns, ovs


def leftovers(lab: str) -> dict[str, list[str]]:
    """Everything of lab ``lab`` still on the machine, found by its names and marks."""
    prefix = netns_name(lab, "")
    spaces = sorted(n for n in os.listdir(netns.NETNS_RUN_DIR) if n.startswith(prefix)) \
        if os.path.isdir(netns.NETNS_RUN_DIR) else []
    tag = lab_tag(lab)
    with IPRoute() as ipr:
        links = sorted(m.get_attr("IFLA_IFNAME") for m in ipr.get_links()
                       if m.get_attr("IFLA_IFNAME").startswith(tag))
    bridges = ovs.owned_bridges(lab)
    procs = sorted(netns.pids_in(spaces))
    return {"namespaces": spaces, "links": links, "bridges": bridges,
            "processes": [str(p) for p in procs]}


def nothing_left(lab: str) -> bool:
    return not any(leftovers(lab).values())


def iperf3(src_ns: str, dst_ns: str, dst_ip: str, seconds: float = 1, port: int = 5201) -> dict:
    """One TCP iperf3 run; returns the client's JSON.  The server is ended by PID."""
    server = netns.popen(dst_ns, ["iperf3", "-s", "-1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while True:
            cp = netns.run(src_ns, ["iperf3", "-c", dst_ip, "-p", str(port), "-t", str(seconds),
                                    "-J"], check=False, timeout=seconds + 20)
            out = json.loads(cp.stdout) if cp.stdout.strip().startswith("{") else {}
            if cp.returncode == 0 and "sum_received" in out.get("end", {}):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"iperf3 failed: {out.get('error')} {cp.stderr[-300:]}")
            time.sleep(0.1)  # the server was not listening yet
    finally:
        netns.end_processes([server.pid])
        server.wait()


def ping(ns: str, ip: str, count: int = 2) -> subprocess.CompletedProcess:
    return netns.run(ns, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", ip], check=False,
                     timeout=20)
