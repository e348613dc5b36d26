"""`make bench`: every benchmark, one after the other (each compares side by side in one run).

    .venv/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    a = ap.parse_args()
    reps = "3" if a.quick else "5"
    runs = [
        ["bench_lab.py", "--repeat", reps],
        ["bench_generators.py", "--reps", reps],
        ["bench_firewall.py", "--reps", reps],
        ["bench_hosts.py", "--reps", "7" if not a.quick else reps],
        ["bench_chain_ops.py", "--reps", reps],
        ["bench_sfc_classifier.py", "--reps", reps],
        ["bench_sfc_paths.py", "--reps", reps, "--trial", "1"],
        ["bench_sfc_hops.py", "--reps", reps, "--trial", "1"],
        ["bench_hop_cost.py", "--rounds", "8" if not a.quick else reps],
        ["bench_path_kinds.py", "--reps", reps, "--trial", "1"],
        ["bench_ssh_hosts.py", "--reps", reps],
        ["bench_ssh_chains.py", "--reps", reps],
        ["bench_kube_hosts.py", "--reps", reps],
        ["bench_container_updown.py", "--reps", reps],
        ["bench_container_path.py", "--reps", reps],
    ]
    status = 0
    for argv in runs:
        print(f"\n== {' '.join(argv)}", flush=True)
        status |= subprocess.call([sys.executable, os.path.join(HERE, argv[0]), *argv[1:]])
    return status


if __name__ == "__main__":
    sys.exit(main())
