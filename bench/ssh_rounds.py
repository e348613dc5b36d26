"""The SSH benches' common frame: a lab on the tests' SSH machines against the same lab on
emulated hosts driven directly, side by side in alternating rounds, each round's steps timed,
the medians printed (:func:`bench.timings.report_medians`).

:func:`side_by_side` parses ``--reps`` and ``--json``, gives the run a state directory of its
own (``SFCLAB_STATE_DIR``, set before sfclab's lab code is imported), starts the machines
(``tests/integration/sshd.py``) and calls ``one_round(how, name, machines, tmp)`` for
``direct`` (``machines`` None) and ``ssh`` in turn, the order swapped every other round; the
round returns the seconds of each of ``steps`` in order.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests/

from bench.timings import report_medians  # noqa: E402
from tests.integration.sshd import ssh_machines  # noqa: E402  (the tests' sshd hosts)

#: a round: (how, lab name, the SSH machines or None, the run's directory) -> seconds per step
Round = Callable[[str, str, Any, Path], Sequence[float]]


def side_by_side(doc: str, reps: int, prefix: str, steps: Sequence[str], width: int,
                 one_round: Round) -> int:
    """Run ``one_round`` for direct and ssh, ``--reps`` rounds; print the medians of
    ``steps`` (``width``: the name column).  ``doc``: the bench's docstring (its first line
    is the description in ``--help``)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["SFCLAB_STATE_DIR"] = str(tmp / "state")
    tag = os.urandom(3).hex()
    times: dict[str, list[float]] = {f"{h} {s}": [] for h in ("direct", "ssh") for s in steps}
    with ssh_machines(f"m{tag}", tmp) as ms:
        for r in range(a.reps):
            order = [("direct", f"d{tag}", None), ("ssh", f"s{tag}", ms)]
            for how, name, machines in order if r % 2 == 0 else order[::-1]:
                took = one_round(how, name, machines, tmp)
                for s, dt in zip(steps, took, strict=True):
                    times[f"{how} {s}"].append(dt)
            print(f"round {r + 1}/{a.reps}", file=sys.stderr)
    report_medians(times, a.reps, a.json, width)
    return 0
