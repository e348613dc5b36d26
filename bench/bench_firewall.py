"""Firewall benchmarks: rule install time and UDP packet rate through one firewall.

1. Install time of N generated stateless rules (N = 1,000 / 10,000 / 40,000) in one batch,
   iptables (legacy, ``iptables-legacy-restore``) against nftables (``nft -f``), each in a fresh
   namespace; bar: 40,000 rules in at most 3 s.
2. Packet rate of 64-byte UDP (iperf3 ``-u -b 0 -l 64``) from ``src`` through ``fw`` to
   ``dst`` with N = 0 / 100 / 1,000 / 10,000 never-matching rules: an iptables list, an nftables
   list and an nftables set, side by side and interleaved in one run; the rate is read from
   ``dst``'s interface counter over a window inside the send.  Bar: the nftables set at 10,000
   entries keeps at least 90 % of the 0-rule rate.

Medians over ``--reps`` runs.  Run as root from the repository:

    .venv/bin/python bench/bench_firewall.py [--reps 5] [--seconds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from tests.integration.chains import chain  # noqa: E402  (the three-node lab of the tests)

from sfclab.functions.base import FunctionContext  # noqa: E402
from sfclab.functions.firewall import Firewall, FirewallParams  # noqa: E402
from sfclab.kernel import netns  # noqa: E402

INSTALL_SIZES = [1000, 10000, 40000]
RATE_SIZES = [0, 100, 1000, 10000]


def _params(variant: str, n: int) -> dict:
    gen = {"count": n, "type": "stateless"}
    if variant == "iptables":
        return {"backend": "iptables", "iptables": "legacy", "generate": gen}
    if variant == "nftables-set":
        return {"backend": "nftables", "generate": gen, "set": True}
    return {"backend": "nftables", "generate": gen}


def install_time(variant: str, n: int, state: Path) -> float:
    name = "sfct-fnb-" + secrets.token_hex(3)
    netns.create(name).close()
    try:
        ctx = FunctionContext(lab=name, node="fw", netns=name, interfaces=[], state_dir=state)
        fw = Firewall(ctx, FirewallParams.model_validate(_params(variant, n)))
        fw.configure()
        return fw.install_seconds
    finally:
        netns.delete(name)


def _rx_packets(lab, node: str) -> int:
    out = lab.exec(node, ["ip", "-s", "-j", "link", "show", "dev", "eth0"]).stdout
    return json.loads(out)[0]["stats64"]["rx"]["packets"]


def packet_rate(variant: str, n: int, seconds: float, state: Path) -> float:
    with chain("firewall", _params(variant, n), state) as lab:
        srv = lab.popen("dst", ["iperf3", "-s", "-1", "-p", "5201"])
        time.sleep(0.3)
        cli = lab.popen("src", ["iperf3", "-c", str(lab.address("dst")), "-p", "5201", "-u",
                                "-b", "0", "-l", "64", "-t", str(seconds)])
        time.sleep(0.3 + seconds * 0.2)
        t0, p0 = time.monotonic(), _rx_packets(lab, "dst")
        time.sleep(seconds * 0.5)
        t1, p1 = time.monotonic(), _rx_packets(lab, "dst")
        cli.communicate(timeout=seconds + 30)
        srv.communicate(timeout=10)
        if cli.returncode != 0:
            raise RuntimeError(f"iperf3 client failed: {cli.stderr}")
        return (p1 - p0) / (t1 - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip-install", action="store_true")
    ap.add_argument("--skip-rate", action="store_true")
    a = ap.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="sfclab-bench-"))
    result: dict = {"reps": a.reps, "install_s": {}, "rate_pps": {}}
    ok = True

    if not a.skip_install:
        runs: dict = {}
        for _ in range(a.reps):
            for n in INSTALL_SIZES:
                for v in ("iptables", "nftables"):
                    runs.setdefault((v, n), []).append(install_time(v, n, state))
        print("install time, median of %d (s)" % a.reps)
        print(f"{'rules':>8} {'iptables-legacy':>16} {'nftables':>10}")
        for n in INSTALL_SIZES:
            row = {v: statistics.median(runs[(v, n)]) for v in ("iptables", "nftables")}
            result["install_s"][n] = row
            print(f"{n:>8} {row['iptables']:>16.3f} {row['nftables']:>10.3f}")
        worst = max(result["install_s"][40000].values())
        ok &= worst <= 3.0
        print(f"bar: 40,000 rules in <= 3 s: {'PASS' if worst <= 3.0 else 'FAIL'} "
              f"(slowest {worst:.3f} s)\n")

    if not a.skip_rate:
        variants = ("iptables", "nftables", "nftables-set")
        runs = {}
        for _ in range(a.reps):
            for n in RATE_SIZES:
                for v in variants:
                    runs.setdefault((v, n), []).append(packet_rate(v, n, a.seconds, state))
        print("64-byte UDP through the firewall, median of %d (kpps)" % a.reps)
        print(f"{'rules':>8} " + " ".join(f"{v:>14}" for v in variants))
        for n in RATE_SIZES:
            row = {v: statistics.median(runs[(v, n)]) for v in variants}
            result["rate_pps"][n] = row
            print(f"{n:>8} " + " ".join(f"{row[v] / 1e3:>14.1f}" for v in variants))
        base = result["rate_pps"][0]["nftables-set"]
        keep = result["rate_pps"][10000]["nftables-set"] / base
        ok &= keep >= 0.9
        print(f"bar: nftables set at 10,000 keeps >= 90 % of the 0-rule rate: "
              f"{'PASS' if keep >= 0.9 else 'FAIL'} ({keep:.1%})")
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
