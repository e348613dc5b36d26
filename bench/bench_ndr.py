"""Benchmark: NDR/PDR of a 5-namespace routed chain (scenarios/chain5.yaml) by MLRsearch and by
the binary search, side by side in one run (alternating), 64-byte frames, with the generator and
the chain on separate cores.  Prints medians of the rates found, trials and search time.

    .venv/bin/python bench/bench_ndr.py --reps 3 --trial 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from sfclab.api import Lab
from sfclab.spec.measurement import NdrRequest
from sfclab.traffic import measure

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per (final) trial")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows: dict[str, dict[str, list[float]]] = {m: {"ndr_pps": [], "pdr_pps": [], "trials": [],
                                                   "seconds": [], "traffic_s": []}
                                               for m in ("mlr", "binary")}
    with Lab.from_file(str(HERE.parent / "scenarios" / "chain5.yaml")) as lab:
        for rep in range(a.reps):
            for method in ("mlr", "binary") if rep % 2 == 0 else ("binary", "mlr"):
                t0 = time.monotonic()
                m = measure.run(lab.name, NdrRequest(size=64, duration=a.trial, method=method))
                r = rows[method]
                r["ndr_pps"].append(m.extra.get("ndr_pps") or float("nan"))
                r["pdr_pps"].append(m.extra.get("pdr_pps") or float("nan"))
                r["trials"].append(m.metrics["trials"])
                r["seconds"].append(time.monotonic() - t0)
                r["traffic_s"].append(m.metrics["traffic_time_s"])
                print(f"rep {rep} {method:6}: NDR {r['ndr_pps'][-1]:,.0f} pps, PDR "
                      f"{r['pdr_pps'][-1]:,.0f} pps, {r['trials'][-1]:.0f} trials, "
                      f"{r['seconds'][-1]:.1f} s", file=sys.stderr, flush=True)
    med = {m: {k: round(statistics.median(v), 1) for k, v in r.items()} for m, r in rows.items()}
    if a.json:
        print(json.dumps(med, indent=2))
    else:
        print(f"{'method':8} {'NDR pps':>10} {'PDR pps':>10} {'trials':>7} {'search s':>9} "
              f"{'traffic s':>10}")
        for m, d in med.items():
            print(f"{m:8} {d['ndr_pps']:>10,.0f} {d['pdr_pps']:>10,.0f} {d['trials']:>7.0f} "
                  f"{d['seconds']:>9.1f} {d['traffic_s']:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
