#!/usr/bin/env python3
"""``up`` and ``down`` of a 30-node lab over 3 hosts, three ways side by side in one run: by
Kubernetes, by SSH, and on emulated hosts driven directly; then the memory of the API server,
etcd and the agents.

Run as root:  .venv/bin/python bench/bench_kube_hosts.py [--reps 5] [--nodes 30] [--json]

- **kube**: ``sfclab up --kube`` against a real API server (etcd and the kube-apiserver
  ``make setup`` builds) with three Nodes, each an emulated machine running sfclab's agent as
  a process (the tests' ``KubeMachines``, tests/integration/kube.py): the command writes the
  Lab and one part per host, and returns once every agent has built its part and reported it
  ``Up``; ``down --kube`` once every agent has removed its part and the objects are gone;
- **ssh**: ``sfclab up`` of the same lab whose hosts are the tests' machines running ``sshd``
  (tests/integration/sshd.py): every host checked, then sent its part, over SSH;
- **local**: ``sfclab up`` of the same lab on emulated hosts driven directly.

The lab: ``--nodes`` nodes in a line (hosts at both ends, routers between), the first third on
h1, the next on h2, the rest on h3: two links cross hosts (VXLAN).  Each step is the whole
command's wall clock (Python's start included), the three ways in turn, the order rotated every
round.  Printed: each step's median and its lowest and highest, and for ``kube up`` the
longest of the parts' own builds as their agents reported them (the rest of it is the agents
noticing their parts, at most a round of theirs, and ``up --kube``'s own work); the resident
memory (and its peak) of kube-apiserver, etcd and each agent process at the end (the agents'
builds run in child processes of their own, not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/
os.environ.setdefault("SFCLAB_STATE_DIR", tempfile.mkdtemp(prefix="sfclab-bench-kube-state"))

from tests.integration.kube import APISERVER, ETCD, MISSING, KubeCluster, KubeMachines  # noqa: E402
from tests.integration.sshd import ADDRESSES, ssh_machines  # noqa: E402

MACHINE_OF = {"h1": "m1", "h2": "m2", "h3": "m3"}
WAYS = ("kube", "ssh", "local")


def lab(name: str, n: int, hosts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``n`` nodes in a line over h1-h3 (see the module)."""
    host_of = [f"h{1 + 3 * i // n}" for i in range(n)]
    nodes = {f"n{i}": {"kind": "host" if i in (0, n - 1) else "router", "host": host_of[i]}
             for i in range(n)}
    return {"name": name, "hosts": hosts, "nodes": nodes,
            "links": [{"endpoints": [f"n{i}", f"n{i + 1}"]} for i in range(n - 1)]}


def sfclab(*args: str) -> float:
    """Run ``sfclab ARGS``; its wall clock, seconds."""
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                        text=True, timeout=600)
    if cp.returncode != 0:
        raise SystemExit(f"sfclab {' '.join(args)}: exit {cp.returncode}: {cp.stderr[-2000:]}")
    return time.monotonic() - t0


def part_builds(cluster: KubeCluster, name: str) -> float:
    """The longest of lab ``name``'s parts' builds, as their agents reported them."""
    from sfclab.realize.runtime import kubernetes as kube

    took = [float(m.group(1)) for p in cluster.admin().items(
                kube.parts_path(), f"{kube.LAB_LABEL}={name}")
            if (m := re.search(r"built in ([0-9.]+) s", str((p.get("status") or {})
                                                           .get("message"))))]
    return max(took) if took else float("nan")


def rss(pid: int) -> dict[str, int]:
    """A process's resident memory now and at its peak, bytes."""
    with open(f"/proc/{pid}/status") as f:
        got = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in f
               if ln.startswith(("VmRSS:", "VmHWM:"))}
    return {"rss": got["VmRSS"], "peak": got["VmHWM"]}


def ways(tmp: Path, n: int, cluster: KubeCluster, ssh: Any
         ) -> tuple[dict[str, tuple[Callable[[], float], Callable[[], float]]], str]:
    """Each way's ``up`` and ``down`` of its own lab (files written here, once), and the name
    of the lab on Kubernetes."""
    tag = secrets.token_hex(3)
    cfg = str(cluster.admin_kubeconfig)
    hosts = {
        "kube": {h: {"cpus": 1} for h in MACHINE_OF},
        "ssh": {h: {"address": ADDRESSES[m], "ssh": ssh.ssh(m)} for h, m in MACHINE_OF.items()},
        "local": {h: {"address": ADDRESSES[m]} for h, m in MACHINE_OF.items()},
    }
    out = {}
    for way in WAYS:
        name = f"{way[0]}{tag}"
        f = tmp / f"{name}.yaml"
        f.write_text(yaml.safe_dump(lab(name, n, hosts[way])))
        kube = ["--kube", "--kubeconfig", cfg] if way == "kube" else []
        out[way] = ((lambda f=f, kube=kube: sfclab("up", *kube, str(f))),
                    (lambda name=name, kube=kube: sfclab("down", *kube, name)))
    return out, f"k{tag}"


def report(times: dict[str, list[float]], memory: dict[str, dict[str, int]], reps: int,
           n: int, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"nodes": n, "reps": reps, "seconds": {
            k: {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                "max": round(max(v), 3)} for k, v in times.items()},
            "memory_bytes": memory}))
        return
    print(f"{n}-node lab over 3 hosts, {reps} rounds (median, lowest to highest):")
    for k, v in times.items():
        print(f"  {k:24s} {statistics.median(v):7.2f} s  ({min(v):.2f} to {max(v):.2f})")
    print("resident memory at the end (peak):")
    for k, m in memory.items():
        print(f"  {k:28s} {m['rss'] / 2**20:6.0f} MiB ({m['peak'] / 2**20:.0f} MiB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not (APISERVER.exists() and ETCD.exists()):
        raise SystemExit(f"bench_kube_hosts: {MISSING}")
    tmp = Path(tempfile.mkdtemp(prefix="sfclab-bench-kube-hosts"))
    times: dict[str, list[float]] = {f"{w} {s}": [] for w in WAYS for s in ("up", "down")}
    times["kube up: parts' builds"] = []
    (tmp / "machines").mkdir()
    (tmp / "ssh").mkdir()
    with KubeCluster(tmp / "cluster") as cluster, \
            KubeMachines(cluster, f"b{secrets.token_hex(3)}", tmp / "machines") as ms, \
            ssh_machines(f"m{secrets.token_hex(3)}", tmp / "ssh") as sm:
        steps, kube_lab = ways(tmp, a.nodes, cluster, sm)
        for r in range(a.reps):
            order = WAYS[r % 3:] + WAYS[:r % 3]
            for way in order:
                up, down = steps[way]
                times[f"{way} up"].append(up())
                if way == "kube":
                    times["kube up: parts' builds"].append(part_builds(cluster, kube_lab))
                times[f"{way} down"].append(down())
            print(f"round {r + 1}/{a.reps}: " + ", ".join(
                f"{k} {v[-1]:.2f} s" for k, v in times.items()), file=sys.stderr, flush=True)
        memory = {s.name: rss(s.proc.pid) for s in cluster.servers}
        memory |= {f"agent {node}": rss(p.proc.pid) for node, p in ms.agents.items()}
    report(times, memory, a.reps, a.nodes, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
