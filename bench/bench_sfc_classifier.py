"""Benchmark: the SFC classifier's table load (issue goal: 100,000 entries in at most 2 s) and
its per-packet cost as the table grows (1, 1,000, 100,000 entries: goal within 10 % of the
1-entry figure), side by side in one run, medians of ``--reps``.

The per-packet cost is measured where the classifier runs, in the kernel: UDP datagrams sent
from the ingress host as fast as one socket can (``--packets`` per trial), through a one-function
chain; the figure is packets per second of the sender's system calls, which include the tc
classifier on the way out.  Entries are distinct /32 source prefixes in their own wildcard mask,
so every packet pays one more hash lookup per mask, never more per entry.

    .venv/bin/python bench/bench_sfc_classifier.py --reps 3
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from ipaddress import IPv4Address
from pathlib import Path

from sfclab.api import Lab
from sfclab.steer import chains

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, dst = int(sys.argv[2]), (sys.argv[1], 7000)
t0 = time.perf_counter()
for _ in range(n):
    s.sendto(b"x" * 18, dst)
print(n / (time.perf_counter() - t0))
"""


def entries_file(n: int, into: Path) -> Path:
    base = int(IPv4Address("10.0.0.0"))
    rows = [{"ingress": "src", "proto": "udp", "src": f"{IPv4Address(base + i)}/32",
             "dport": 9999} for i in range(n)]
    f = into / f"entries-{n}.json"  # JSON is YAML too, and read far faster
    f.write_text(json.dumps(rows))
    return f


def lab_dict() -> dict:
    return {"name": "b" + secrets.token_hex(3),
            "nodes": {"src": {"kind": "host"}, "f": {"kind": "firewall", "rules": []},
                      "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "f"]}, {"endpoints": ["f", "dst"]}],
            "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                             "functions": ["f"], "egress": "dst"}}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--packets", type=int, default=200000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = (1, 1000, 100000)
    load: list[float] = []
    rate: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        files = {n: entries_file(n, Path(tmp)) for n in sizes}
        for rep in range(a.reps):
            labs = {n: Lab.from_dict(lab_dict(), "bench").up() for n in sizes}
            try:
                for n, lab in labs.items():
                    t0 = time.monotonic()
                    chains.classify(lab.name, "c", str(files[n]))
                    if n == 100000:
                        load.append(time.monotonic() - t0)
                for n in sizes:  # side by side: one trial per size, in turn
                    lab = labs[n]
                    cp = lab.exec("src", [sys.executable, "-c", SENDER, str(lab.address("dst")),
                                          str(a.packets)])
                    rate[n].append(float(cp.stdout))
                print(f"rep {rep + 1}: load {load[-1]:.3f} s, " + ", ".join(
                    f"{n:,} entries {rate[n][-1]:,.0f} pps" for n in sizes), file=sys.stderr)
            finally:
                for lab in labs.values():
                    lab.down()
    med = {n: statistics.median(v) for n, v in rate.items()}
    out = {"load_100k_s": statistics.median(load), "load_goal_s": 2.0,
           "pps": med, "ratio_to_1": {n: med[n] / med[1] for n in sizes}, "goal_ratio": 0.9}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"100,000 entries load in {out['load_100k_s']:.3f} s (goal <= 2 s)")
        for n in sizes:
            print(f"{n:>7,} entries: {med[n]:>10,.0f} pps ({100 * med[n] / med[1]:.1f} % of 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
