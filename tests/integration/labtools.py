"""Small helpers shared by the integration tests: what a lab left on the machine, iperf3,
waiting for a condition, a bench's module (its lab builders), a lab file made dual-stack."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkDumpInterrupted

from sfclab.plan.names import lab_tag, netns_name
from sfclab.kernel import netns, ovs


#: where :func:`free_port` picks: below the kernel's ephemeral range (32768-60999 here), from
#: which every outgoing connection on the machine takes its source port
FREE_PORTS = range(20000, 32000)


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing is bound to now, for a server a test starts.  Not the
    kernel's choice of port 0: that comes from the ephemeral range, where any connection made
    meanwhile (a test beside this one) may take it before the server binds it (CI
    2026-11-28: etcd's peer port, 'address already in use')."""
    for _ in range(200):
        port = random.choice(FREE_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {FREE_PORTS}")


def root_links(tries: int = 20) -> list[str]:
    """The root namespace's interface names.  A dump the kernel interrupts because links
    changed meanwhile (other tests build labs beside this one) is asked again."""
    for _ in range(tries - 1):
        try:
            with IPRoute() as ipr:
                return [m.get_attr("IFLA_IFNAME") for m in ipr.get_links()]
        except NetlinkDumpInterrupted:
            time.sleep(0.05)
    with IPRoute() as ipr:
        return [m.get_attr("IFLA_IFNAME") for m in ipr.get_links()]


def leftovers(lab: str) -> dict[str, list[str]]:
    """Everything of lab ``lab`` still on the machine, found by its names and marks."""
    prefix = netns_name(lab, "")
    spaces = sorted(n for n in os.listdir(netns.NETNS_RUN_DIR) if n.startswith(prefix)) \
        if os.path.isdir(netns.NETNS_RUN_DIR) else []
    tag = lab_tag(lab)
    links = sorted(n for n in root_links() if n.startswith(tag))
    bridges = ovs.owned_bridges(lab)
    procs = sorted(netns.pids_in(spaces))
    return {"namespaces": spaces, "links": links, "bridges": bridges,
            "processes": [str(p) for p in procs], "cgroups": [str(d) for d in cgroups_of(lab)]}


def cgroups_of(lab: str) -> list[Path]:
    """The cgroup directories named for lab ``lab`` (its nodes' and its hosts'), in every
    controller's hierarchy."""
    root = Path("/sys/fs/cgroup")
    prefix = netns_name(lab, "")
    return sorted(d for c in root.iterdir() if c.is_dir() and not c.is_symlink()
                  for d in c.glob(f"{prefix}*") if d.is_dir())


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


def wait_for(what: str, cond: Callable[[], object], limit: float,
             detail: Callable[[], str] = lambda: "") -> object:
    """``cond()``'s first true answer within ``limit`` seconds; else an AssertionError naming
    ``what`` (and ``detail()``: logs)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"not within {limit} s: {what}\n{detail()}")


def ping(ns: str, ip: str, count: int = 2) -> subprocess.CompletedProcess:
    return netns.run(ns, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", ip], check=False,
                     timeout=20)


def kill_9_during_up_then_down(tmp_path: Path, lab_name: str, body: str, delays: Iterable[float],
                               also_gone: Callable[[str], bool] = lambda _name: True) -> int:
    """For each delay: write lab ``<lab_name>k<i>`` (``body`` below its name), run ``sfclab up``
    on it, SIGKILL it ``delay`` seconds after its journal exists, then ``sfclab down``; assert
    that ``down`` succeeds and leaves nothing (and ``also_gone(name)``).  Returns how many kills
    landed while objects of the lab existed."""
    caught_midway = 0
    for i, delay in enumerate(delays):
        name = f"{lab_name}k{i}"
        f = tmp_path / f"{name}.yaml"
        f.write_text(f"name: {name}\n{body}\n")
        journal = os.path.join(os.environ["SFCLAB_STATE_DIR"], "labs", name, "journal")
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "up", str(f)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(journal) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        if any(leftovers(name).values()):
            caught_midway += 1
        cp = subprocess.run([sys.executable, "-m", "sfclab.cli", "down", name],
                            capture_output=True, text=True)
        assert cp.returncode == 0, (cp.returncode, cp.stdout, cp.stderr)
        assert nothing_left(name), leftovers(name)
        assert also_gone(name)
    return caught_midway


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` loaded as a module (the benches are scripts, not a package), for the
    tests that build a bench's labs."""
    path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dual_stack(d: dict, prefix: str) -> dict:
    """Lab file ``d`` in ``ip: dual``: each link's ``10.N.X.Y/24`` also ``PREFIX:X::Y/64``
    (``address6``); its chains' classifiers of both families."""
    for lk in d["links"]:
        for ep in lk["endpoints"]:
            x, y = ep["address"].split("/")[0].split(".")[2:]
            ep["address6"] = f"{prefix}:{x}::{y}/64"
    for c in d.get("chains", {}).values():
        for cl in c["classifiers"]:
            cl["family"] = "any"
    return {**d, "ip": "dual"}


def planned(t) -> int:
    """Frames of the window's plan the sender accounted for: sent, or skipped because it fell
    due while the sender was not run (``generator_skipped``, said on the trial)."""
    return t.sent + (t.generator_skipped or 0)
