"""Benchmark: `sfclab up`/`down` of routed veth chains vs a shell script with one `ip` process
per object, side by side in one run (alternating, medians).

    .venv/bin/python bench/bench_lab.py [--sizes 10,100,250] [--repeat 5] [--json]

Both build the same thing: N namespaces in a line, veth pairs, addresses, forwarding in the
routers, and routes so both ends reach each other.  sfclab is run as the real command
(`sfclab up FILE`, `sfclab down NAME`), process start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SFCLAB = [sys.executable, "-m", "sfclab.cli"]


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10,100,250")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            f = os.path.join(tmp, f"bench{n}.yaml")
            with open(f, "w") as fh:
                fh.write(f"name: bench{n}\nchain: {{length: {n}}}\n")
            t = {"sfclab_up": [], "sfclab_down": [], "shell_up": [], "shell_down": []}
            for _ in range(a.repeat):
                t["sfclab_up"].append(timed(SFCLAB + ["up", f]))
                t["sfclab_down"].append(timed(SFCLAB + ["down", f"bench{n}"]))
                t["shell_up"].append(timed([f"{HERE}/shell_chain.sh", "up", str(n), "sfbsh-"]))
                t["shell_down"].append(timed([f"{HERE}/shell_chain.sh", "down", str(n), "sfbsh-"]))
            med = {k: statistics.median(v) for k, v in t.items()}
            rows.append({"namespaces": n, **{k: round(v, 4) for k, v in med.items()},
                         "up_speedup": round(med["shell_up"] / med["sfclab_up"], 2),
                         "down_speedup": round(med["shell_down"] / med["sfclab_down"], 2),
                         "repeat": a.repeat})
            if not a.json:
                print(f"N={n:4d}  sfclab up {med['sfclab_up']:.3f}s down {med['sfclab_down']:.3f}s"
                      f" | shell up {med['shell_up']:.3f}s down {med['shell_down']:.3f}s"
                      f" | speed-up up x{rows[-1]['up_speedup']} down x{rows[-1]['down_speedup']}",
                      flush=True)
    if a.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
