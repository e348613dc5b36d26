#!/usr/bin/env python3
"""Trellis's Figure 3 on emulated hosts: the peak forwarding rate of a node under test (a
router) between a source host and a sink host, for each way a virtual link meets the node,
side by side in one run: the four labs are up together and their trials alternate (the order
reversed every other round), so a load that drifts over the run hits every setup alike.

Run as root:  .venv/bin/python bench/bench_hosts.py [--reps 3] [--duration 2] [--sizes 64,1518]

Setups (nodes: src on host "source", nut on host "nut", dst on host "sink"):
  bridged-if   no tunnel: src, nut and dst share one host, each link a Linux bridge in its
               context (the node bridged to physical-like interfaces)
  bridge       VXLAN tunnels joined to the nodes' veths by Linux bridges in the host contexts
  direct       VXLAN tunnels terminated directly in the nodes (the device in the node)
  shortbridge  VXLAN tunnels joined to the nodes' veths by the shortbridge (tc redirect)
The generator is the native one (sfcgen, sfclab.traffic.native) at its maximum rate.  Trellis
had three machines and measured the node-under-test machine; two cores cannot give each host
one, so the node-under-test host gets a core with the underlay, and the generator, the source
host's work (its context: port, shortbridge or bridge, encapsulation), the sink host's and the
sink program share the other.  The generator and the sink program are pinned, and receive
processing is steered (RPS) where frames leave the source host (the underlay's end toward it)
to the node-under-test core, and where they enter the sink host (its underlay interface) back
to the generator's; bridged-if has one host and no underlay: its port toward the source goes to
the node-under-test core, the sink node's interface to the generator's.  With --nut-alone the
underlay goes to the generator's core as well (steered where frames enter and leave the
node-under-test host), so the chain's core does that host's work alone: the rates are then the
generator core's, and the kernel time per frame is the node-under-test host's own cost.
The figure is the forwarding rate: frames per second that reached the sink node's interface
(rx_packets of dst/eth0 over the sender's time); the sink program's own count is shown too.
On a machine others load, rates swing by tens of percent; the kernel time the chain's core spent
per forwarded frame (system + irq + softirq ticks of /proc/stat over the trial, per frame) is
shown too: it counts others' kernel work on that core as well, but not their user time.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.api import Lab  # noqa: E402
from sfclab.kernel import cpus, netns  # noqa: E402
from sfclab.traffic import cores  # noqa: E402
from sfclab.traffic.native import NativeGenerator  # noqa: E402

SETUPS = ("bridged-if", "bridge", "direct", "shortbridge")


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
             nut_alone: bool) -> list[tuple[str, str, list[int]]]:
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


def kernel_ticks(cores: list[int]) -> int:
    """Kernel time (system, irq and softirq, in USER_HZ ticks) of ``cores`` so far."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
                total += int(fields[2]) + int(fields[5]) + int(fields[6])
    return total


def rx_packets(ns: str) -> int:
    """Frames the sink's interface took in (/proc/net/dev, read inside the namespace)."""
    for line in netns.run(ns, ["cat", "/proc/net/dev"]).stdout.splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "eth0":
            return int(counters.split()[1])
    raise RuntimeError(f"no eth0 in {ns}")


class Setup:
    """One setup's lab and generator, up for the whole run (trials of every setup alternate)."""

    def __init__(self, stack: contextlib.ExitStack, setup: str, layout: cores.CoreLayout,
                 nut_alone: bool):
        self.setup = setup
        name = f"bh{secrets.token_hex(2)}{SETUPS.index(setup)}"
        self.lab = stack.enter_context(Lab.from_dict(lab_spec(name, setup)))
        self.steer = steering(self.lab, layout, nut_alone)
        self.chain = layout.chain
        self.gen = stack.enter_context(NativeGenerator(
            self.lab.netns("src"), self.lab.netns("dst"), str(self.lab.address("dst")),
            send_cpus=cpus.cpu_list(layout.generator), sink_cpus=cpus.cpu_list(layout.generator)))

    def trial(self, size: int, duration: float) -> dict:
        with contextlib.ExitStack() as steered:
            for ns, ifname, on in self.steer:
                steered.enter_context(cpus.steered(ns, ifname, on))
            before = rx_packets(self.lab.netns("dst"))
            ticks = kernel_ticks(self.chain)
            t = self.gen.trial(None, duration, size)
            ticks = kernel_ticks(self.chain) - ticks
            arrived = rx_packets(self.lab.netns("dst")) - before
        # the sender's measured window (no ramp at the maximum rate: its whole sending time);
        # ``arrived`` also holds what the chain still forwarded in the drain (at most its queues)
        span = t.raw["sender"]["window_s"] or duration
        hz = os.sysconf("SC_CLK_TCK")
        return {"forwarded_pps": arrived / span, "received_pps": t.received_pps,
                "sent_pps": t.sent_pps,
                "us_per_frame": ticks / hz * 1e6 / arrived if arrived else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per trial")
    ap.add_argument("--sizes", default="64", help="frame sizes, comma-separated (64,1518)")
    ap.add_argument("--nut-alone", action="store_true",
                    help="the chain's core does the node-under-test host's work only (the "
                         "underlay joins the generator's core, which then limits the rates: "
                         "read the kernel time per frame)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    runs: dict[int, dict[str, list[dict]]] = {s: {k: [] for k in SETUPS} for s in sizes}
    layout = cores.layout()
    with contextlib.ExitStack() as stack:
        setups = {k: Setup(stack, k, layout, a.nut_alone) for k in SETUPS}
        for k in SETUPS:  # warm-up: ARP, caches
            setups[k].trial(64, 0.3)
        for rep in range(a.reps):
            order = SETUPS if rep % 2 == 0 else tuple(reversed(SETUPS))
            for size in sizes:
                for setup in order:
                    r = setups[setup].trial(size, a.duration)
                    runs[size][setup].append(r)
                    print(f"rep {rep} {size:>4} B {setup:12}: {r['forwarded_pps']:>10,.0f} pps "
                          f"forwarded, {r['received_pps']:,.0f} read by the sink, "
                          f"{r['sent_pps']:,.0f} sent", file=sys.stderr, flush=True)
        steered = {k: [f"{ns}/{i} -> {on}" for ns, i, on in v.steer] for k, v in setups.items()}
    out: dict = {"cores": {**layout.to_dict(), "steered": steered}, "sizes": {}}
    for size in sizes:
        def median(key: str, size: int = size) -> dict[str, float]:
            return {k: statistics.median(x[key] for x in v) for k, v in runs[size].items()}
        med = median("forwarded_pps")
        cost = median("us_per_frame")
        out["sizes"][size] = {
            "forwarded_pps": med, "sink_read_pps": median("received_pps"),
            "sent_pps": median("sent_pps"), "us_per_frame": cost,
            "cost_bridge_over_shortbridge": cost["bridge"] / cost["shortbridge"],
            "cost_direct_over_shortbridge": cost["direct"] / cost["shortbridge"],
            "shortbridge_over_bridge": med["shortbridge"] / med["bridge"],
            "shortbridge_over_direct": med["shortbridge"] / med["direct"],
            "goals_met": med["shortbridge"] >= 1.5 * med["bridge"]
            and med["shortbridge"] >= 0.9 * med["direct"]}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    if a.nut_alone:
        print(f"cores: node-under-test host {layout.chain}; generator, source host, underlay, "
              f"sink host and sink program {layout.generator}")
    else:
        print(f"cores: underlay and node-under-test host {layout.chain}; generator, source "
              f"host, sink host and sink program {layout.generator}")
    for size, d in out["sizes"].items():
        print(f"\n{size}-byte frames, median of {a.reps}")
        print(f"{'setup':13} {'forwarded pps':>14} {'sink read pps':>14} {'sent pps':>12} "
              f"{'chain-core us/frame':>20}")
        for k in SETUPS:
            print(f"{k:13} {d['forwarded_pps'][k]:>14,.0f} {d['sink_read_pps'][k]:>14,.0f} "
                  f"{d['sent_pps'][k]:>12,.0f} {d['us_per_frame'][k]:>20.2f}")
        print(f"shortbridge / bridge = {d['shortbridge_over_bridge']:.2f} (goal >= 1.5), "
              f"shortbridge / direct = {d['shortbridge_over_direct']:.2f} (goal >= 0.90): "
              f"{'met' if d['goals_met'] else 'NOT met'}")
        print(f"kernel time per frame on the chain's core (less sensitive to other load): "
              f"bridge / shortbridge = {d['cost_bridge_over_shortbridge']:.2f}, "
              f"direct / shortbridge = {d['cost_direct_over_shortbridge']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
