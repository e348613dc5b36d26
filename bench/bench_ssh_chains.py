#!/usr/bin/env python3
"""What a lab file's chain costs on hosts driven over SSH, against the same lab on emulated
hosts driven directly (side by side, alternating rounds): ``up``, ``chain inspect``, ``chain
trace``, ``chain add`` and ``chain rm`` of a one-firewall chain (placed on h1, beside its attach
node r1) and ``down``.

Run as root:  .venv/bin/python bench/bench_ssh_chains.py [--reps 3]

The machines are the tests' (tests/integration/sshd.py); the lab is the tests' chain of two
firewalls over three hosts (tests/integration/test_ssh_chains.py).  Over SSH every host's
agent builds its share of the data plane at ``up``; ``inspect`` is one round of one connection
per host (all hosts at once); ``trace`` is, per label, one probe at the ingress's host and one
round of counter reads; ``chain add`` is three rounds of one connection per host, one after
the other (make, tables, classifiers), ``chain rm`` one.  Printed: the median of each over the
rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from bench.timings import report_medians  # noqa: E402
from tests.integration.sshd import ssh_machines  # noqa: E402  (the tests' sshd hosts)
from tests.integration.test_ssh_chains import chain_lab  # noqa: E402  (the tests' lab)

STEPS = ("up", "inspect", "trace", "chain add", "chain rm", "down")
CHAIN = {"name": "more", "attach": "r1", "egress": "dst",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5002}],
         "functions": [{"name": "fw", "kind": "firewall", "rules": []}]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sfclab-bench-sshchain-"))
    os.environ["SFCLAB_STATE_DIR"] = str(tmp / "state")
    from sfclab.realize import lifecycle
    from sfclab.realize.kinds import load_lab_dict
    from sfclab.steer import add, chains, request

    tag = os.urandom(3).hex()
    times: dict[str, list[float]] = {f"{h} {s}": [] for h in ("direct", "ssh") for s in STEPS}
    with ssh_machines(f"m{tag}", tmp) as ms:
        for r in range(a.reps):
            order = [("direct", f"d{tag}", None), ("ssh", f"s{tag}", ms)]
            for how, name, machines in order if r % 2 == 0 else order[::-1]:
                t = [time.monotonic()]
                lifecycle.up(load_lab_dict(chain_lab(name, machines)))
                t.append(time.monotonic())
                try:
                    chains.inspect(name, "web")
                    t.append(time.monotonic())
                    tr = chains.trace(name, "web")
                    t.append(time.monotonic())
                    if not (tr["in_order"] and tr["delivered"]):
                        raise SystemExit(f"{how}: trace not in order or not delivered: {tr}")
                    cf = tmp / "chain.json"
                    cf.write_text(json.dumps(CHAIN))
                    d = add.add_chain(request.read_chain_file(name, str(cf)))
                    t.append(time.monotonic())
                    if [i["host"] for i in d["instances"].values()] != ["h1"]:
                        raise SystemExit(f"{how}: the instance is not on h1: {d}")
                    add.remove_chain(request.RemoveChain(name, "more"))
                    t.append(time.monotonic())
                finally:
                    lifecycle.down(name)
                t.append(time.monotonic())
                for s, (t0, t1) in zip(STEPS, zip(t, t[1:])):
                    times[f"{how} {s}"].append(t1 - t0)
            print(f"round {r + 1}/{a.reps}", file=sys.stderr)
    report_medians(times, a.reps, a.json, 16)
    return 0


if __name__ == "__main__":
    sys.exit(main())
