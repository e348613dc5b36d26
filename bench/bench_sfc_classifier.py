"""Benchmark: the SFC classifier's table load (issue goal: 100,000 entries in at most 2 s, timed
as the wall time of the whole command ``sfclab chain classify LAB CHAIN --from-file F``, for a
JSON file and YAML files in flow and block style) and its per-packet cost as the table grows (1,
1,000, 100,000 entries: goal within 10 % of the 1-entry figure), side by side in one run, medians of
``--reps``.

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
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv4Address
from pathlib import Path

from sfclab.api import Lab
from sfclab.live.ops import classify

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, dst = int(sys.argv[2]), (sys.argv[1], 7000)
t0 = time.perf_counter()
for _ in range(n):
    s.sendto(b"x" * 18, dst)
print(n / (time.perf_counter() - t0))
"""


def rows(n: int) -> list[dict]:
    base = int(IPv4Address("10.0.0.0"))
    return [{"ingress": "src", "proto": "udp", "src": f"{IPv4Address(base + i)}/32",
             "dport": 9999} for i in range(n)]


def entries_file(n: int, into: Path, form: str = "json") -> Path:
    """``n`` entries as JSON, or YAML in ``flow`` (one ``- {...}`` a line) or ``block`` style."""
    f = into / f"entries-{n}-{form}.{'json' if form == 'json' else 'yaml'}"
    if form == "json":
        f.write_text(json.dumps(rows(n)))
    else:
        f.write_text("".join(
            "- {" + ", ".join(f"{k}: {v}" for k, v in r.items()) + "}\n" if form == "flow"
            else "- " + "\n  ".join(f"{k}: {v}" for k, v in r.items()) + "\n"
            for r in rows(n)))
    return f


SFCLAB = [sys.executable, "-m", "sfclab.cli"]
FORMS = ("json", "flow", "block")


def cli_load(lab: str, f: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of ``sfclab chain classify LAB c --from-file F``
    (start-up included).  On a shared machine the CPU time is the steadier figure."""
    t0 = time.monotonic()
    p = subprocess.Popen([*SFCLAB, "chain", "classify", lab, "c", "--from-file", str(f)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        err = p.stderr.read().decode() if p.stderr else ""
        raise SystemExit(f"sfclab chain classify failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime


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
    load: dict[str, list[float]] = {f: [] for f in FORMS}
    cpu: dict[str, list[float]] = {f: [] for f in FORMS}
    rate: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        files = {n: entries_file(n, Path(tmp)) for n in sizes}
        big = {f: entries_file(100000, Path(tmp), f) for f in FORMS}
        for rep in range(a.reps):
            labs = {n: Lab.from_dict(lab_dict(), "bench").up() for n in sizes}
            try:
                for n, lab in labs.items():
                    if n == 100000:  # each form in turn into the same table
                        for form in FORMS:
                            wall, used = cli_load(lab.name, big[form])
                            load[form].append(wall)
                            cpu[form].append(used)
                    else:
                        classify.classify(lab.name, "c", str(files[n]))
                for n in sizes:  # side by side: one trial per size, in turn
                    lab = labs[n]
                    cp = lab.exec("src", [sys.executable, "-c", SENDER, str(lab.address("dst")),
                                          str(a.packets)])
                    rate[n].append(float(cp.stdout))
                print(f"rep {rep + 1}: load " + ", ".join(f"{f} {load[f][-1]:.3f} s" for f in FORMS)
                      + "; " + ", ".join(
                    f"{n:,} entries {rate[n][-1]:,.0f} pps" for n in sizes), file=sys.stderr)
            finally:
                for lab in labs.values():
                    lab.down()
    med = {n: statistics.median(v) for n, v in rate.items()}
    out = {"load_100k_s": {f: statistics.median(v) for f, v in load.items()},
           "load_100k_cpu_s": {f: statistics.median(v) for f, v in cpu.items()}, "load_goal_s": 2.0,
           "pps": med, "ratio_to_1": {n: med[n] / med[1] for n in sizes}, "goal_ratio": 0.9}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        for f, v in out["load_100k_s"].items():
            print(f"100,000 entries from {f:5}: sfclab chain classify takes {v:.3f} s "
                  f"({out['load_100k_cpu_s'][f]:.3f} s of CPU; goal <= 2 s)")
        for n in sizes:
            print(f"{n:>7,} entries: {med[n]:>10,.0f} pps ({100 * med[n] / med[1]:.1f} % of 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
