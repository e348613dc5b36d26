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

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from bench.ssh_rounds import side_by_side  # noqa: E402
from tests.integration.test_ssh_chains import chain_lab  # noqa: E402  (the tests' lab)

STEPS = ("up", "inspect", "trace", "chain add", "chain rm", "down")
CHAIN = {"name": "more", "attach": "r1", "egress": "dst",
         "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5002}],
         "functions": [{"name": "fw", "kind": "firewall", "rules": []}]}


def one_round(how: str, name: str, machines: Any, tmp: Path) -> list[float]:
    """The lab up, its chain inspected and traced, a chain added and removed, down."""
    from sfclab.realize import lifecycle
    from sfclab.realize.kinds import load_lab_dict
    from sfclab.live.ops import add, chains
    from sfclab.live import request

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
    return [t1 - t0 for t0, t1 in zip(t, t[1:])]


def main() -> int:
    return side_by_side(__doc__ or "", 3, "sfclab-bench-sshchain-", STEPS, 16, one_round)


if __name__ == "__main__":
    sys.exit(main())
