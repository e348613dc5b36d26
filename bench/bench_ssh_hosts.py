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

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from bench.ssh_rounds import side_by_side  # noqa: E402
from tests.integration.test_ssh_hosts import three_hosts  # noqa: E402  (the tests' lab)


def one_round(how: str, name: str, machines: Any, tmp: Path) -> list[float]:
    """The lab up, then down."""
    from sfclab.realize import lifecycle
    from sfclab.realize.kinds import load_lab_dict

    t0 = time.monotonic()
    lifecycle.up(load_lab_dict(three_hosts(name, machines)))
    t1 = time.monotonic()
    lifecycle.down(name)
    return [t1 - t0, time.monotonic() - t1]


def main() -> int:
    return side_by_side(__doc__ or "", 5, "sfclab-bench-ssh-", ("up", "down"), 12, one_round)


if __name__ == "__main__":
    sys.exit(main())
