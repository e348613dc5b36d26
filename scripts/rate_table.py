#!/usr/bin/env python3
"""Offered-vs-received tables from a results database: for every series (a run's parameters
without the repetition), the mean received rate at each offered rate over the repetitions, in
kpps, with the repetitions' range when they differ.  With PAIR (e.g. ``vm1``) the figures are
that sender's own (rate curves of several pairs, one per tenant; a one-pair run of that sender
counts whole).  The cells are computed as docs/reproduction.md's ``rates`` blocks compute them
(sfclab.experiments.pagetables), which scripts/reproduce.sh rewrites.

    .venv/bin/python scripts/rate_table.py /tmp/repro/openstack-shared.db [vm1]
"""

from __future__ import annotations

import collections
import json
import sqlite3
import sys

from sfclab.experiments.pagetables import rate_cell, received_at


def series_name(params: dict) -> str:
    def show(v: object) -> object:
        return f"{len(v)} pairs" if isinstance(v, list) else v
    return " ".join(f"{k.split('.')[-1]}={show(v)}" for k, v in sorted(params.items()))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pair = argv[2] if len(argv) > 2 else None
    con = sqlite3.connect(f"file:{argv[1]}?mode=ro", uri=True)
    rows = con.execute("SELECT r.params, r.measure, x.text FROM runs r JOIN raw x ON "
                       "x.run_id = r.id AND x.name = 'points' WHERE r.status = 'done'").fetchall()
    table: dict[str, dict[float, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for params, measure, text in rows:
        name = series_name(json.loads(params))
        pairs = json.loads(measure).get("pairs") or []
        sender = str(pairs[0].get("from", "")) if len(pairs) == 1 else ""
        for offered, got in received_at(json.loads(text), pair or "", sender):
            table[name][offered].append(got)
    for name in sorted(table):
        cells = [f"{offered / 1e3:g}k: {rate_cell(got)}"
                 for offered, got in sorted(table[name].items())]
        print(f"{name:45} " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
