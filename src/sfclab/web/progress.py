"""A measurement's progress as the page shows it: one row per trial as it ends.

The measurement reports each trial through its ``progress`` hook (the one that prints the
command line's progress lines): a rate curve's and the binary search's events are the trial
itself (:meth:`sfclab.traffic.ndr.SearchTrial.to_dict`), the binary search adding the
interval each goal is narrowed to (``intervals``: goal -> ``[lo, hi]``) and the goals it has
finished (``done``); MLRsearch's events carry the trial under ``trial``.

:func:`trial_row` turns one event into a *row*: its index and purpose, the offered, sent and
received packet rates, the loss ratio, whether the tools limited it, the per-node count of the
packets it lost (``loss_by_node``, from the loss locator's ``located``) and, for an NDR/PDR
search, ``intervals``.  Where the search does not say its intervals (MLRsearch keeps them to
itself), the row carries the bracket its trials so far prove for each loss goal: ``lo``, the
highest load that met the goal, ``hi``, the lowest that missed it (``None``: none yet), which
is what any search's interval lies within (``bracketed: true`` says so).
"""

from __future__ import annotations

from typing import Any

#: the trials that say nothing about the chain's loss at a load (the generator's own ceiling,
#: latency at a share of the NDR)
NOT_EVIDENCE = ("max-rate", "warm-up", "latency")


def goals_of(request: dict[str, Any]) -> dict[str, float]:
    """An NDR request's loss goals as ratios, by label (``ndr``, ``pdr``); none for the rest."""
    if request.get("type") != "ndr":
        return {}
    return {"ndr": float(request.get("ndr_loss", 0.0)) / 100,
            "pdr": float(request.get("pdr_loss", 0.5)) / 100}


def _bracket(rows: list[dict[str, Any]], goal: float) -> list[float | None]:
    lo: float | None = None
    hi: float | None = None
    for r in rows:
        load, loss = r.get("effective_pps") or r.get("offered_pps"), r.get("loss_ratio")
        if (load is None or loss is None or r.get("measurement_limited")
                or r.get("purpose") in NOT_EVIDENCE):
            continue
        if loss <= goal + 1e-12:
            lo = load if lo is None else max(lo, load)
        else:
            hi = load if hi is None else min(hi, load)
    if lo is not None and hi is not None and lo > hi:
        lo = None  # a load that failed below one that passed: no bracket proven yet
    return [lo, hi]


def trial_row(event: dict[str, Any], earlier: list[dict[str, Any]],
              goals: dict[str, float]) -> dict[str, Any]:
    """The row of one progress ``event``, given the rows before it and the search's loss
    ``goals`` (ratios by label; empty unless the measurement is an NDR/PDR search)."""
    inner = event.get("trial")
    t: dict[str, Any] = inner if isinstance(inner, dict) else event
    located = t.get("located") or {}
    row: dict[str, Any] = {
        "index": event.get("index", t.get("index", len(earlier))),
        "purpose": t.get("purpose") or event.get("purpose"),
        "offered_pps": t.get("offered_pps"), "effective_pps": t.get("effective_pps"),
        "sent_pps": t.get("sent_pps"), "received_pps": t.get("received_pps"),
        "lost": t.get("lost"), "loss_ratio": t.get("loss_ratio"),
        "measurement_limited": t.get("measurement_limited") or False,
        "loss_by_node": dict(located.get("loss_by_node") or {})}
    if event.get("intervals"):
        row["intervals"] = {g: list(v) for g, v in event["intervals"].items()}
        row["done"] = list(event.get("done") or [])
        row["bracketed"] = False
    elif goals:
        rows = earlier + [row]
        row["intervals"] = {g: _bracket(rows, ratio) for g, ratio in goals.items()}
        row["done"] = []
        row["bracketed"] = True
    return row
