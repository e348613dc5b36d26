"""Benchmark: the SFC data plane's forwarding against kernel routing, side by side in one run.

(a) ``chain3``: a 3-function chain ``src - f1 - r1 - f2 - r2 - f3 - dst`` (firewall functions
    with no rules, routers between them) steered by labels (classifier at ``src``, XDP
    forwarders at r1/r2, the proxy around each function) against the very same lab without a
    ``chains:`` section, where every hop routes in the kernel.
(b) ``stack10``: ``src - f - r1 .. r8 - dst`` carrying a 10-label stack (f's proxy and forward
    labels, one forward label per router) against the same hops forwarding plain IPv4 by
    kernel routing (label-less).  Goal: the labelled path at least 90 % of the plain one.

Each figure is the NDR (0 % loss; the PDR, 0.5 % loss, is printed beside it) found by the project's
search (``sfclab traffic ndr``: MLRsearch, 64-byte frames, the native generator pinned to its own
core, the chain's first-hop receive processing steered to the other core); the labs of one part are
up together and searched in alternating order; medians of ``--reps``.  A figure the generator could
not drive past is a lower bound and is printed with ``>=``.  After the runs, the steered lab's
counters must show the traffic classified and forwarded by label (else the bench fails).

    .venv/bin/python bench/bench_sfc_paths.py --reps 3 --trial 1
    .venv/bin/python bench/bench_sfc_paths.py --part b --reps 3 --json
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any

from sfclab.api import Lab
from sfclab.spec.measurement import NdrRequest
from sfclab.live.ops import chains
from sfclab.traffic import measure

FW = {"kind": "firewall", "rules": []}
CLASSIFIER = {"ingress": "src", "proto": "udp", "dport": measure.BASE_PORT}


def _line(names: list[str]) -> list[dict[str, Any]]:
    return [{"endpoints": [a, b]} for a, b in zip(names, names[1:])]


def _lab(names: list[str], kinds: dict[str, dict[str, Any]], functions: list[str] | None
         ) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "b" + secrets.token_hex(3),
                         "nodes": {n: kinds.get(n, {"kind": "router"}) for n in names},
                         "links": _line(names)}
    if functions:
        d["chains"] = {"c": {"classifiers": [CLASSIFIER], "functions": functions,
                             "egress": names[-1]}}
    return d


def part_a(steered: bool) -> dict[str, Any]:
    names = ["src", "f1", "r1", "f2", "r2", "f3", "dst"]
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f1": FW, "f2": FW, "f3": FW}
    return _lab(names, kinds, ["f1", "f2", "f3"] if steered else None)


def part_b(steered: bool) -> dict[str, Any]:
    names = ["src", "f", *[f"r{i}" for i in range(1, 9)], "dst"]
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f": FW}
    return _lab(names, kinds, ["f"] if steered else None)


#: part -> (title, (name, lab builder argument), goal ratio of the first to the second or None)
PARTS = {
    "a": ("3-function chain: labels vs kernel routing", part_a,
          ("labels", "routing"), None),
    "b": ("10-label stack vs plain label-less forwarding, same hops", part_b,
          ("labels10", "plain"), 0.9),
}


def _figure(m: Any) -> tuple[float, bool]:
    """The NDR of a search, and whether it is only a lower bound (generator-limited)."""
    ndr = m.extra.get("ndr_pps")
    if ndr is not None:
        return float(ndr), False
    low = m.metrics.get("ndr_lower_bound_pps")
    return (float(low), True) if low is not None else (float("nan"), False)


def _median(xs: list[float]) -> float:
    """The median of the searches that found a rate (a search on a CPU-starved machine may
    find none: every trial, even the lowest, lost packets in the kernel's backlog)."""
    found = [x for x in xs if not math.isnan(x)]
    return statistics.median(found) if found else float("nan")


def run_part(key: str, reps: int, trial: float) -> dict[str, Any]:
    title, build, (first, second), goal = PARTS[key]
    rows: dict[str, dict[str, list[Any]]] = {n: {"ndr_pps": [], "pdr_pps": [], "lower_bound": [],
                                                 "seconds": []} for n in (first, second)}
    print(f"== ({key}) {title}", file=sys.stderr, flush=True)
    with ExitStack() as stack:
        labs = {}
        for name, steered in ((first, True), (second, False)):
            lab = Lab.from_dict(build(steered), "bench")
            labs[name] = stack.enter_context(lab)
        for rep in range(reps):
            order = (first, second) if rep % 2 == 0 else (second, first)
            for name in order:
                t0 = time.monotonic()
                m = measure.run(labs[name].name, NdrRequest(size=64, duration=trial))
                pps, lower = _figure(m)
                r = rows[name]
                r["ndr_pps"].append(pps)
                r["pdr_pps"].append(float(m.extra.get("pdr_pps") or
                                          m.metrics.get("pdr_lower_bound_pps") or float("nan")))
                r["lower_bound"].append(lower)
                r["seconds"].append(time.monotonic() - t0)
                print(f"  rep {rep + 1} {name:9}: NDR {'>=' if lower else ''}{pps:,.0f} pps, "
                      f"PDR {r['pdr_pps'][-1]:,.0f} pps ({r['seconds'][-1]:.0f} s)",
                      file=sys.stderr, flush=True)
        counters = chains.inspect(labs[first].name, "c")["chains"]["c"]
    path = counters["directions"][0]["paths"][0]
    steered_ok = path["classified"] > 0 and all(
        n["popped"] > 0 for node, n in counters["nodes"].items() if node not in ("src", "dst"))
    med = {n: _median(r["ndr_pps"]) for n, r in rows.items()}
    pdr = {n: _median(r["pdr_pps"]) for n, r in rows.items()}
    out: dict[str, Any] = {
        "part": key, "title": title, "stack": path["stack"], "reps": reps, "trial_s": trial,
        "ndr_pps": med, "pdr_pps": pdr, "runs": rows,
        "pdr_ratio": pdr[first] / pdr[second] if pdr[second] else float("nan"),
        "lower_bound": {n: any(r["lower_bound"]) for n, r in rows.items()},
        "searches_without_a_lossless_rate": {n: sum(1 for x in r["ndr_pps"] if math.isnan(x))
                                             for n, r in rows.items()},
        "ratio": med[first] / med[second] if med[second] else float("nan"),
        "classified_packets": path["classified"], "steered_by_labels": steered_ok}
    if goal is not None:
        out["goal_ratio"] = goal
        out["goal_met"] = out["ratio"] >= goal
    return out


def _text(r: dict[str, Any]) -> str:
    first, second = list(r["ndr_pps"])
    lines = [f"({r['part']}) {r['title']}: stack of {len(r['stack'])} labels, medians of "
             f"{r['reps']} NDR searches, {r['trial_s']:g} s trials, 64-byte frames"]
    for n, v in r["ndr_pps"].items():
        lines.append(f"  {n:10} NDR {'>=' if r['lower_bound'][n] else '  '}{v:>10,.0f} pps "
                     f"(runs: {', '.join(f'{x:,.0f}' for x in r['runs'][n]['ndr_pps'])}); "
                     f"PDR {r['pdr_pps'][n]:,.0f} pps; "
                     f"{r['searches_without_a_lossless_rate'][n]} searches found no rate")
    goal = f" (goal >= {r['goal_ratio']:.0%}: {'met' if r['goal_met'] else 'NOT met'})" \
        if "goal_ratio" in r else ""
    lines.append(f"  {first}/{second}: NDR {r['ratio']:.2f}{goal}, PDR {r['pdr_ratio']:.2f}; "
                 f"{r['classified_packets']:,} packets classified onto the chain")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=["a", "b", "all"], default="all")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per (final) trial")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results = [run_part(k, a.reps, a.trial) for k in (["a", "b"] if a.part == "all" else [a.part])]
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n".join(_text(r) for r in results))
    return 0 if all(r["steered_by_labels"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
