"""Packets per second through one firewall on a chain: ``kind: firewall`` (nftables, behind the
proxy) against ``kind: bpf-firewall`` (XDP), same lab, same rules, side by side.

    sudo .venv/bin/python scripts/bpf_firewall_vs_kernel.py [--runs 3] [--seconds 5]

The lab is tests/integration/test_bpf_firewall.py's (a, b -> r0 -> fw -> r1 -> dst, the chain
through fw); ``sfcgen send`` offers 64-byte UDP at the maximum rate from a to dst:6000 (no rule
matches: policy accept), ``sfcgen sink --tc`` counts at dst.  What it prints is the received
rate at maximum offered load (not an NDR), per run and the median: a rough side-by-side
figure on a shared 2-core machine, not a bench.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sfclab.api import Lab  # noqa: E402
from tests.integration.test_bpf_firewall import DST, RULES, lab_dict  # noqa: E402

SFCGEN = str(ROOT / "native" / "build" / "sfcgen")


def run(kind: str, seconds: float) -> float:
    lab = Lab.from_dict(lab_dict({"kind": kind, "rules": RULES}), source="bench")
    lab.up()
    try:
        sink = lab.popen("dst", [SFCGEN, "sink", "--port", "6000", "--tc"],
                         stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        lab.exec("a", [SFCGEN, "send", "--dst", DST, "--dport", "6000", "--size", "64",
                       "--rate", "max", "--duration", str(seconds)], timeout=seconds + 30)
        time.sleep(0.5)
        sink.send_signal(signal.SIGTERM)
        out, _ = sink.communicate(timeout=30)
        snap = json.loads(out.strip().splitlines()[-1])
        return snap["received"] / seconds
    finally:
        lab.down()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    got: dict[str, list[float]] = {"firewall": [], "bpf-firewall": []}
    for _ in range(a.runs):
        for kind in got:
            got[kind].append(run(kind, a.seconds))
            print(kind, f"{got[kind][-1]:,.0f} pps", flush=True)
    for kind, v in got.items():
        print(f"median {kind}: {statistics.median(v):,.0f} pps received")
    return 0


if __name__ == "__main__":
    sys.exit(main())
