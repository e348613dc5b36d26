"""``up --kube`` of a 3-host lab (each host a Node: an emulated machine with its agent, as the
tests' :class:`tests.integration.kube.KubeMachines`) against ``up`` of the same lab on emulated
hosts, side by side, each followed by its ``down``; then the API server's and etcd's memory.

    SFCLAB_KUBE_APISERVER=build/kube/kube-apiserver .venv/bin/python bench/bench_kube_up.py [N]

The lab: a (h1) - b, a router (h2) - c (h3); two links across hosts (VXLAN).  Times are wall
clock of the whole command (Python's start included); each part's own build time is printed as
its agent reported it in the part's status.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("SFCLAB_STATE_DIR", tempfile.mkdtemp(prefix="sfclab-bench-state"))

from tests.integration.kube import KubeCluster, KubeMachines  # noqa: E402


def lab_file(tmp: Path, name: str) -> Path:
    f = tmp / f"{name}.yaml"
    f.write_text(yaml.safe_dump({
        "name": name, "hosts": {"h1": {"cpus": 1}, "h2": {"cpus": 1}, "h3": {"cpus": 1}},
        "nodes": {"a": {"kind": "host", "host": "h1"}, "b": {"kind": "router", "host": "h2"},
                  "c": {"kind": "host", "host": "h3"}},
        "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}]}))
    return f


def timed(*args: str) -> float:
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                        text=True)
    if cp.returncode != 0:
        raise SystemExit(f"sfclab {' '.join(args)}: {cp.stderr}")
    return time.monotonic() - t0


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="sfclab-bench-kube") as d:
        tmp = Path(d)
        (tmp / "machines").mkdir()
        with KubeCluster(tmp / "cluster") as cluster, \
                KubeMachines(cluster, f"b{secrets.token_hex(3)}", tmp / "machines") as ms:
            cfg = str(cluster.admin_kubeconfig)
            for i in range(runs):
                k, e = f"{ms.name}{i}", f"e{ms.name[1:]}{i}"
                up = timed("up", "--kube", "--kubeconfig", cfg, str(lab_file(tmp, k)))
                from sfclab.realize.runtime import kubernetes as kube

                built = sorted(str((p.get("status") or {}).get("message")) for p in
                               cluster.admin().items(kube.parts_path(), f"{kube.LAB_LABEL}={k}"))
                down = timed("down", "--kube", "--kubeconfig", cfg, k)
                eup = timed("up", str(lab_file(tmp, e)))
                edown = timed("down", e)
                print(f"run {i}: up --kube {up:.2f} s, down --kube {down:.2f} s; "
                      f"emulated hosts: up {eup:.2f} s, down {edown:.2f} s; parts: "
                      f"{'; '.join(built)}", flush=True)
            rss = cluster.rss()
            print("resident: " + ", ".join(f"{k} {v >> 20} MiB" for k, v in rss.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
