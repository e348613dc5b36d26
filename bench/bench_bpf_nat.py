"""bpf-nat against the kernel nat: throughput through one masquerading NAT on a symmetric
chain (the lab of ``tests/integration/test_bpf_nat.py``: in -> r0 -> nat -> r1 -> out), the
same lab with ``kind: nat`` and ``kind: bpf-nat``, interleaved in one run.

1. TCP, one iperf3 flow from ``in`` to ``out`` (Gbit/s, as the receiver counts it);
2. 64-byte UDP, iperf3 ``-u -b 0 -l 64`` (datagrams per second the receiver got).

Medians over ``--reps`` runs.  Run as root from the repository:

    .venv/bin/python bench/bench_bpf_nat.py [--reps 3] [--seconds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from tests.integration.test_bpf_nat import DST, lab_dict, running  # noqa: E402

KINDS = ("nat", "bpf-nat")


def iperf(lab, seconds: float, udp: bool) -> float:
    srv = lab.popen("out", ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        argv = ["iperf3", "-c", DST, "-t", str(seconds), "-J"]
        if udp:
            argv += ["-u", "-b", "0", "-l", "64"]
        out = json.loads(lab.exec("in", argv).stdout)
    finally:
        srv.wait(timeout=30)
    end = out["end"]
    if udp:
        s = end["sum"]
        return (s["packets"] - s["lost_packets"]) / s["seconds"]
    return end["sum_received"]["bits_per_second"] / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    got: dict[str, dict[str, list[float]]] = {k: {"tcp_gbit": [], "udp64_pps": []}
                                              for k in KINDS}
    for _ in range(a.reps):
        for kind in KINDS:
            with running(lab_dict({"kind": kind, "outside": "r1"})) as lab:
                got[kind]["tcp_gbit"].append(iperf(lab, a.seconds, False))
                got[kind]["udp64_pps"].append(iperf(lab, a.seconds, True))
    med = {k: {m: statistics.median(v) for m, v in ms.items()} for k, ms in got.items()}
    for k in KINDS:
        print(f"{k:8} TCP {med[k]['tcp_gbit']:6.2f} Gbit/s   64-byte UDP "
              f"{med[k]['udp64_pps']:10,.0f} datagrams/s   (runs: {got[k]})")
    if a.json:
        Path(a.json).write_text(json.dumps({"median": med, "runs": got}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
