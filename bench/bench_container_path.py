#!/usr/bin/env python3
"""A router in a container against the same router as a bare namespace: TCP throughput (one
iperf3 flow) and the 64-byte NDR (MLRsearch, ``sfclab traffic ndr``), side by side in one run.

Both labs (src -- r -- dst) are up together.  First the two routers' namespaces are compared
where a difference would change the packets' path or cost: every ``net.*`` sysctl, each
interface's offloads (``ethtool -k``), qdiscs, and its queues' and NAPI settings in sysfs
(``rps_cpus``, ``xps_cpus``, ``threaded``, ``gro_flush_timeout``, ...); the differences are
printed (none is expected: sfclab makes and configures both namespaces alike, and the
container only joins its namespace).  A third lab, ``bare2``, is a second bare router: the
*control*.  Its ratio to the first bare router measures the bench's own noise floor (two
setups that are the same), so a container ratio is read against what the machine can resolve
at all.  Then the trials, in *rounds*: each round measures the three setups back to back, the
order rotated from round to round (bare, bare2, container; bare2, container, bare; ...), so a
load that drifts over the run hits all alike.  Each round gives one paired ratio per setup
(over bare); each verdict comes from the median of those ratios and its 95 % bootstrap
interval (resampled rounds, a fixed seed).

The TCP rounds measure *together* (the default, ``--tcp together``): one iperf3 flow through
the bare router and one through the other setup (bare2 or the container) at the same time, for
the same seconds, each client on its own core and each server on the other (so each core holds
one flow's sender and the other's receiver, and a flow's forwarding runs where its packets are
sent).  On these virtual machines one flow's throughput moves by 2x from one 2-s trial to the
next, with the machine's own speed; two flows side by side see the same moments, so their ratio
keeps only what differs between their paths.  Which setup is the first flow (its client on the
first core) alternates from round to round.  ``--tcp apart`` measures one setup at a time, as
the NDR does (kept to compare the two ways).

The 64-byte *cost* rounds time what the path costs per frame rather than where it starts to
lose: fixed-rate trials (``--cost-rate``, 400 kpps by default, below every setup's knee) of
64-byte frames, one setup at a time in rotated rounds, each giving the chain core's network
softirq time (eBPF-timed, :mod:`softirq_clock`) per frame that reached ``dst``: a cost at that
rate, not a capacity (per-frame work falls as batches grow with the rate).  A zero-loss rate
on these machines is set by the longest moment the chain's core is not given to the chain: at
700 kpps its 1,000-frame backlog lasts 1.4 ms, and other programs hold that core for longer
(docs/containers.md), so one router's NDR searches end in two clusters, and two identical
routers' NDRs differ by up to 1.37x.  The cost per frame counts only the time the path's own
work took, so it resolves what the NDR cannot.

The verdicts:

- ``within 5 %``: the whole interval lies within 0.95 .. 1.05;
- ``differs``:   the whole interval lies outside it, on one side;
- ``not resolved``: the interval is wider than the machine's noise lets this run decide.

Run as root:  .venv/bin/python bench/bench_container_path.py [--tcp-reps 16] [--iperf 2]
              [--tcp together|apart] [--warmup 1] [--cost-reps 16] [--cost-rate 400000] [--ndr-reps 6] [--trial 1] [--image localhost/sfclab/base:latest] [--json]
              (``--reps N`` sets --tcp-reps, --cost-reps and --ndr-reps: ``make bench`` gives it)

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
import random
import secrets
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.api import Lab  # noqa: E402
from sfclab.kernel import netns  # noqa: E402
from sfclab.spec.measurement import IperfRequest, NdrRequest, RateRequest  # noqa: E402
from sfclab.traffic import measure  # noqa: E402
from sfclab.traffic.iperf import Target, run_iperf  # noqa: E402
from sfclab.traffic.result import Measurement  # noqa: E402
from softirq_clock import SoftirqClock, rx_packets  # noqa: E402

SETUPS = ("bare", "bare2", "container")
#: the setups judged against the first bare router: the control (same as bare) and the container
AGAINST_BARE = ("bare2", "container")
#: the container's figure over the bare router's: within this share of 1
GOAL = 0.05
#: bootstrap resamples of the rounds, and the seed (the same run gives the same interval)
RESAMPLES = 2000
SEED = 1
#: fewer paired rounds than this give no verdict: a bootstrap of 2 to 4 values only restates
#: their range (their smallest and largest ratio are given instead)
MIN_ROUNDS = 5
#: sysfs files of an interface compared between the two routers (queues/* and these)
IF_FILES = ("threaded", "gro_flush_timeout", "napi_defer_hard_irqs", "tx_queue_len", "mtu", "flags")
#: sysctls that differ between any two namespaces, whatever they hold
VOLATILE = ("net.ipv6.conf.all.stable_secret", "net.ipv6.conf.default.stable_secret")


def lab_spec(name: str, image: str | None) -> dict:
    router: dict = {"kind": "router"}
    if image:
        # the base image's own command (/bin/sh) would end at once: the container stays up
        router["image"] = {"name": image, "cmd": ["sleep", "infinity"]}
    return {
        "name": name,
        "nodes": {"src": {"kind": "host"}, "r": router, "dst": {"kind": "host"}},
        "links": [{"endpoints": ["src", "r"]}, {"endpoints": ["r", "dst"]}],
    }


def _out(ns: str, argv: list[str]) -> str:
    return netns.run(ns, argv, check=False, timeout=120).stdout


def router_settings(ns: str, ifnames: list[str]) -> dict[str, str]:
    """What decides a packet's path and cost in router namespace ``ns``, key -> value."""
    out: dict[str, str] = {}
    for line in _out(ns, ["sysctl", "-a"]).splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.startswith("net.") and key not in VOLATILE:
            out[f"sysctl {key}"] = value
    out["tc qdisc"] = _out(ns, ["tc", "qdisc", "show"]).strip()
    script = (
        'for f in /sys/class/net/"$1"/queues/*/* '
        + " ".join(f'/sys/class/net/"$1"/{f}' for f in IF_FILES)
        + '; do [ -f "$f" ] && printf "%s %s\\n" "$f" "$(cat "$f" 2>/dev/null)"; done'
    )
    for i, ifname in enumerate(ifnames):
        for line in _out(ns, ["ethtool", "-k", ifname]).splitlines()[1:]:
            out[f"if{i} ethtool {line.split(':')[0].strip()}"] = line.partition(":")[2].strip()
        sysfs = subprocess.run(
            ["ip", "netns", "exec", ns, "sh", "-c", script, "sh", ifname],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        for line in sysfs.splitlines():
            path, _, value = line.partition(" ")
            out[f"if{i} sysfs {path.split(ifname + '/', 1)[-1]}"] = value
    return out


def differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [
        f"{k}: bare {a.get(k)!r}, container {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def bits_per_cpu_second(m: Measurement, seconds: float) -> float:
    """Bits received per CPU second of iperf3's client and server: the cost of the path.  On
    these machines (tick-based CPU accounting, no separate IRQ time) a process's system time
    includes the softirq work run in its context, which is where a veth's receiver, and every
    namespace it forwards to, runs; so this counts the forwarding too, and unlike the
    throughput it is not lowered by other processes taking the CPUs."""
    used = sum(
        (f.get("client_cpu_s") or 0.0) + (f.get("server_cpu_s") or 0.0)
        for f in m.extra.get("per_flow", [])
    )
    return m.metrics["throughput_bps"] * seconds / used if used > 0 else float("nan")


def spread(v: list[float]) -> dict[str, float]:
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def paired(bare: list[float], boxed: list[float]) -> dict:
    """The rounds' ratios (a setup over bare), their median, its 95 % bootstrap interval
    and the verdict against :data:`GOAL`."""
    ratios = [c / b for b, c in zip(bare, boxed) if b > 0 and c == c]
    if not ratios:
        return {"ratios": [], "verdict": "no data"}
    if len(ratios) < MIN_ROUNDS:
        return {
            "ratios": [round(r, 4) for r in ratios],
            "median": statistics.median(ratios),
            "ci95": [min(ratios), max(ratios)],
            "verdict": f"too few rounds for a verdict (fewer than {MIN_ROUNDS})",
        }
    rnd = random.Random(SEED)
    meds = sorted(statistics.median(rnd.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES))
    lo, hi = meds[int(0.025 * RESAMPLES)], meds[int(0.975 * RESAMPLES) - 1]
    if 1 - GOAL <= lo and hi <= 1 + GOAL:
        verdict = f"within {GOAL:.0%}"
    elif hi < 1 - GOAL or lo > 1 + GOAL:
        verdict = "differs"
    else:
        verdict = "not resolved"
    return {
        "ratios": [round(r, 4) for r in ratios],
        "median": statistics.median(ratios),
        "ci95": [lo, hi],
        "verdict": verdict,
    }


def together(labs: dict[str, Lab], order: tuple[str, str], seconds: float) -> dict[str, dict]:
    """One iperf3 flow through each of two labs at the same time (the first in ``order`` is
    flow 0: its client on the first core, its server on the second; the other the reverse):
    per setup its throughput and its bits per CPU second of its own client and server."""
    m = run_iperf("", "", "", duration=seconds, targets=[
        Target(k, labs[k].netns("src"), labs[k].netns("dst"), str(labs[k].address("dst")))
        for k in order])
    out: dict[str, dict] = {}
    for k in order:
        flows = [f for f in m.extra["per_flow"] if f.get("pair") == k]
        used = sum((f.get("client_cpu_s") or 0.0) + (f.get("server_cpu_s") or 0.0) for f in flows)
        bps = m.metrics[f"pair.{k}.throughput_bps"]
        out[k] = {"tcp_bps": bps,
                  "tcp_bits_per_cpu_s": bps * seconds / used if used > 0 else float("nan")}
    return out


def cost_trial(lab: Lab, clock: SoftirqClock, rate: float, seconds: float) -> dict:
    """One fixed-rate trial of 64-byte frames: the chain core's network softirq time per frame
    that reached ``dst`` (:mod:`softirq_clock`), and the trial's loss."""
    before = rx_packets(lab.netns("dst"))
    n0 = clock.read()
    m = measure.run(lab.name, RateRequest(rates=[rate], size=64, duration=seconds))
    n1 = clock.read()
    arrived = rx_packets(lab.netns("dst")) - before
    point = m.extra["points"][0]
    chain = point["cores"]["chain"]["cpus"]
    ns = sum(n1[c] - n0[c] for c in chain)
    return {"us_per_frame": ns / 1e3 / arrived if arrived else float("nan"),
            "lost": point["lost"], "limited": bool(point["measurement_limited"])}


def rotated(rep: int) -> tuple[str, ...]:
    """The setups in round ``rep``'s order: each starts a round in turn."""
    i = rep % len(SETUPS)
    return SETUPS[i:] + SETUPS[:i]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tcp-reps", type=int, default=16, help="rounds of TCP trials")
    ap.add_argument("--iperf", type=float, default=2.0, help="seconds per iperf3 trial")
    ap.add_argument("--tcp", choices=("together", "apart"), default="together",
                    help="TCP trials of two setups at the same time (default), or one at a time")
    ap.add_argument(
        "--warmup", type=int, default=1, help="TCP trials of each setup run first and not counted"
    )
    ap.add_argument("--cost-reps", type=int, default=16,
                    help="rounds of fixed-rate 64-byte trials timing the chain core's softirqs")
    ap.add_argument("--cost-rate", type=float, default=400e3,
                    help="their offered rate in pps (below the knee: no loss)")
    ap.add_argument("--ndr-reps", type=int, default=6, help="rounds of NDR searches")
    ap.add_argument("--trial", type=float, default=1.0, help="seconds per cost trial and per NDR search trial")
    ap.add_argument(
        "--reps", type=int,
        help="rounds of every kind (sets --tcp-reps, --cost-reps and --ndr-reps)"
    )
    ap.add_argument("--image", default="localhost/sfclab/base:latest")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.reps is not None:
        a.tcp_reps = a.cost_reps = a.ndr_reps = a.reps
    tag = secrets.token_hex(2)
    runs: dict[str, dict[str, list[float]]] = {
        k: {"tcp_bps": [], "tcp_bits_per_cpu_s": [], "us_per_frame": [],
            "ndr_pps": [], "pdr_pps": []} for k in SETUPS
    }
    bounds = 0
    cost_lossy = 0  # fixed-rate trials that lost frames or were measurement-limited
    # --tcp together: per other setup, the bare router's and its own figures from the same trials
    pair_runs: dict[str, dict[str, dict[str, list[float]]]] = {
        o: {k: {"tcp_bps": [], "tcp_bits_per_cpu_s": []} for k in ("bare", o)}
        for o in AGAINST_BARE
    }
    with contextlib.ExitStack() as stack:
        clock = stack.enter_context(SoftirqClock()) if a.cost_reps else None
        labs = {
            k: stack.enter_context(
                Lab.from_dict(lab_spec(f"bp{tag}{i}", a.image if k == "container" else None))
            )
            for i, k in enumerate(SETUPS)
        }
        seen = {k: router_settings(labs[k].netns("r"), ["eth0", "eth1"]) for k in SETUPS}
        diff = differences(seen["bare"], seen["container"])
        print(
            f"the routers' settings compared ({len(seen['bare'])} keys): "
            f"{len(diff)} differ" + "".join(f"\n  {d}" for d in diff),
            file=sys.stderr,
        )
        for k in SETUPS:  # warm-up, not counted: the first trials after up ran slow
            for _ in range(a.warmup):
                measure.run(labs[k].name, IperfRequest(duration=a.iperf))
        for rep in range(a.tcp_reps if a.tcp == "together" else 0):
            # each round: bare beside bare2 (the control), bare beside the container, the
            # two in turn first, and bare the first flow in every other round
            for other in AGAINST_BARE[rep % 2:] + AGAINST_BARE[:rep % 2]:
                order = ("bare", other) if rep // 2 % 2 == 0 else (other, "bare")
                got = together(labs, order, a.iperf)
                for k in order:
                    pair_runs[other][k]["tcp_bps"].append(got[k]["tcp_bps"])
                    pair_runs[other][k]["tcp_bits_per_cpu_s"].append(
                        got[k]["tcp_bits_per_cpu_s"])
                print(
                    f"round {rep} bare beside {other:9}: TCP "
                    + ", ".join(f"{k} {got[k]['tcp_bps'] / 1e9:.2f}" for k in order)
                    + " Gbit/s",
                    file=sys.stderr,
                    flush=True,
                )
        for rep in range(a.tcp_reps if a.tcp == "apart" else 0):
            for k in rotated(rep):
                m = measure.run(labs[k].name, IperfRequest(duration=a.iperf))
                runs[k]["tcp_bps"].append(m.metrics["throughput_bps"])
                runs[k]["tcp_bits_per_cpu_s"].append(bits_per_cpu_second(m, a.iperf))
                print(
                    f"round {rep} {k:9}: TCP {m.metrics['throughput_bps'] / 1e9:6.2f} Gbit/s",
                    file=sys.stderr,
                    flush=True,
                )
        for rep in range(a.cost_reps):
            for k in rotated(rep):
                assert clock is not None
                c = cost_trial(labs[k], clock, a.cost_rate, a.trial)
                runs[k]["us_per_frame"].append(c["us_per_frame"])
                cost_lossy += c["lost"] > 0 or c["limited"]
                print(
                    f"round {rep} {k:9}: {c['us_per_frame']:.3f} us of network softirq per "
                    f"64-byte frame at {a.cost_rate:,.0f} pps, {c['lost']} lost"
                    f"{', measurement-limited' if c['limited'] else ''}",
                    file=sys.stderr,
                    flush=True,
                )
        for rep in range(a.ndr_reps):
            for k in rotated(rep):
                m = measure.run(labs[k].name, NdrRequest(size=64, duration=a.trial))
                # at the generator's most the NDR is a lower bound only (mlr.py): counted too
                bounds += "ndr_pps" not in m.metrics
                ndr = m.metrics.get("ndr_pps") or m.metrics.get("ndr_lower_bound_pps")
                runs[k]["ndr_pps"].append(float("nan") if ndr is None else ndr)
                pdr = m.metrics.get("pdr_pps") or m.metrics.get("pdr_lower_bound_pps")
                runs[k]["pdr_pps"].append(float("nan") if pdr is None else pdr)
                print(
                    f"round {rep} {k:9}: NDR {runs[k]['ndr_pps'][-1]:10,.0f} pps, PDR "
                    f"{runs[k]['pdr_pps'][-1]:10,.0f} pps (64 B)",
                    file=sys.stderr,
                    flush=True,
                )
    # one setup at a time: the rounds' ratios of what each measured
    over_bare = {
        k: {m: paired(runs["bare"][m], runs[k][m]) for m in runs["bare"] if runs["bare"][m]}
        for k in AGAINST_BARE
    }
    # side by side (empty unless --tcp together): the ratios of the flows that ran together;
    # each setup's figures are those it had beside another (the bare router's: both pairings)
    for o in AGAINST_BARE:
        for m_, v in pair_runs[o]["bare"].items():
            if v:
                over_bare[o][m_] = paired(v, pair_runs[o][o][m_])
            runs["bare"][m_] += v
            runs[o][m_] += pair_runs[o][o][m_]
    out: dict = {
        "tcp": a.tcp,
        "tcp_reps": a.tcp_reps,
        "warmup": a.warmup,
        "cost_reps": a.cost_reps,
        "cost_rate_pps": a.cost_rate,
        "cost_trials_lossy": cost_lossy,
        "ndr_reps": a.ndr_reps,
        "image": a.image,
        "iperf_s": a.iperf,
        "trial_s": a.trial,
        "load_average": os.getloadavg()[0],
        "settings_compared": len(seen["bare"]),
        "settings_differ": diff,
        "ndr_lower_bounds": bounds,
        "setups": {k: {m: spread(v) for m, v in r.items() if v} for k, r in runs.items()},
        "over_bare": over_bare,
    }
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"src -- r -- dst, r bare or in a container of {a.image}; load average "
        f"{out['load_average']:.1f}; routers' settings: {len(diff)} of "
        f"{out['settings_compared']} differ"
    )
    for k, d in out["setups"].items():
        line = f"{k:9}"
        if "tcp_bps" in d:
            t = d["tcp_bps"]
            c = d["tcp_bits_per_cpu_s"]
            line += (
                f" TCP {t['median'] / 1e9:6.2f} Gbit/s ({t['min'] / 1e9:.2f} - "
                f"{t['max'] / 1e9:.2f}, {len(runs[k]['tcp_bps'])} x {a.iperf:g} s"
                + (", beside another flow" if a.tcp == "together" else "")
                + "), "
                f"{c['median'] / 1e9:.2f} Gbit per CPU second ({c['min'] / 1e9:.2f} - "
                f"{c['max'] / 1e9:.2f})"
            )
        if "us_per_frame" in d:
            u = d["us_per_frame"]
            line += (
                f"   64 B cost {u['median']:.3f} us of softirq/frame ({u['min']:.3f} - "
                f"{u['max']:.3f}, {a.cost_reps} x {a.trial:g} s at {a.cost_rate:,.0f} pps)"
            )
        if "ndr_pps" in d:
            n = d["ndr_pps"]
            line += (
                f"   NDR 64 B {n['median']:10,.0f} pps ({n['min']:,.0f} - "
                f"{n['max']:,.0f}, {a.ndr_reps} searches)"
            )
        if "pdr_pps" in d:
            n = d["pdr_pps"]
            line += f"   PDR 64 B {n['median']:10,.0f} pps ({n['min']:,.0f} - {n['max']:,.0f})"
        print(line)
    if cost_lossy:
        print(f"{cost_lossy} cost trial(s) lost frames or were measurement-limited: their cost "
              "per frame counts (the work done), but a lower --cost-rate keeps them all clean")
    for k, by_metric in out["over_bare"].items():
        for m, p in by_metric.items():
            if p["verdict"] == "no data":
                print(f"{k} / bare, {m}: no data")
                continue
            print(
                f"{k} / bare, {m}: median of {len(p['ratios'])} paired rounds "
                f"{p['median']:.3f}, 95 % interval {p['ci95'][0]:.3f} - {p['ci95'][1]:.3f}: "
                f"{p['verdict']}"
                + ("  (the control: the bench's own noise)" if k == "bare2" else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
