"""Benchmark: what one forwarding hop costs, labelled (XDP) and routed (the kernel's IP stack),
by the slope between a short and a long chain -- the figure the hops goal of issue #27 rests on.

The goal compares 8 forwarding hops and one function steered by labels with the same hops routed,
and expects 5x from "9 kernel hops against 1 kernel hop plus 8 XDP hops", that is an XDP hop at a
tenth of a kernel hop.  This bench measures that tenth instead of assuming it.  Four labs are up
together: ``src - r1..rN - f - dst`` of :mod:`bench_sfc_hops` with N = 1 and N = ``--long`` (8)
routers, each steered by labels and routed.  Every round offers each lab the same fixed rate of
64-byte frames (``--rate``, below every lab's knee, so nothing is lost and every lab does the same
work per frame), in an order rotated from round to round, and reads the chain's CPU per frame:
the run time of the chain's own threads (the first hop's pinned NAPI thread, in which every later
hop and the sink run, and the chain core's ksoftirqd: ``cores.chain.threads_cpu_s``) over the
frames received in the same span, the whole trial (:func:`sfclab.traffic.ndr.trial_cpu_per_packet`),
which other programs' load does not add to.  Per side,

    one hop = (cost with N long - cost with 1) / (N long - 1)

per round (both labs of a side in the same round), and its median over rounds; what is left of
the long chain's cost (the first hop's entry, the function ``f``, the classifier or the proxy, the
sink) is the side's fixed part.  From them:

- ``c``, a labelled hop over a routed one (the issue assumes 0.1);
- the issue's ideal, 9 / (1 + 8 c): 9 kernel hops against 1 kernel hop and 8 labelled ones;
- the best a labelled chain could reach here, the routed chain's whole cost over the same chain
  with its N hops labelled and nothing else changed: (fixed_routed + N h_routed) /
  (fixed_routed + N h_labels); a labelled chain also pays its classifier and proxy.

A frame costs less the more frames a softirq takes in one batch, so a hop costs less at a
higher rate. ``--labels-rate`` offers the labelled labs their own rate (the routed ones keep
``--rate``): with each side near its own knee, ``c`` is what the two sides' hops cost where
their NDRs are decided, each at its own rate (the output says both).

Run as root (``make bench`` runs it too)::

    .venv/bin/python bench/bench_hop_cost.py --rounds 8 --rate 100000
    .venv/bin/python bench/bench_hop_cost.py --rounds 3 --json
    .venv/bin/python bench/bench_hop_cost.py --rounds 3 --rate 120000 --labels-rate 360000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import ExitStack
from typing import Any

from bench_sfc_hops import lab_dict
from sfclab.api import Lab
from sfclab.spec.measurement import RateRequest
from sfclab.traffic import measure, ndr

SIDES = ("labels", "routed")
#: the issue's count: 8 forwarding hops and one kernel function
ISSUE_HOPS = 8


def cost(lab: str, rate: float, seconds: float) -> dict[str, Any]:
    """One fixed-rate trial (xdp engine, 64 bytes): the chain's CPU microseconds per frame."""
    m = measure.run(lab, RateRequest(rates=[rate], size=64, duration=seconds, engine="xdp"))
    p = m.extra["points"][0]
    cpu = ndr.trial_cpu_per_packet(p)
    us = cpu[0] if cpu is not None and cpu[1] == "threads" else float("nan")
    return {"us_per_frame": us, "lost": p["lost"], "limited": bool(p["measurement_limited"])}


def spread(xs: list[float]) -> dict[str, float]:
    ok = [x for x in xs if x == x]
    if not ok:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"median": statistics.median(ok), "min": min(ok), "max": max(ok)}


def run(rounds: int, rate: float, seconds: float, long: int,
        labels_rate: float | None = None) -> dict[str, Any]:
    rates = {"labels": labels_rate or rate, "routed": rate}
    keys = [(side, n) for n in (1, long) for side in SIDES]
    per: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
    lossy = 0
    with ExitStack() as stack:
        labs = {k: stack.enter_context(Lab.from_dict(
            lab_dict(k[0] == "labels", routers=k[1]), "bench")) for k in keys}
        for r in range(rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for k in order:
                c = cost(labs[k].name, rates[k[0]], seconds)
                per[k].append(c["us_per_frame"])
                lossy += c["lost"] > 0 or c["limited"]
                print(f"  round {r + 1} {k[0]:6} {k[1]} router(s): {c['us_per_frame']:.3f} us "
                      f"per frame, {c['lost']} lost"
                      f"{', measurement-limited' if c['limited'] else ''}",
                      file=sys.stderr, flush=True)
    hop = {s: spread([(b - a) / (long - 1) for a, b in zip(per[(s, 1)], per[(s, long)])])
           for s in SIDES}
    whole = {s: spread(per[(s, long)]) for s in SIDES}
    h_l, h_r = hop["labels"]["median"], hop["routed"]["median"]
    fixed = {s: whole[s]["median"] - long * hop[s]["median"] for s in SIDES}
    c_ratio = h_l / h_r if h_r > 0 else float("nan")
    return {
        "rate_pps": rate, "labels_rate_pps": rates["labels"], "trial_s": seconds, "rounds": rounds, "long": long,
        "lossy_trials": lossy,
        "us_per_frame": {f"{s} {n}": spread(per[(s, n)]) for s, n in keys},
        "hop_us": hop, "fixed_us": fixed, "c": c_ratio,
        "issue_ideal_ratio": (ISSUE_HOPS + 1) / (1 + ISSUE_HOPS * c_ratio),
        "best_ratio_here": (fixed["routed"] + long * h_r) / (fixed["routed"] + long * h_l),
        "measured_ratio": whole["routed"]["median"] / whole["labels"]["median"],
    }


def text(r: dict[str, Any]) -> str:
    at = f"{r['rate_pps']:,.0f} pps" if r["labels_rate_pps"] == r["rate_pps"] else (
        f"{r['labels_rate_pps']:,.0f} pps labelled, {r['rate_pps']:,.0f} pps routed")
    lines = [f"chain CPU per 64-byte frame at {at}, {r['rounds']} rounds of "
             f"{r['trial_s']:g} s (median, lowest to highest):"]
    for k, v in r["us_per_frame"].items():
        lines.append(f"  {k:>9} router(s): {v['median']:.3f} us ({v['min']:.3f} - {v['max']:.3f})")
    for s in SIDES:
        h = r["hop_us"][s]
        lines.append(f"  one {s} hop: {h['median']:.3f} us ({h['min']:.3f} - {h['max']:.3f}); "
                     f"the rest of the chain {r['fixed_us'][s]:.3f} us")
    lines.append(f"  c = labelled hop / routed hop = {r['c']:.3f} (the issue assumes 0.1)")
    lines.append(f"  9 / (1 + 8 c) = {r['issue_ideal_ratio']:.2f}; the best a labelled chain of "
                 f"{r['long']} hops reaches here: {r['best_ratio_here']:.2f}; measured "
                 f"routed / labels at {r['long']} routers: {r['measured_ratio']:.2f}")
    if r["lossy_trials"]:
        lines.append(f"  {r['lossy_trials']} trial(s) lost frames or were limited: lower the rate")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--rate", type=float, default=100e3, help="offered pps (below every knee)")
    ap.add_argument("--labels-rate", type=float, default=None,
                    help="offered pps to the labelled labs (default: --rate)")
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per trial")
    ap.add_argument("--long", type=int, default=8, help="routers in the long chains")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not 1 <= a.rounds <= 50 or not 0 < a.trial <= 60 or not 2 <= a.long <= 16 \
            or not 1e3 <= a.rate <= 10e6 \
            or not (a.labels_rate is None or 1e3 <= a.labels_rate <= 10e6):
        ap.error("expected --rounds 1 to 50, --trial in (0, 60] s, --long 2 to 16, and --rate "
                 "and --labels-rate 1000 to 10000000 pps")
    r = run(a.rounds, a.rate, a.trial, a.long, a.labels_rate)
    print(json.dumps(r, indent=2) if a.json else text(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
