"""Benchmark: the socket receiver against the in-kernel one, side by side in one run.

Two labs, up together: ``chain5`` (``src - r1 - r2 - r3 - dst``, routed) and ``chain3``, the
3-function chain of bench_sfc_paths.py (a), steered by labels (dst's eth0 runs the data
plane's XDP program, so the in-kernel receiver counts there at tcx ingress).  For each lab and
each receiver (``--sink socket``, the old default, and ``--sink kernel``, the new one), every
repetition runs, in alternating order:

- ``rate``: one trial offered ``--rate`` (1 Mpps) of 64-byte frames for ``--trial`` seconds:
  the received rate, and the loss placed on the receiving node and on its socket;
- ``ndr`` (unless ``--no-ndr``): the project's NDR search (MLRsearch, ``--trial`` s trials).

Medians and spread (min..max) of ``--reps`` repetitions.  Both receivers run with the same
first-hop placement (the generator alone on its core, the first hop's NAPI threaded and pinned
to the chain's core), so the receiver is the only difference.

    .venv/bin/python bench/bench_receiver.py --reps 5 --trial 1
    .venv/bin/python bench/bench_receiver.py --reps 5 --no-ndr --json
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import statistics
import sys
from contextlib import ExitStack
from typing import Any

from sfclab.api import Lab
from sfclab.spec.measurement import NdrRequest, RateRequest
from sfclab.traffic import measure

SINKS = ("socket", "kernel")
FW = {"kind": "firewall", "rules": []}


def chain5() -> dict[str, Any]:
    return {"name": "br" + secrets.token_hex(3), "chain": {"length": 5}}


def chain3() -> dict[str, Any]:
    names = ["src", "f1", "r1", "f2", "r2", "f3", "dst"]
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f1": FW, "f2": FW, "f3": FW}
    return {"name": "br" + secrets.token_hex(3),
            "nodes": {n: kinds.get(n, {"kind": "router"}) for n in names},
            "links": [{"endpoints": [a, b]} for a, b in zip(names, names[1:])],
            "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                              "dport": measure.BASE_PORT}],
                             "functions": ["f1", "f2", "f3"], "egress": "dst"}}}


LABS = {"chain5": chain5, "chain3-steered": chain3}


def _spread(xs: list[float]) -> dict[str, float]:
    ok = [x for x in xs if not math.isnan(x)]
    if not ok:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"median": statistics.median(ok), "min": min(ok), "max": max(ok)}


def _ndr(m: Any) -> tuple[float, bool]:
    ndr = m.extra.get("ndr_pps")
    if ndr is not None:
        return float(ndr), False
    low = m.metrics.get("ndr_lower_bound_pps")
    return (float(low), True) if low is not None else (float("nan"), False)


def run(reps: int, trial: float, rate: float, ndr: bool) -> dict[str, Any]:
    runs: dict[str, dict[str, dict[str, list[Any]]]] = {
        lab: {s: {"received_pps": [], "sent_pps": [], "lost_at_dst": [], "receiver_drops": [],
                  "limited": [], "ndr_pps": [], "ndr_lower_bound": []} for s in SINKS} for lab in LABS}
    with ExitStack() as stack:
        labs = {k: stack.enter_context(Lab.from_dict(build(), "bench"))
                for k, build in LABS.items()}
        for rep in range(reps):
            for key, lab in labs.items():
                for sink in SINKS if rep % 2 == 0 else SINKS[::-1]:
                    r = runs[key][sink]
                    m = measure.run(lab.name, RateRequest(size=64, rates=[rate],
                                                          duration=trial, sink=sink))
                    p = m.extra["points"][0]
                    where = p.get("located") or {}
                    own = sum(n for per in where.get("receiver_drops", {}).values()
                              for n in per.values())
                    r["received_pps"].append(float(p["received_pps"]))
                    r["sent_pps"].append(float(p["sent_pps"]))
                    r["lost_at_dst"].append(int(where.get("loss_by_node", {}).get("dst", 0)))
                    r["receiver_drops"].append(own)
                    r["limited"].append(p.get("measurement_limited") or False)
                    line = (f"  rep {rep + 1} {key:15} {sink:7}: sent {p['sent_pps']:>9,.0f} "
                            f"received {p['received_pps']:>9,.0f} pps, lost at dst "
                            f"{r['lost_at_dst'][-1]:,}, receiver's own {own:,}"
                            + (f" [limited: {r['limited'][-1]}]" if r["limited"][-1] else ""))
                    if ndr:
                        m = measure.run(lab.name, NdrRequest(size=64, duration=trial,
                                                             sink=sink))
                        pps, lower = _ndr(m)
                        r["ndr_pps"].append(pps)
                        r["ndr_lower_bound"].append(lower)
                        line += f"; NDR {'>=' if lower else ''}{pps:,.0f} pps"
                    print(line, file=sys.stderr, flush=True)
    out: dict[str, Any] = {"reps": reps, "trial_s": trial, "rate_pps": rate, "runs": runs,
                           "summary": {}}
    for key, per in runs.items():
        out["summary"][key] = {
            s: {"sent_pps": _spread(r["sent_pps"]),
                "measurement_limited": sum(1 for x in r["limited"] if x),
                "received_pps": _spread(r["received_pps"]),
                "zero_received": sum(1 for x in r["received_pps"] if x == 0),
                "lost_at_dst": _spread([float(x) for x in r["lost_at_dst"]]),
                **({"ndr_pps": _spread(r["ndr_pps"]),
                    "ndr_lower_bound": any(r["ndr_lower_bound"])} if ndr else {})}
            for s, r in per.items()}
    return out


def _text(r: dict[str, Any]) -> str:
    lines = [f"receivers side by side: {r['reps']} repetitions, {r['trial_s']:g} s trials, "
             f"64-byte frames, rate trials at {r['rate_pps']:,.0f} pps; median (min..max)"]
    for key, per in r["summary"].items():
        for sink, s in per.items():
            rx, tx = s["received_pps"], s["sent_pps"]
            line = (f"  {key:15} {sink:7} sent {tx['median']:>9,.0f} "
                    f"({tx['min']:,.0f}..{tx['max']:,.0f}), {s['measurement_limited']} of "
                    f"{r['reps']} measurement-limited; received {rx['median']:>9,.0f} "
                    f"({rx['min']:,.0f}..{rx['max']:,.0f}) pps, {s['zero_received']} trials "
                    f"with 0; lost at dst {s['lost_at_dst']['median']:,.0f}")
            if "ndr_pps" in s:
                n = s["ndr_pps"]
                line += (f"; NDR {'>=' if s['ndr_lower_bound'] else ''}{n['median']:,.0f} "
                         f"({n['min']:,.0f}..{n['max']:,.0f}) pps")
            lines.append(line)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per trial")
    ap.add_argument("--rate", type=float, default=1e6, help="offered pps of the rate trials")
    ap.add_argument("--no-ndr", action="store_true", help="rate trials only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = run(a.reps, a.trial, a.rate, not a.no_ndr)
    print(json.dumps(r, indent=1) if a.json else _text(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
