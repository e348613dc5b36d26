"""Benchmark: the cost of a labelled hop -- 8 forwarding hops and one function steered by labels
against the same hops routed by the kernel, side by side in one run (issue #27 item 1).

The lab is ``src - r1 .. r8 - f - dst``: eight routers, then one function ``f`` (a firewall with
no rules, behind the SFC proxy), then the destination host.  *labels*: the chain ``c`` classifies
UDP at ``src`` (tcx egress), the label stack carries the frame through r1..r8 by XDP redirect
(``sfc_forward``), ``f`` sees plain IPv4 between ``sfc_proxy_in`` and ``sfc_proxy_out``, and the
last label is popped before ``dst``.  *routed*: the very same lab without ``chains:``, so every
one of the 9 hops forwards in the kernel's IP stack.  Goal of the issue: labels at least 5x routed
(the ratio of 9 kernel hops to 1 kernel hop plus 8 XDP hops).

Each figure is an NDR (0 % loss; the PDR, 0.5 % loss, beside it) found by the project's search
(``sfclab traffic ndr``: MLRsearch, 64-byte frames, the native generator pinned to its own core,
the first hop's receive processing on the other); both labs are up together, searched in
alternating order, medians of ``--reps``, the spread (min..max of the runs) printed with the
ratio.  The generator's engine is chosen per run: the xdp engine (live frames, about 5 Mpps
here; on the labelled side the chain's classifier runs in the generator, see docs/measure.md) is
tried first and, should sfclab refuse it for this path, the bench says why and uses the
AF_PACKET engine (about 150 kpps at 64 bytes through a chain here).  ``make bench`` runs it.  A side whose search hit the
generator's ceiling is a lower bound, printed with ``>=``, and so is a ratio over it; a rate the
generator did not reach is never reported.  Beside each NDR, the chain's own CPU per packet in
the trial that set it (:func:`sfclab.traffic.ndr.chain_cpu_per_packet`: the run time of the
first hop's pinned NAPI thread, in which every later hop and the sink run), which other
programs' load does not add to; the ratio of the two sides' medians is printed too.  After the
runs the steered lab's counters must show the frames classified and popped at every hop by XDP
in native (driver) mode, else exit 1.

    .venv/bin/python bench/bench_sfc_hops.py --reps 5 --trial 1
    .venv/bin/python bench/bench_sfc_hops.py --reps 3 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import statistics
import sys
import time
from contextlib import ExitStack
from typing import Any

from sfclab.api import Lab
from sfclab.errors import SfclabError
from sfclab.live.ops import chains
from sfclab.spec.measurement import NdrRequest
from sfclab.traffic import measure, ndr

ROUTERS = [f"r{i}" for i in range(1, 9)]
FW = {"kind": "firewall", "rules": []}
CLASSIFIER = {"ingress": "src", "proto": "udp", "dport": measure.BASE_PORT}
#: ``ip -d -j link``'s ``xdp.mode``: 1 = driver (native), 2 = generic (skb), 3 = offload
XDP_MODES = {1: "native", 2: "generic", 3: "offload"}
SIDES = ("labels", "routed")
GOAL = 5.0


def lab_dict(steered: bool, name: str | None = None,
             routers: int = len(ROUTERS)) -> dict[str, Any]:
    """The bench's lab: ``src - r1..r8 - f - dst`` (``routers`` of them), with the chain ``c``
    when ``steered``."""
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f": FW}
    nodes = ["src", *[f"r{i}" for i in range(1, routers + 1)], "f", "dst"]
    d: dict[str, Any] = {"name": name or "h" + secrets.token_hex(3),
                         "nodes": {n: kinds.get(n, {"kind": "router"}) for n in nodes},
                         "links": [{"endpoints": [a, b]} for a, b in zip(nodes, nodes[1:])]}
    if steered:
        d["chains"] = {"c": {"classifiers": [CLASSIFIER], "functions": ["f"], "egress": "dst"}}
    return d


def xdp_modes(lab: Lab, nodes: list[str]) -> dict[str, dict[str, str]]:
    """node -> interface -> XDP attach mode (``native``, ``generic``, ``offload`` or ``none``)."""
    out: dict[str, dict[str, str]] = {}
    for node in nodes:
        cp = lab.exec(node, ["ip", "-d", "-j", "link", "show"])
        out[node] = {}
        for link in json.loads(cp.stdout or "[]"):
            if link["ifname"] == "lo":
                continue
            mode = (link.get("xdp") or {}).get("mode", 0)
            out[node][link["ifname"]] = XDP_MODES.get(mode, "none")
    return out


def choose_engine(lab: str) -> tuple[str, str | None]:
    """The engine that reaches highest and is accepted on this path: ``xdp`` if sfclab takes it,
    else ``packet`` with sfclab's reason for refusing ``xdp``."""
    try:
        measure.run(lab, NdrRequest(size=64, duration=0.1, engine="xdp", max_rate=1000))
    except SfclabError as e:
        return "packet", str(e)
    return "xdp", None


def figure(m: Any) -> tuple[float, bool]:
    """The NDR of a search, and whether it is only a lower bound (the generator's ceiling)."""
    ndr = m.extra.get("ndr_pps")
    if ndr is not None:
        return float(ndr), False
    low = m.metrics.get("ndr_lower_bound_pps")
    return (float(low), True) if low is not None else (float("nan"), False)


def found(xs: list[float]) -> list[float]:
    """The searches that found a rate (a zero-loss goal on a loaded CPU may find none)."""
    return [x for x in xs if not math.isnan(x)]


def median(xs: list[float]) -> float:
    return statistics.median(found(xs)) if found(xs) else float("nan")


def load() -> float:
    return os.getloadavg()[0]


def run(reps: int, trial: float) -> dict[str, Any]:
    rows: dict[str, dict[str, list[Any]]] = {
        s: {"ndr_pps": [], "pdr_pps": [], "lower_bound": [], "load1": [], "us_per_packet": [],
            "errors": []} for s in SIDES}
    with ExitStack() as stack:
        labs = {s: stack.enter_context(Lab.from_dict(lab_dict(s == "labels"), "bench"))
                for s in SIDES}
        engine, refused = choose_engine(labs["labels"].name)
        if refused:
            print(f"  xdp engine refused: {refused}", file=sys.stderr, flush=True)
        for rep in range(reps):
            for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                t0 = time.monotonic()
                r = rows[side]
                try:
                    m = measure.run(labs[side].name, NdrRequest(size=64, duration=trial,
                                                                engine=engine))
                except SfclabError as e:  # kept as a search without a figure; the run goes on
                    r["errors"].append(f"rep {rep + 1}: {e}")
                    print(f"  rep {rep + 1} {side:6}: search failed: {e}", file=sys.stderr,
                          flush=True)
                    continue
                pps, lower = figure(m)
                r["ndr_pps"].append(pps)
                r["pdr_pps"].append(float(m.extra.get("pdr_pps") or
                                          m.metrics.get("pdr_lower_bound_pps") or float("nan")))
                r["lower_bound"].append(lower)
                r["load1"].append(round(load(), 2))
                cpu = ndr.chain_cpu_per_packet(m.extra)
                r["us_per_packet"].append(cpu[0] if cpu else float("nan"))
                print(f"  rep {rep + 1} {side:6}: NDR {'>=' if lower else ''}{pps:,.0f} pps, "
                      f"PDR {r['pdr_pps'][-1]:,.0f} pps, {r['us_per_packet'][-1]:.2f} us/packet "
                      f"({time.monotonic() - t0:.0f} s, load {r['load1'][-1]})",
                      file=sys.stderr, flush=True)
        counters = chains.inspect(labs["labels"].name, "c")["chains"]["c"]
        modes = xdp_modes(labs["labels"], ROUTERS + ["f"])
    path = counters["directions"][0]["paths"][0]
    popped = {n: counters["nodes"][n]["popped"] for n in ROUTERS + ["f"]}
    # where labels arrive (each node's interface toward src), native XDP; generic nowhere
    native = all(modes[n]["eth0"] == "native" for n in modes) and \
        not any(m == "generic" for ifs in modes.values() for m in ifs.values())
    med = {s: median(rows[s]["ndr_pps"]) for s in SIDES}
    lab_runs, routed_runs = found(rows["labels"]["ndr_pps"]), found(rows["routed"]["ndr_pps"])
    spread = [min(lab_runs) / max(routed_runs), max(lab_runs) / min(routed_runs)] \
        if lab_runs and routed_runs else [float("nan")] * 2
    ratio = med["labels"] / med["routed"] if med["routed"] else float("nan")
    return {
        "lab": "src - r1..r8 - f - dst", "stack": path["stack"], "reps": reps, "trial_s": trial,
        "engine": engine, "xdp_engine_refused": refused, "ndr_pps": med,
        "pdr_pps": {s: median(rows[s]["pdr_pps"]) for s in SIDES}, "runs": rows,
        "us_per_packet": {s: median(rows[s]["us_per_packet"]) for s in SIDES},
        "cpu_ratio": (median(rows["routed"]["us_per_packet"]) /
                      median(rows["labels"]["us_per_packet"])),
        "lower_bound": {s: any(rows[s]["lower_bound"]) for s in SIDES},
        "ratio": ratio, "ratio_spread": spread, "ratio_is_lower_bound": any(
            rows["labels"]["lower_bound"]), "goal_ratio": GOAL, "goal_met": ratio >= GOAL,
        "classified_packets": path["classified"], "popped": popped, "xdp_modes": modes,
        "steered_in_native_xdp": path["classified"] > 0 and all(popped.values()) and native}


def text(r: dict[str, Any]) -> str:
    ge = {s: ">=" if r["lower_bound"][s] else "  " for s in SIDES}
    lines = [f"{r['lab']}: {len(r['stack'])} labels, medians of {r['reps']} NDR searches, "
             f"{r['trial_s']:g} s trials, 64-byte frames, engine {r['engine']}"]
    if r["xdp_engine_refused"]:
        lines.append(f"  (xdp engine refused by sfclab on this path: {r['xdp_engine_refused']})")
    for s in SIDES:
        runs = r["runs"][s]
        n = sum(runs["lower_bound"])
        bound = f"; {n} of {len(runs['lower_bound'])} runs generator-bound" if n else ""
        lines.append(f"  {s:7} NDR {ge[s]}{r['ndr_pps'][s]:>10,.0f} pps (runs: "
                     f"{', '.join(f'{x:,.0f}' for x in runs['ndr_pps'])}; load "
                     f"{', '.join(str(x) for x in runs['load1'])}); "
                     f"PDR {r['pdr_pps'][s]:,.0f} pps; {r['us_per_packet'][s]:.2f} us of CPU "
                     f"per packet at the NDR{bound}")
    lo, hi = r["ratio_spread"]
    lines.append(f"  labels/routed: NDR {'>= ' if r['ratio_is_lower_bound'] else ''}"
                 f"{r['ratio']:.2f} (runs {lo:.2f}..{hi:.2f}; goal >= {r['goal_ratio']:g}: "
                 f"{'met' if r['goal_met'] else 'NOT met'}); {r['classified_packets']:,} packets "
                 f"classified; XDP {'native' if r['steered_in_native_xdp'] else 'NOT native'} "
                 "at every hop")
    lines.append(f"  CPU per packet at the NDR, routed / labels: {r['cpu_ratio']:.2f}")
    lines += [f"  {s} search failed: {e}" for s in SIDES for e in r["runs"][s]["errors"]]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per (final) trial")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not 1 <= a.reps <= 50 or not 0 < a.trial <= 60:
        ap.error("expected --reps from 1 to 50 and --trial in (0, 60] seconds")
    r = run(a.reps, a.trial)
    print(json.dumps(r, indent=2) if a.json else text(r))
    return 0 if r["steered_in_native_xdp"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
