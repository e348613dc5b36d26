#!/usr/bin/env python3
"""Trellis's Figure 3 on emulated hosts: the forwarding capacity of a node-under-test host (a
router node on host "nut") between a source host and a sink host, for each way a virtual link
meets the node, side by side in one run: the labs are up together and their trials alternate
(the order reversed every other round), so a load that drifts over the run hits every setup
alike.  Medians of --reps trials are reported.

Run as root:  .venv/bin/python bench/bench_hosts.py [--reps 5] [--duration 2] [--sizes 64,1518]
              [--shared-core] [--json]

Setups (nodes: src on host "source", nut on host "nut", dst on host "sink"):
  bridged-if            no tunnel: src, nut and dst share one host, each link a Linux bridge in
                        its context (the node bridged to physical-like interfaces)
  bridge                VXLAN tunnels (kernel devices) joined to the nodes' veths by Linux bridges
  direct                VXLAN tunnels (kernel devices) terminated directly in the nodes
  shortbridge           what `attach: shortbridge` makes: the tunnel ended in eBPF in the host
                        context (vxlan_decap at the underlay interface's ingress, straight into
                        the node; vxlan_encap at the port's ingress, out of the underlay
                        interface): no VXLAN device, no bridge
  shortbridge-vxlandev  `attach: shortbridge-vxlandev`, the earlier form: kernel VXLAN devices
                        joined to the ports by tc redirects
The generator is the native one (sfcgen, sfclab.traffic.native) at its maximum rate.

Which work runs where (two cores: the "chain" core and the generator's core).  Trellis's
underlay was a hardware switch and the node-under-test machine did its own work only.  By
default (the nut-alone layout) receive processing is steered (RPS) where frames enter the
node-under-test host (its underlay interface ul0; bridged-if: its port toward src) to the chain
core, and where frames leave it (the underlay's end of the veth to its ul0; bridged-if: dst's
eth0) to the generator's.  A frame sent into a veth is processed in the sender's context, so
then the chain core runs exactly the node-under-test host's work: its ul0's receive path, the
tunnel's end (the VXLAN device's UDP socket path, or vxlan_decap), the bridge or redirect, the
node's veths, the router, and the way back out (encapsulation, ul0's transmit).  The generator's
core runs everything else: the generator, the source host's context, the emulated underlay
(its bridge, twice), the sink host's context and the sink program.  That core is the slower
side, so the node-under-test host is never saturated and the frames forwarded are the
generator core's rate; the node-under-test host's capacity is read off the chain core instead.
All of that host's work runs in the network softirqs of the chain core (RPS hands frames to it
there), so its cost per frame is the chain core's NET_RX/NET_TX softirq time over the trial,
timed to the nanosecond by eBPF on irq:softirq_entry/exit (native/build/sfc-softirq; this
kernel has no IRQ time accounting, so /proc/stat only samples softirq time), per forwarded frame;
capacity = 1 / that.  Other programs' network softirqs on that core count too (a small error on
a busy machine); their user and system time do not.  /proc/stat is shown alongside: the chain
core's kernel-busy share (wall time minus idle, iowait, user, nice and steal: it includes
others' system time) and its per-frame figure, and the generator core's busy share (near 100 %:
it is the bottleneck, as it should be); a trial in which others ran user time on the chain core
is flagged.
The goals are checked on the capacity.

With --shared-core (the earlier layout) the underlay runs on the chain core too (RPS where frames
leave the source host's ul0 to the chain core, where they enter the sink host back to the
generator's): the rates are then the forwarded frames per second, which that core limits.

The forwarded rate is frames that reached the sink node's interface (rx_packets of dst/eth0
over the sender's time); the sink program's own count is shown too.
Goals (issue 13): shortbridge at least 1.5x bridge, and at least 90 % of direct.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.api import Lab  # noqa: E402
from sfclab.kernel import cpus  # noqa: E402
from sfclab.traffic import cores  # noqa: E402
from sfclab.traffic.native import NativeGenerator  # noqa: E402
from softirq_clock import SoftirqClock, rx_packets  # noqa: E402

SETUPS = ("bridged-if", "bridge", "direct", "shortbridge", "shortbridge-vxlandev")


def lab_spec(name: str, setup: str) -> dict:
    one_host = setup == "bridged-if"
    hosts = {"nut": {}} if one_host else {"source": {}, "nut": {}, "sink": {}}
    attach = "bridge" if one_host else setup
    return {
        "name": name, "hosts": hosts,
        "nodes": {"src": {"kind": "host", "host": "nut" if one_host else "source"},
                  "nut": {"kind": "router", "host": "nut"},
                  "dst": {"kind": "host", "host": "nut" if one_host else "sink"}},
        # inner MTU 1500 everywhere (the emulated underlay is raised to carry it), so every
        # setup takes 1518-byte frames
        "links": [{"endpoints": ["src", "nut"], "attach": attach, "mtu": 1500},
                  {"endpoints": ["nut", "dst"], "attach": attach, "mtu": 1500}],
    }


def steering(lab: Lab, layout: cores.CoreLayout,
             nut_alone: bool = True) -> list[tuple[str, str, list[int]]]:
    """(namespace, interface, cores) whose receive processing is steered (see the module's
    docstring): what leaves the source host to the chain's core, what enters the sink host to
    the generator's; with ``nut_alone``, the underlay stays with the generator too."""
    plan = lab.plan
    assert plan is not None and plan.underlay is not None
    src = next(h for h in plan.hosts if "src" in h.nodes)
    if src.nodes != ["src"]:  # bridged-if: one host, no underlay
        port = next(e for e in plan.host_links[0].ends if e.node == "src").port
        return [(src.netns, port, layout.chain), (lab.netns("dst"), "eth0", layout.generator)]
    sink = next(h for h in plan.hosts if "dst" in h.nodes)
    nut = next(h for h in plan.hosts if h.name == "nut")
    if nut_alone:
        return [(nut.netns, nut.underlay_if, layout.chain),
                (plan.underlay.netns, nut.underlay_peer, layout.generator)]
    return [(plan.underlay.netns, src.underlay_peer, layout.chain),
            (sink.netns, sink.underlay_if, layout.generator)]


def core_times(core: int) -> dict[str, int]:
    """/proc/stat's times of one core so far (USER_HZ ticks), by name."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    with open("/proc/stat") as f:
        for line in f:
            name, *fields = line.split()
            if name == f"cpu{core}":
                return dict(zip(names, map(int, fields)))
    raise RuntimeError(f"no cpu{core} in /proc/stat")


def busy(before: dict[str, int], after: dict[str, int], seconds: float) -> tuple[float, float]:
    """(kernel busy seconds, user seconds) of a core over ``seconds``: wall time minus idle,
    iowait and user time (idle is exact on a tickless kernel; busy kernel work that ticks
    miss is counted this way, unlike system+irq+softirq ticks)."""
    hz = os.sysconf("SC_CLK_TCK")
    d = {k: (after[k] - before[k]) / hz for k in after}
    user = d["user"] + d["nice"]
    return max(0.0, seconds - d["idle"] - d["iowait"] - user - d["steal"]), user


class Setup:
    """One setup's lab and generator, up for the whole run (trials of every setup alternate)."""

    def __init__(self, stack: contextlib.ExitStack, setup: str, layout: cores.CoreLayout,
                 nut_alone: bool, clock: SoftirqClock):
        self.setup, self.clock = setup, clock
        name = f"bh{secrets.token_hex(2)}{SETUPS.index(setup)}"
        self.lab = stack.enter_context(Lab.from_dict(lab_spec(name, setup)))
        self.steer = steering(self.lab, layout, nut_alone)
        self.chain, self.generator = layout.chain, layout.generator
        self.gen = stack.enter_context(NativeGenerator(
            self.lab.netns("src"), self.lab.netns("dst"), str(self.lab.address("dst")),
            send_cpus=cpus.cpu_list(layout.generator), sink_cpus=cpus.cpu_list(layout.generator)))

    def trial(self, size: int, duration: float) -> dict:
        chain, gen = self.chain[0], self.generator[0]
        with contextlib.ExitStack() as steered:
            for ns, ifname, on in self.steer:
                steered.enter_context(cpus.steered(ns, ifname, on))
            before = rx_packets(self.lab.netns("dst"))
            c0, g0, t0 = core_times(chain), core_times(gen), time.monotonic()
            n0 = self.clock.read()
            t = self.gen.trial(None, duration, size)
            n1 = self.clock.read()
            c1, g1, t1 = core_times(chain), core_times(gen), time.monotonic()
            arrived = rx_packets(self.lab.netns("dst")) - before
        # the sender's measured window (no ramp at the maximum rate: its whole sending time);
        # ``arrived`` also holds what the chain still forwarded in the drain (at most its queues)
        span = t.raw["sender"]["window_s"] or duration
        kbusy, user = busy(c0, c1, t1 - t0)
        gbusy, guser = busy(g0, g1, t1 - t0)
        net = (n1[chain] - n0[chain]) / 1e9  # network softirq seconds on the chain core
        return {"forwarded_pps": arrived / span, "received_pps": t.received_pps,
                "sent_pps": t.sent_pps,
                "us_per_frame": net * 1e6 / arrived if arrived else float("nan"),
                "capacity_pps": arrived / net if net > 0 else float("nan"),
                "busy_us_per_frame": kbusy * 1e6 / arrived if arrived else float("nan"),
                "chain_softirq": net / (t1 - t0),
                "chain_busy": kbusy / (t1 - t0), "chain_user": user / (t1 - t0),
                "generator_busy": (gbusy + guser) / (t1 - t0)}


def summary(runs: dict[str, list[dict]], shared: bool) -> dict:
    """Medians per setup and the goals, on the capacity (nut-alone) or the forwarded rate."""
    def median(key: str) -> dict[str, float]:
        return {k: statistics.median(x[key] for x in v) for k, v in runs.items()}
    out = {k: median(k) for k in ("forwarded_pps", "received_pps", "sent_pps", "us_per_frame",
                                  "capacity_pps", "busy_us_per_frame", "chain_softirq",
                                  "chain_busy", "chain_user", "generator_busy")}
    fig = out["forwarded_pps"] if shared else out["capacity_pps"]
    out["figure"] = "forwarded_pps" if shared else "capacity_pps"
    out["shortbridge_over_bridge"] = fig["shortbridge"] / fig["bridge"]
    out["shortbridge_over_direct"] = fig["shortbridge"] / fig["direct"]
    out["vxlandev_over_bridge"] = fig["shortbridge-vxlandev"] / fig["bridge"]
    out["goals_met"] = (out["shortbridge_over_bridge"] >= 1.5
                        and out["shortbridge_over_direct"] >= 0.9)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per trial")
    ap.add_argument("--sizes", default="64", help="frame sizes, comma-separated (64,1518)")
    ap.add_argument("--shared-core", action="store_true",
                    help="the underlay runs on the chain's core too; the figure is the "
                         "forwarded rate (the earlier layout)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    runs: dict[int, dict[str, list[dict]]] = {s: {k: [] for k in SETUPS} for s in sizes}
    layout = cores.layout()
    nut_alone = not a.shared_core
    with contextlib.ExitStack() as stack:
        clock = stack.enter_context(SoftirqClock())
        setups = {}
        for k in SETUPS:
            print(f"lab for {k} ...", file=sys.stderr, flush=True)
            setups[k] = Setup(stack, k, layout, nut_alone, clock)
        for k in SETUPS:  # warm-up: ARP, caches
            setups[k].trial(64, 0.3)
        for rep in range(a.reps):
            order = SETUPS if rep % 2 == 0 else tuple(reversed(SETUPS))
            for size in sizes:
                for setup in order:
                    r = setups[setup].trial(size, a.duration)
                    runs[size][setup].append(r)
                    print(f"rep {rep} {size:>4} B {setup:21}: {r['forwarded_pps']:>10,.0f} pps "
                          f"forwarded, {r['sent_pps']:>10,.0f} sent, chain core "
                          f"{r['chain_softirq']:4.0%} in network softirqs "
                          f"({r['us_per_frame']:.2f} us/frame: capacity "
                          f"{r['capacity_pps']:,.0f} pps), {r['chain_busy']:4.0%} kernel-busy, "
                          f"generator core "
                          f"{r['generator_busy']:4.0%}"
                          + (f", OTHERS' USER TIME on the chain core {r['chain_user']:.0%}"
                             if r["chain_user"] > 0.02 else ""),
                          file=sys.stderr, flush=True)
        steered = {k: [f"{ns}/{i} -> {on}" for ns, i, on in v.steer] for k, v in setups.items()}
    out: dict = {"cores": {**layout.to_dict(), "steered": steered},
                 "layout": "shared-core" if a.shared_core else "nut-alone",
                 "reps": a.reps, "duration_s": a.duration,
                 "sizes": {size: summary(runs[size], a.shared_core) for size in sizes}}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    if a.shared_core:
        print(f"cores: underlay and node-under-test host {layout.chain}; generator, source "
              f"host, sink host and sink program {layout.generator}; figure: forwarded rate")
    else:
        print(f"cores: node-under-test host alone {layout.chain}; generator, source host, "
              f"underlay, sink host and sink program {layout.generator}; figure: the "
              f"node-under-test host's capacity (forwarded frames per second of its core's network "
              f"softirq time)")
    for size, d in out["sizes"].items():
        print(f"\n{size}-byte frames, median of {a.reps}")
        print(f"{'setup':21} {'forwarded pps':>14} {'sent pps':>11} {'net softirq':>11} "
              f"{'us/frame':>9} {'capacity pps':>13} {'busy us/frame':>14}")
        for k in SETUPS:
            print(f"{k:21} {d['forwarded_pps'][k]:>14,.0f} {d['sent_pps'][k]:>11,.0f} "
                  f"{d['chain_softirq'][k]:>11.0%} {d['us_per_frame'][k]:>9.2f} "
                  f"{d['capacity_pps'][k]:>13,.0f} {d['busy_us_per_frame'][k]:>14.2f}")
        print(f"on {d['figure']}: shortbridge / bridge = {d['shortbridge_over_bridge']:.2f} "
              f"(goal >= 1.5), shortbridge / direct = {d['shortbridge_over_direct']:.2f} "
              f"(goal >= 0.90): {'met' if d['goals_met'] else 'NOT met'}; "
              f"shortbridge-vxlandev / bridge = {d['vxlandev_over_bridge']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
