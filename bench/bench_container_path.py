#!/usr/bin/env python3
"""A router in a container against the same router as a bare namespace: TCP throughput (one
iperf3 flow) and the 64-byte NDR (MLRsearch, ``sfclab traffic ndr``), side by side in one run.
Both labs (src -- r -- dst) are up together and their trials alternate, the order reversed every
other round, so a load that drifts over the run hits both alike.  Medians and the spread
(lowest, highest) of --reps trials.

Run as root:  .venv/bin/python bench/bench_container_path.py [--reps 3] [--iperf 5] [--trial 1]
              [--image localhost/sfclab/base:latest] [--json]

The container's processes join the node's namespace, which sfclab makes and configures the
same way in both labs (forwarding, addresses, routes): the packets' path through the kernel is
the same, so the goal is that the container's figures are within 5 % of the bare router's.
The container is not privileged (podman's default capabilities, a read-only /sys inside): the
NDR's placement of the first hop's receive processing writes the router's sysfs through the
read-write sysfs sfclab holds for the node (docs/containers.md, "The node's sysfs beside a
container").

The NDR's receiver is the default ``kernel`` sink (counted in the softirq that delivers the
frames, at XDP), which the chain's own softirq work cannot starve (docs/measure.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.api import Lab  # noqa: E402
from sfclab.spec.measurement import IperfRequest, NdrRequest  # noqa: E402
from sfclab.traffic import measure  # noqa: E402

SETUPS = ("bare", "container")
#: the container's figure over the bare router's: within this share of 1
GOAL = 0.05


def lab_spec(name: str, image: str | None) -> dict:
    router: dict = {"kind": "router"}
    if image:
        # the base image's own command (/bin/sh) would end at once: the container stays up
        router["image"] = {"name": image, "cmd": ["sleep", "infinity"]}
    return {"name": name,
            "nodes": {"src": {"kind": "host"}, "r": router, "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "r"]}, {"endpoints": ["r", "dst"]}]}


def spread(v: list[float]) -> dict[str, float]:
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iperf", type=float, default=5.0, help="seconds per iperf3 trial")
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per NDR search trial")
    ap.add_argument("--image", default="localhost/sfclab/base:latest")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tag = secrets.token_hex(2)
    runs: dict[str, dict[str, list[float]]] = {k: {"tcp_bps": [], "ndr_pps": [], "ndr_lower_bound": []}
                                         for k in SETUPS}
    with contextlib.ExitStack() as stack:
        labs = {k: stack.enter_context(Lab.from_dict(
                    lab_spec(f"bp{tag}{k[0]}", a.image if k == "container" else None)))
                for k in SETUPS}
        for rep in range(a.reps):
            order = SETUPS if rep % 2 == 0 else tuple(reversed(SETUPS))
            for k in order:  # throughput, both setups in turn
                m = measure.run(labs[k].name, IperfRequest(duration=a.iperf))
                runs[k]["tcp_bps"].append(m.metrics["throughput_bps"])
                print(f"rep {rep} {k:9}: TCP {m.metrics['throughput_bps'] / 1e9:6.2f} Gbit/s",
                      file=sys.stderr, flush=True)
            for k in reversed(order):  # then the NDR, the other way round
                m = measure.run(labs[k].name, NdrRequest(size=64, duration=a.trial))
                # at the generator's most the NDR is a lower bound only (mlr.py): counted too
                bound = "ndr_pps" not in m.metrics
                ndr = m.metrics.get("ndr_pps") or m.metrics.get("ndr_lower_bound_pps")
                runs[k]["ndr_pps"].append(float("nan") if ndr is None else ndr)
                runs[k]["ndr_lower_bound"].append(float(bound))
                print(f"rep {rep} {k:9}: NDR {runs[k]['ndr_pps'][-1]:10,.0f} pps (64 B)"
                      + (" (a lower bound: the generator's most)" if bound else ""),
                      file=sys.stderr, flush=True)
    out: dict = {"reps": a.reps, "image": a.image, "iperf_s": a.iperf, "trial_s": a.trial,
                 "load_average": os.getloadavg()[0],
                 "setups": {k: {m: spread(v) for m, v in r.items()} for k, r in runs.items()}}
    ratios = {m: out["setups"]["container"][m]["median"] / out["setups"]["bare"][m]["median"]
              for m in ("tcp_bps", "ndr_pps")}
    out["container_over_bare"] = ratios
    out["goal_met"] = all(abs(r - 1) <= GOAL for r in ratios.values())
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"src -- r -- dst, r bare or in a container of {a.image}; median (lowest - highest) "
          f"of {a.reps}, load average {out['load_average']:.1f}")
    for k, d in out["setups"].items():
        t, n = d["tcp_bps"], d["ndr_pps"]
        print(f"{k:9} TCP {t['median'] / 1e9:6.2f} Gbit/s ({t['min'] / 1e9:.2f} - "
              f"{t['max'] / 1e9:.2f})   NDR 64 B {n['median']:10,.0f} pps ({n['min']:,.0f} - "
              f"{n['max']:,.0f})")
    print(f"container / bare: TCP {ratios['tcp_bps']:.3f}, NDR {ratios['ndr_pps']:.3f} "
          f"(goal within {GOAL:.0%}): {'met' if out['goal_met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
