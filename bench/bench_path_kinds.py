"""Benchmark: every kind of path at 64 bytes, side by side in one run (issue #27 item 5).

One lab per path kind, all up together; in each round every kind gets one NDR search (0 % loss,
the PDR at 0.5 % beside it: ``sfclab traffic ndr``, MLRsearch, 64-byte frames, the native
generator pinned to its own core and the first hop's receive processing on the other), the
order reversed every other round so that a drifting load hits every kind alike; medians of
``--reps``.  The kinds, traffic from ``src`` to ``dst`` in each:

  routed-veth       src - r1 - r2 - r3 - dst: three routers, kernel routing over veths
  kernel-fn         src - f1 - f2 - f3 - dst: three kernel firewalls (no rules), routed
  labels-kernel-fn  the same three kernel firewalls as a chain steered by labels (classifier
                    at src, the SFC proxy around each function)
  labels-ebpf-fn    the same chain with three bpf-firewalls (no rules): the functions read and
                    pop the labels in XDP themselves, no proxy
  linux-bridge      src - br - dst: a Linux bridge node
  ovs-userspace     src - ovs - dst: an Open vSwitch bridge, userspace datapath (this kernel has
                    no OVS module)
  shortbridge       Trellis Fig. 3 on emulated hosts: src (host source) - nut (router, host nut)
                    - dst (host sink), both links VXLAN tunnels ended in eBPF
                    (``attach: shortbridge``)
  tunnel-bridge     the same with kernel VXLAN devices joined to the nodes by Linux bridges
  tunnel-direct     the same with the VXLAN devices in the nodes

The generator's engine is chosen per kind once: the xdp engine (live frames, about 5 Mpps here;
on a labelled path it runs the chain's classifier, docs/measure.md) where sfclab accepts it,
else the AF_PACKET engine (about 150 kpps through a chain), named in the output.  A search that
stopped at the generator's ceiling is a lower bound, printed ``>=``.

**CPU per packet**: the chain's own CPU time per received packet in the trial that set the
NDR, the search's fastest trial without loss: the run time of the threads the chain's work runs
in (``cores.chain.threads_cpu_s``: the first hop's pinned NAPI thread, in whose softirq
processing every later hop and the sink run, and the chain core's ksoftirqd), so other
programs' load does not add to it (cache contention still does).  Where no NAPI thread was
pinned (the AF_PACKET engine into a first hop without NAPI: OVS here), the chain core's busy
time is used instead, which includes other programs' time on that core; and OVS's userspace
datapath runs in ``ovs-vswitchd``, which is not pinned and may run on either core, so its
figure is approximate either way.  On the emulated hosts (shortbridge, tunnels) the chain core also runs the source
and sink hosts' contexts and the emulated underlay (a bridge namespace): ``bench/bench_hosts.py``
measures the node-under-test host's own cost apart.

Ratios printed after the table: the eBPF chain against the same kernel functions as a chain
and routed (goal >= 5x, issue #27), labels with kernel functions against routing, the
shortbridge against the bridged tunnel.  ``make bench`` runs it.

    .venv/bin/python bench/bench_path_kinds.py --reps 5 --trial 1
    .venv/bin/python bench/bench_path_kinds.py --reps 1 --trial 0.5 --kinds routed-veth,labels-ebpf-fn
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
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from sfclab.api import Lab
from sfclab.errors import SfclabError
from sfclab.spec.measurement import NdrRequest, RateRequest
from sfclab.traffic import measure, ndr

CLASSIFIER = {"ingress": "src", "proto": "udp", "dport": measure.BASE_PORT}
HOST = {"kind": "host"}
GOAL_EBPF = 5.0
#: the engine probe's rate (choose_engine)
PROBE_PPS = 1000


def _line(nodes: dict[str, dict[str, Any]], chain: list[str] | None = None) -> dict[str, Any]:
    """``nodes`` in a line, in order, with the chain ``c`` through ``chain``."""
    names = list(nodes)
    d: dict[str, Any] = {"nodes": nodes,
                         "links": [{"endpoints": [a, b]} for a, b in zip(names, names[1:])]}
    if chain:
        d["chains"] = {"c": {"classifiers": [CLASSIFIER], "functions": chain, "egress": "dst"}}
    return d


def three(kind: dict[str, Any], chained: bool) -> Callable[[], dict[str, Any]]:
    """src - x1 - x2 - x3 - dst, x* of ``kind`` (routers r*, functions f*)."""
    p = "r" if kind["kind"] == "router" else "f"
    names = [f"{p}{i}" for i in (1, 2, 3)]
    return lambda: _line({"src": HOST, **{n: dict(kind) for n in names}, "dst": HOST},
                         names if chained else None)


def one(kind: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """src - x - dst, x a bridge node of ``kind``."""
    return lambda: _line({"src": HOST, "x": dict(kind), "dst": HOST})


def hosted(attach: str) -> Callable[[], dict[str, Any]]:
    """Trellis Fig. 3 (bench/bench_hosts.py): src, nut, dst on three emulated hosts, both
    links VXLAN tunnels met by ``attach``."""
    return lambda: {
        "hosts": {"source": {}, "nut": {}, "sink": {}},
        "nodes": {"src": {"kind": "host", "host": "source"},
                  "nut": {"kind": "router", "host": "nut"},
                  "dst": {"kind": "host", "host": "sink"}},
        "links": [{"endpoints": ["src", "nut"], "attach": attach},
                  {"endpoints": ["nut", "dst"], "attach": attach}]}


ROUTER = {"kind": "router"}
FW = {"kind": "firewall", "rules": []}
BPF_FW = {"kind": "bpf-firewall", "rules": []}
#: kind -> (what the lab is, its builder)
KINDS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "routed-veth": ("3 routers, kernel routing", three(ROUTER, False)),
    "kernel-fn": ("3 kernel firewalls, routed", three(FW, False)),
    "labels-kernel-fn": ("3 kernel firewalls, labels + proxy", three(FW, True)),
    "labels-ebpf-fn": ("3 bpf-firewalls, labels in XDP", three(BPF_FW, True)),
    "linux-bridge": ("1 Linux bridge", one({"kind": "linux-bridge"})),
    "ovs-userspace": ("1 OVS bridge, userspace datapath",
                      one({"kind": "ovs-bridge", "datapath": "netdev"})),
    "shortbridge": ("router between 2 VXLAN tunnels ended in eBPF", hosted("shortbridge")),
    "tunnel-bridge": ("router between 2 VXLAN tunnels + Linux bridges", hosted("bridge")),
    "tunnel-direct": ("router between 2 VXLAN tunnels in the node", hosted("direct")),
}
#: ratio name -> (numerator kind, denominator kind, goal or None)
RATIOS = {
    "ebpf chain / kernel chain": ("labels-ebpf-fn", "labels-kernel-fn", GOAL_EBPF),
    "ebpf chain / kernel functions routed": ("labels-ebpf-fn", "kernel-fn", GOAL_EBPF),
    "kernel chain / kernel functions routed": ("labels-kernel-fn", "kernel-fn", None),
    "shortbridge / tunnel-bridge": ("shortbridge", "tunnel-bridge", None),
}


def lab_dict(kind: str) -> dict[str, Any]:
    return {"name": "pk" + secrets.token_hex(3), **KINDS[kind][1]()}


def choose_engine(lab: str) -> tuple[str, str | None]:
    """``xdp`` if sfclab takes it on this path and its frames arrive (1,000 pps for 0.3 s:
    a sender whose first interface is no veth, a VXLAN device moved into the node, drops XDP
    frames), else ``packet`` and the reason."""
    try:
        m = measure.run(lab, RateRequest(size=64, rates=[PROBE_PPS], duration=0.3,
                                         engine="xdp"))
    except SfclabError as e:
        return "packet", str(e)
    got = m.metrics.get("max_received_pps") or 0.0
    if got < PROBE_PPS / 2:
        return "packet", f"the xdp engine's frames did not arrive ({got:,.0f} of {PROBE_PPS:,} pps)"
    return "xdp", None


def search(lab: str, engine: str, trial: float) -> dict[str, Any]:
    """One NDR search: NDR, PDR, lower bound or not, CPU per packet at the NDR; a search that
    failed (the generator's error) is kept with its error and no figures, and the run goes on."""
    try:
        m = measure.run(lab, NdrRequest(size=64, duration=trial, engine=engine))
    except SfclabError as e:
        nan = float("nan")
        return {"ndr_pps": nan, "pdr_pps": nan, "lower_bound": False, "us_per_packet": nan,
                "load1": round(os.getloadavg()[0], 2), "error": str(e)}
    ndr = m.extra.get("ndr_pps")
    lower = ndr is None and m.metrics.get("ndr_lower_bound_pps") is not None
    if ndr is None:
        ndr = m.metrics.get("ndr_lower_bound_pps")
    pdr = m.extra.get("pdr_pps") or m.metrics.get("pdr_lower_bound_pps")
    return {"ndr_pps": float("nan") if ndr is None else float(ndr),
            "pdr_pps": float("nan") if pdr is None else float(pdr), "lower_bound": lower,
            "us_per_packet": cpu_per_packet(m.extra), "load1": round(os.getloadavg()[0], 2)}


def cpu_per_packet(extra: dict[str, Any]) -> float:
    """The chain's CPU microseconds per packet at the NDR (:func:`ndr.chain_cpu_per_packet`)."""
    got = ndr.chain_cpu_per_packet(extra)
    return float("nan") if got is None else got[0]


def median(xs: list[float]) -> float:
    got = [x for x in xs if not math.isnan(x)]
    return statistics.median(got) if got else float("nan")


def run(kinds: list[str], reps: int, trial: float) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    engines: dict[str, tuple[str, str | None]] = {}
    with ExitStack() as stack:
        labs = {}
        for k in kinds:
            print(f"  lab for {k} ...", file=sys.stderr, flush=True)
            labs[k] = stack.enter_context(Lab.from_dict(lab_dict(k), "bench"))
            engines[k] = choose_engine(labs[k].name)
        for rep in range(reps):
            for k in kinds if rep % 2 == 0 else kinds[::-1]:
                t0 = time.monotonic()
                r = search(labs[k].name, engines[k][0], trial)
                runs[k].append(r)
                if "error" in r:
                    print(f"  rep {rep + 1} {k:16}: search failed: {r['error']}",
                          file=sys.stderr, flush=True)
                    continue
                print(f"  rep {rep + 1} {k:16}: NDR {'>=' if r['lower_bound'] else ''}"
                      f"{r['ndr_pps']:,.0f} pps, PDR {r['pdr_pps']:,.0f}, "
                      f"{r['us_per_packet']:.2f} us/packet ({time.monotonic() - t0:.0f} s, "
                      f"load {r['load1']})", file=sys.stderr, flush=True)
    rows = {k: {"lab": KINDS[k][0], "engine": engines[k][0], "engine_refused": engines[k][1],
                "ndr_pps": median([r["ndr_pps"] for r in runs[k]]),
                "pdr_pps": median([r["pdr_pps"] for r in runs[k]]),
                "us_per_packet": median([r["us_per_packet"] for r in runs[k]]),
                "lower_bound": any(r["lower_bound"] for r in runs[k]), "runs": runs[k]}
            for k in kinds}
    ratios = {}
    for name, (a, b, goal) in RATIOS.items():
        if a in rows and b in rows:
            x = rows[a]["ndr_pps"] / rows[b]["ndr_pps"] if rows[b]["ndr_pps"] else float("nan")
            ratios[name] = {"ratio": x, "goal": goal, "lower_bound": rows[a]["lower_bound"],
                            "met": None if goal is None else x >= goal}
    return {"size": 64, "reps": reps, "trial_s": trial, "kinds": rows, "ratios": ratios}


def text(r: dict[str, Any]) -> str:
    lines = [f"64-byte frames, medians of {r['reps']} NDR searches, {r['trial_s']:g} s trials",
             f"{'kind':17} {'lab':48} {'engine':7} {'NDR pps':>12} {'PDR pps':>11} "
             f"{'us/packet':>9}  load"]
    for k, v in r["kinds"].items():
        ge = ">=" if v["lower_bound"] else ""
        loads = ", ".join(str(x["load1"]) for x in v["runs"])
        lines.append(f"{k:17} {v['lab']:48} {v['engine']:7} {ge + format(v['ndr_pps'], ',.0f'):>12}"
                     f" {v['pdr_pps']:>11,.0f} {v['us_per_packet']:>9.2f}  {loads}")
    for k, v in r["kinds"].items():
        if v["engine_refused"]:
            lines.append(f"  ({k}: xdp engine refused: {v['engine_refused']})")
    for name, v in r["ratios"].items():
        goal = "" if v["goal"] is None else \
            f" (goal >= {v['goal']:g}: {'met' if v['met'] else 'NOT met'})"
        lines.append(f"{name}: {'>= ' if v['lower_bound'] else ''}{v['ratio']:.2f}{goal}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per (final) trial")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated, from: " + ", ".join(KINDS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        ap.error(f"expected kinds from {', '.join(KINDS)}, got {', '.join(unknown) or 'none'}")
    if not 1 <= a.reps <= 50 or not 0 < a.trial <= 60:
        ap.error("expected --reps from 1 to 50 and --trial in (0, 60] seconds")
    r = run(kinds, a.reps, a.trial)
    print(json.dumps(r, indent=2) if a.json else text(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
