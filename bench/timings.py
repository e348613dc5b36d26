"""Medians of timed steps, printed as the SSH benches print them (text or ``--json``)."""

from __future__ import annotations

import json
import statistics


def report_medians(times: dict[str, list[float]], reps: int, as_json: bool, width: int) -> None:
    """Print each step's median in seconds (``width``: the name column), or one JSON line."""
    med = {k: round(statistics.median(v), 3) for k, v in times.items()}
    if as_json:
        print(json.dumps({"median_seconds": med, "reps": reps}))
    else:
        for k, v in med.items():
            print(f"{k:{width}s} {v:7.3f} s (median of {reps})")
