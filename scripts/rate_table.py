#!/usr/bin/env python3
"""Offered-vs-received tables from a results database: for every series (a run's parameters
without the repetition), the mean received rate at each offered rate over the repetitions, in
kpps, with the repetitions' range when they differ.  With PAIR (e.g. ``vm1``) the figures are
that sender's own (rate curves of several pairs, one per tenant).  docs/reproduction.md quotes
these tables for Trellis and the OpenStack study.

    .venv/bin/python scripts/rate_table.py /tmp/repro/openstack-shared.db [vm1]
"""

from __future__ import annotations

import collections
import json
import sqlite3
import statistics
import sys


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
    rows = con.execute("SELECT r.params, x.text FROM runs r JOIN raw x ON x.run_id = r.id "
                       "AND x.name = 'points' WHERE r.status = 'done'").fetchall()
    table: dict[str, dict[float, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for params, text in rows:
        name = series_name(json.loads(params))
        for point in json.loads(text):
            if pair is None:
                table[name][point["offered_pps"]].append(point["received_pps"])
                continue
            mine = [p for p in point.get("pairs", []) if p["pair"].split(":")[0] == pair]
            if mine:
                table[name][point["offered_pps"]].append(mine[0]["received_pps"])
    for name in sorted(table):
        cells = []
        for offered, got in sorted(table[name].items()):
            cell = f"{offered / 1e3:g}k: {statistics.mean(got) / 1e3:.1f}"
            if len(got) > 1 and max(got) - min(got) > 0.05 * max(got):
                cell += f" ({min(got) / 1e3:.0f}-{max(got) / 1e3:.0f})"
            cells.append(cell)
        print(f"{name:45} " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
