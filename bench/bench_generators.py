#!/usr/bin/env python3
"""Packet rate of sfcgen vs iperf3 vs trafgen, 64-byte frames, over one veth between two namespaces.

Run as root:  .venv/bin/python bench/bench_generators.py [--reps 5] [--duration 2] [--json]

Each repetition runs every generator once, in an order that alternates between repetitions;
the table shows medians.  Two counts per run:
  wire       packets the receiving interface took in (rx_packets of the receiver's eth0)
  delivered  packets the receiving program read: the sfcgen sink for sfcgen and trafgen (trafgen's
             frames go to the sink's port, so both pay the same receive path), the iperf3 server's
             datagram count for iperf3.
Pinning: senders on CPU 0 (and 1 with two threads), the sfcgen sink / iperf3 server on CPU 1.
The "xdp" rows use sfcgen's eBPF halves: the live-frames engine (BPF_PROG_RUN, --engine xdp)
and/or the XDP sink (an XDP program on the receiver's eth0 counts and drops the probes); their
sink is made for the row and removed after it, so no other row runs with an XDP program attached.
trafgen runs with --no-sock-mem --notouch-irq (it must not touch host socket memory sysctls or IRQ affinity) and, as
by default, bypasses the qdisc; sfcgen is shown on the qdisc path (its default) and with
--qdisc-bypass.  Namespaces are named sfcb-gen-<random>-{s,d} and always deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.api import Lab  # noqa: E402
from sfclab.kernel import netns  # noqa: E402
from sfclab.traffic import native  # noqa: E402

SRC_IP, DST_IP = "198.18.0.1", "198.18.0.2"
SINK_PORT, IPERF_PORT = 7200, 7201


def rx_packets(ns: str) -> int:
    """rx_packets of eth0 in ns (/proc/net/dev follows the reader's namespace; /sys would not)."""
    for line in netns.run(ns, ["cat", "/proc/net/dev"]).stdout.splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "eth0":
            return int(counters.split()[1])
    raise RuntimeError(f"no eth0 in {ns}")


class Bench:
    def __init__(self, src: str, dst: str, duration: float, binary: str):
        self.src, self.dst, self.duration, self.binary = src, dst, duration, binary
        # one sink for sfcgen and trafgen runs, pinned to CPU 1
        self.gen = native.NativeGenerator(src, dst, DST_IP, flows=2, port=SINK_PORT,
                                          sink_threads=1, sink_cpus="1", binary=binary)
        with netns.iproute(dst) as ipr:
            mac = ipr.get_links(ifname="eth0")[0].get_attr("IFLA_ADDRESS")
        self.conf = tempfile.NamedTemporaryFile("w", suffix=".cfg", prefix="sfcb-trafgen-")
        self.conf.write(f"{{ eth(da={mac}, type=0x0800), ipv4(saddr={SRC_IP}, daddr={DST_IP}, "
                        f"ttl=64, df), udp(sp=10000, dp={SINK_PORT}), fill(0x00, 18) }}\n")
        self.conf.flush()

    def close(self) -> None:
        self.gen.close()
        self.conf.close()

    def sfcgen(self, threads: int, bypass: bool) -> dict:
        self.gen.threads = threads
        self.gen.flows = 2
        self.gen.qdisc_bypass = bypass
        self.gen.send_cpus = "0" if threads == 1 else "0-1"
        before = rx_packets(self.dst)
        t = self.gen.trial(None, self.duration, 64)
        wire = rx_packets(self.dst) - before
        dur = t.raw["sender"]["window_s"]  # the measured window (= sending: no ramp at max)
        return {"sent_pps": t.sent_pps, "wire_pps": wire / dur, "delivered_pps": t.received / dur,
                "socket_drops": t.raw["sink"]["socket_drops"]}

    def sfcgen_xdp(self, threads: int, engine: str, sink: str) -> dict:
        """One row with its own sink (the XDP program must not stay on eth0 for other rows)."""
        gen = native.NativeGenerator(self.src, self.dst, DST_IP, flows=2, threads=threads,
                                     port=SINK_PORT + 10, sink_threads=1, sink_cpus="1",
                                     binary=self.binary, engine=engine, sink=sink,
                                     send_cpus="0" if threads == 1 else "0-1")
        try:
            before = rx_packets(self.dst)
            t = gen.trial(None, self.duration, 64)
            wire = rx_packets(self.dst) - before
        finally:
            gen.close()
        dur = t.raw["sender"]["window_s"]  # the measured window (= sending: no ramp at max)
        return {"sent_pps": t.sent_pps, "wire_pps": wire / dur, "delivered_pps": t.received / dur,
                "local_drops": t.raw["sender"]["local_drops"]}

    def trafgen(self, cpus: int) -> dict:
        self.gen.snapshot()  # zero the sink
        before = rx_packets(self.dst)
        argv = ["trafgen", "--dev", "eth0", "--conf", self.conf.name, "--cpus", str(cpus),
                "--no-sock-mem", "--notouch-irq", "-C"]
        # its own process group: trafgen's workers stop on SIGINT to the group, not to the parent
        p = netns.popen(self.src, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True, start_new_session=True)
        t0 = time.monotonic()
        try:
            time.sleep(self.duration)
            os.killpg(p.pid, signal.SIGINT)
            _, err = p.communicate(timeout=10)
        finally:
            if p.poll() is None:
                netns.end_processes([p.pid, *netns.pids_in([self.src])])
                p.wait()
        dur = time.monotonic() - t0
        time.sleep(self.gen.drain_s)
        wire = rx_packets(self.dst) - before
        snap = self.gen.snapshot()
        if p.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"trafgen exited with {p.returncode}: {err.strip()}")
        return {"wire_pps": wire / dur, "delivered_pps": snap["invalid"] / dur,
                "socket_drops": snap["socket_drops"]}

    def iperf3(self) -> dict:
        server = netns.popen(self.dst, ["iperf3", "-s", "-1", "-p", str(IPERF_PORT), "-A", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            before = rx_packets(self.dst)
            cp = netns.run(self.src, ["iperf3", "-c", DST_IP, "-p", str(IPERF_PORT), "-u",
                                      "-l", "18", "-b", "0", "-t", f"{self.duration:g}",
                                      "-A", "0", "-J"], timeout=self.duration + 30)
            time.sleep(0.2)
            wire = rx_packets(self.dst) - before
        finally:
            if server.poll() is None:
                netns.end_processes([server.pid])
            server.wait()
        s = json.loads(cp.stdout)["end"]["sum"]
        received = s["packets"] - s["lost_packets"]
        return {"sent_pps": s["packets"] / s["seconds"], "wire_pps": wire / s["seconds"],
                "delivered_pps": received / s["seconds"]}


CASES = {
    "sfcgen 1 thread": lambda b: b.sfcgen(1, False),
    "sfcgen 1 thread, qdisc bypass": lambda b: b.sfcgen(1, True),
    "sfcgen 2 threads": lambda b: b.sfcgen(2, False),
    "sfcgen 2 threads, qdisc bypass": lambda b: b.sfcgen(2, True),
    "sfcgen packet 2 threads, xdp sink": lambda b: b.sfcgen_xdp(2, "packet", "xdp"),
    "sfcgen xdp 1 thread, socket sink": lambda b: b.sfcgen_xdp(1, "xdp", "socket"),
    "sfcgen xdp 1 thread, xdp sink": lambda b: b.sfcgen_xdp(1, "xdp", "xdp"),
    "sfcgen xdp 2 threads, xdp sink": lambda b: b.sfcgen_xdp(2, "xdp", "xdp"),
    "iperf3 -u -l 18 -b 0": lambda b: b.iperf3(),
    "trafgen --cpus 1": lambda b: b.trafgen(1),
    "trafgen --cpus 2": lambda b: b.trafgen(2),
}


IPERF, TRAFGEN1, TRAFGEN2 = "iperf3 -u -l 18 -b 0", "trafgen --cpus 1", "trafgen --cpus 2"
#: label -> (numerator row, denominator row)
RATIOS = {
    "sfcgen 1 thread / iperf3": ("sfcgen 1 thread", IPERF),
    "sfcgen 2 threads / iperf3": ("sfcgen 2 threads", IPERF),
    "sfcgen 1 thread / trafgen 1 cpu": ("sfcgen 1 thread", TRAFGEN1),
    "sfcgen 2 threads / trafgen 2 cpus": ("sfcgen 2 threads", TRAFGEN2),
    "sfcgen 1 thread bypass / trafgen 1 cpu": ("sfcgen 1 thread, qdisc bypass", TRAFGEN1),
    "sfcgen 2 threads bypass / trafgen 2 cpus": ("sfcgen 2 threads, qdisc bypass", TRAFGEN2),
    "sfcgen xdp 1 thread, xdp sink / iperf3": ("sfcgen xdp 1 thread, xdp sink", IPERF),
    "sfcgen xdp 1 thread, xdp sink / trafgen 2 cpus": ("sfcgen xdp 1 thread, xdp sink", TRAFGEN2),
    "sfcgen xdp 2 threads, xdp sink / iperf3": ("sfcgen xdp 2 threads, xdp sink", IPERF),
    "sfcgen xdp 2 threads, xdp sink / trafgen 2 cpus":
        ("sfcgen xdp 2 threads, xdp sink", TRAFGEN2),
    "sfcgen xdp 1 thread, socket sink / iperf3": ("sfcgen xdp 1 thread, socket sink", IPERF),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = ap.parse_args()
    if args.duration < 1:
        ap.error("--duration must be at least 1 s (iperf3 -t takes whole seconds)")
    if os.geteuid() != 0:
        print("bench_generators: needs root", file=sys.stderr)
        return 2
    binary = native.sfcgen_binary()
    lab = Lab.from_dict({"name": f"bgen{secrets.token_hex(3)}", "chain": {"length": 2}}).up()
    src, dst = lab.netns("src"), lab.netns("dst")
    runs: dict[str, list[dict]] = {name: [] for name in CASES}
    bench = None
    try:
        bench = Bench(src, dst, args.duration, binary)
        names = list(CASES)
        for rep in range(args.reps):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                r = CASES[name](bench)
                runs[name].append(r)
                if not args.json:
                    print(f"  rep {rep + 1}/{args.reps} {name:32s} "
                          f"wire {r['wire_pps'] / 1e3:8.1f} kpps  "
                          f"delivered {r['delivered_pps'] / 1e3:8.1f} kpps", file=sys.stderr)
                time.sleep(0.3)
    finally:
        if bench:
            bench.close()
        lab.down()  # ends whatever still runs in its namespaces

    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wire_pps", "delivered_pps")}
           for name, rs in runs.items()}

    def ratio(a: str, b: str, k: str) -> float:
        return med[a][k] / med[b][k] if med[b][k] else float("nan")

    ratios = {k: {label: ratio(a, b, k) for label, (a, b) in RATIOS.items()}
              for k in ("wire_pps", "delivered_pps")}
    result = {"frame_bytes": 64, "duration_s": args.duration, "reps": args.reps,
              "load_avg": os.getloadavg(), "median": med, "ratios": ratios, "runs": runs}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"\n64-byte frames over one veth, medians of {args.reps} alternating runs "
          f"of {args.duration:g} s (load average at end {os.getloadavg()[0]:.2f})")
    print(f"{'generator':38s} {'wire kpps':>10s} {'delivered kpps':>15s}")
    for name, m in med.items():
        print(f"{name:38s} {m['wire_pps'] / 1e3:10.1f} {m['delivered_pps'] / 1e3:15.1f}")
    print(f"\n{'ratio':50s} {'wire':>6s} {'delivered':>10s}")
    for k in ratios["wire_pps"]:
        print(f"{k:50s} {ratios['wire_pps'][k]:6.2f} {ratios['delivered_pps'][k]:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
