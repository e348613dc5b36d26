"""Benchmark: one 3-function chain under each encapsulation built, and the same functions joined
by plain routes, side by side in one run.

The lab is ``src - f1 - r1 - f2 - r2 - f3 - dst`` (firewalls with no rules, routers between
them), built once per *variant*: the chain ``f1, f2, f3`` with ``encap: mpls``, ``srv6`` (and
each other encapsulation whose table entry is built, :mod:`sfclab.plan.encap`), and ``routes``,
the same lab without ``chains:``, where every hop routes in the kernel and the functions see the
packets as they would behind a chain's proxy (the proxy's cost, SRNK's comparison).

Per variant and frame size (64 and 512 bytes by default; an IPv4 UDP frame):

* NDR (0 % loss) and PDR (0.5 %) by the project's search (``sfclab traffic ndr``: MLRsearch,
  the native generator on its own core, the first hop's receive processing on the other);
* CPU per packet: the whole machine's busy time (every core, the generator's included: it is
  the same for every variant) during one trial at a fixed offered rate below every NDR
  (``--cpu-rate``), divided by the packets received.

The labs are up together and measured in alternating order; figures are medians of ``--reps``.
Each search says how many of its trials were re-run because the machine did not run the chain's
first hop (:mod:`sfclab.traffic.limits`, ``first_hop_held``).
After the runs each steered lab's counters must show the traffic classified (else exit 1).

    .venv/bin/python bench/bench_sfc_encaps.py --reps 3 --trial 1
    .venv/bin/python bench/bench_sfc_encaps.py --sizes 64 --reps 1 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import statistics
import sys
from contextlib import ExitStack
from typing import Any

from sfclab.api import Lab
from sfclab.live.ops import chains
from sfclab.spec.measurement import NdrRequest, RateRequest
from sfclab.traffic import measure
from sfclab.traffic.cpu import CpuMonitor

FW = {"kind": "firewall", "rules": []}
NAMES = ["src", "f1", "r1", "f2", "r2", "f3", "dst"]


def built_encaps() -> list[str]:
    """The encapsulations a chain may take here (their table entries not refused)."""
    try:
        from sfclab.plan.encap import ENCAPS
    except ImportError:  # before the encap table: MPLS only
        return ["mpls"]
    return [n for n, e in ENCAPS.items() if not e.refused]


def lab_of(encap: str | None, ip: int) -> dict[str, Any]:
    """The bench lab (``ip: 4``, or ``ip: 6`` for IPv6 frames): steered by ``encap``, or
    routed (None)."""
    kinds = {"src": {"kind": "host"}, "dst": {"kind": "host"}, "f1": FW, "f2": FW, "f3": FW}
    d: dict[str, Any] = {"name": "e" + secrets.token_hex(3),
                         "nodes": {n: kinds.get(n, {"kind": "router"}) for n in NAMES},
                         "links": [{"endpoints": [a, b]} for a, b in zip(NAMES, NAMES[1:])],
                         "ip": ip}
    if encap:
        d["chains"] = {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                              "dport": measure.BASE_PORT, "family": "any"}],
                             "functions": ["f1", "f2", "f3"], "egress": "dst",
                             "encap": encap}}
    return d


def ndr(lab: str, size: int, trial: float, ip: int) -> tuple[float, float, bool, int, int]:
    """(NDR, PDR, whether the NDR is only a lower bound, trials in the search, of those the
    ones re-run because the machine did not run the first hop) of one search."""
    m = measure.run(lab, NdrRequest(size=size, duration=trial, ip=ip))
    v = m.extra.get("ndr_pps")
    lower = v is None
    if v is None:
        v = m.metrics.get("ndr_lower_bound_pps", float("nan"))
    p = m.extra.get("pdr_pps") or m.metrics.get("pdr_lower_bound_pps") or float("nan")
    trials = m.extra.get("trials", [])
    held = sum(1 for t in trials if "first hop" in str(t.get("measurement_limited") or ""))
    return float(v), float(p), lower, len(trials), held


def cpu_per_packet(lab: str, size: int, rate: float, trial: float, ip: int) -> float:
    """Nanoseconds of CPU (all cores) per received packet at offered ``rate``."""
    r = RateRequest(size=size, duration=trial, rates=[rate], ip=ip)
    with measure.PacketSetup(lab, r) as setup:
        assert setup.gen is not None
        with CpuMonitor() as cpu:
            t = setup.gen.trial(rate, trial, size)
    u = cpu.result
    busy = u["all"]["busy"] / 100 * (os.cpu_count() or 1) * u["interval_s"]
    return busy / t.received * 1e9 if t.received else float("nan")


def median(xs: list[float]) -> float:
    found = [x for x in xs if not math.isnan(x)]
    return statistics.median(found) if found else float("nan")


def run(encaps: list[str], sizes: list[int], reps: int, trial: float, cpu_rate: float,
        ip: int) -> dict[str, Any]:
    variants = [*encaps, "routes"]
    rows: dict[str, dict[int, dict[str, list[Any]]]] = {
        v: {s: {"ndr": [], "pdr": [], "lower": [], "cpu_ns": [], "trials": [], "held": []}
            for s in sizes}
        for v in variants}
    with ExitStack() as stack:
        labs = {v: stack.enter_context(Lab.from_dict(lab_of(None if v == "routes" else v,
                                                            ip), "bench")) for v in variants}
        for rep in range(reps):
            order = variants if rep % 2 == 0 else variants[::-1]
            for size in sizes:
                for v in order:
                    n, p, lower, trials, held = ndr(labs[v].name, size, trial, ip)
                    c = cpu_per_packet(labs[v].name, size, cpu_rate, trial, ip)
                    r = rows[v][size]
                    r["ndr"].append(n)
                    r["pdr"].append(p)
                    r["lower"].append(lower)
                    r["cpu_ns"].append(c)
                    r["trials"].append(trials)
                    r["held"].append(held)
                    print(f"  rep {rep + 1} {size:4} B {v:6}: NDR {'>=' if lower else ''}"
                          f"{n:,.0f} pps, PDR {p:,.0f}, {c:,.0f} ns CPU/packet; {held} of "
                          f"{trials} trials re-run (first hop held)",
                          file=sys.stderr, flush=True)
        classified = {v: chains.inspect(labs[v].name, "c")["chains"]["c"]["directions"][0]
                      ["paths"][0]["classified"] for v in variants if v != "routes"}
    out = {"variants": variants, "ip": ip, "sizes": sizes, "reps": reps, "trial_s": trial,
           "cpu_rate_pps": cpu_rate, "classified": classified, "load": os.getloadavg(),
           "runs": rows,
           "median": {v: {s: {k: median(rows[v][s][k]) for k in ("ndr", "pdr", "cpu_ns")}
                          for s in sizes} for v in variants}}
    return out


def text(r: dict[str, Any]) -> str:
    lines = [f"3-function chain src-f1-r1-f2-r2-f3-dst, IPv{r['ip']}, medians of {r['reps']} runs, "
             f"{r['trial_s']:g} s trials; CPU at {r['cpu_rate_pps']:,.0f} pps offered; "
             f"load average {r['load'][0]:.1f}"]
    for s in r["sizes"]:
        base, base_cpu = (r["median"]["routes"][s][k] for k in ("ndr", "cpu_ns"))
        for v in r["variants"]:
            m = r["median"][v][s]
            # against routes: the proxy's and the encapsulation's cost (SRNK: about 3.5 %)
            lines.append(f"  {s:4} B {v:6}  NDR {m['ndr']:>10,.0f} pps  PDR {m['pdr']:>10,.0f}"
                         f"  {m['cpu_ns']:>7,.0f} ns/packet  NDR/routes "
                         f"{m['ndr'] / base if base else float('nan'):.2f}  CPU/routes "
                         f"{m['cpu_ns'] / base_cpu if base_cpu else float('nan'):.2f}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--encaps", nargs="+", default=built_encaps(),
                    help="encapsulations to run (default: every one built)")
    ap.add_argument("--ip", type=int, choices=[4, 6], default=4,
                    help="the labs' (ip: 4 or ip: 6) and the frames' family (IPv6 frames "
                         "start at 84 bytes)")
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="frame sizes (default 64 512; with --ip 6: 84 512)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per (final) trial")
    ap.add_argument("--cpu-rate", type=float, default=50000.0,
                    help="offered pps of the CPU-per-packet trial (below every NDR)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = a.sizes or ([84, 512] if a.ip == 6 else [64, 512])
    r = run(a.encaps, sizes, a.reps, a.trial, a.cpu_rate, a.ip)
    print(json.dumps(r, indent=2) if a.json else text(r))
    return 0 if all(n > 0 for n in r["classified"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
