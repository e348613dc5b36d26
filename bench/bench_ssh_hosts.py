#!/usr/bin/env python3
"""How long ``up`` and ``down`` take when the hosts are driven over SSH, against the same lab
on emulated hosts driven directly (side by side, alternating rounds).

Run as root:  .venv/bin/python bench/bench_ssh_hosts.py [--reps 5]

The machines are the tests' (tests/integration/sshd.py): three emulated hosts running Debian's
``sshd`` in their contexts, reached from a fourth host's context on the underlay; the lab is
the tests' three-host lab (five nodes, a shaped bridged tunnel, a shortbridged one, a direct one
and a plain veth).  Over SSH, ``up`` checks every host (one connection each, in parallel), then
sends each its part (another connection each, in parallel); each connection starts the agent, a
Python process on that host.  Printed: the median of each over the rounds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from bench.timings import report_medians  # noqa: E402
from tests.integration.sshd import ssh_machines  # noqa: E402  (the tests' sshd hosts)
from tests.integration.test_ssh_hosts import three_hosts  # noqa: E402  (the tests' lab)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sfclab-bench-ssh-"))
    os.environ["SFCLAB_STATE_DIR"] = str(tmp / "state")
    from sfclab.realize import lifecycle
    from sfclab.realize.kinds import load_lab_dict

    tag = os.urandom(3).hex()
    times: dict[str, list[float]] = {k: [] for k in ("direct up", "direct down", "ssh up",
                                                    "ssh down")}
    with ssh_machines(f"m{tag}", tmp) as ms:
        for r in range(a.reps):
            order = [("direct", f"d{tag}", None), ("ssh", f"s{tag}", ms)]
            for how, name, machines in order if r % 2 == 0 else order[::-1]:
                t0 = time.monotonic()
                lifecycle.up(load_lab_dict(three_hosts(name, machines)))
                t1 = time.monotonic()
                lifecycle.down(name)
                t2 = time.monotonic()
                times[f"{how} up"].append(t1 - t0)
                times[f"{how} down"].append(t2 - t1)
            print(f"round {r + 1}/{a.reps}", file=sys.stderr)
    report_medians(times, a.reps, a.json, 12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
