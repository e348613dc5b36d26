"""A comparison (:func:`.compare.compare`) as text for the terminal: per metric a table of each
side's mean ± 95 % interval at every x, in the metric's unit, and each later side's ratio to the
first with its 95 % interval; then where each side ran, the environment differences and the
published figures beside ours."""

from __future__ import annotations

import math
from typing import Any

from .report import Table, render_markdown


def _num(v: Any, digits: int = 4) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}g}"


def _known(v: Any) -> bool:
    return v is not None and not math.isnan(v)


def _mean(s: dict[str, Any], i: int, unit: str) -> str:
    """``11 ± 2.5 Gbit/s (n=3)``; an interval cut at 0 is not symmetric: ``2.2 (0–7.3)``."""
    m, lo, hi = s["mean"][i], s["ci_low"][i], s["ci_high"][i]
    text = _num(m)
    if _known(m) and _known(lo) and _known(hi):
        if math.isclose(hi - m, m - lo, rel_tol=1e-6, abs_tol=1e-12):
            text += f" ± {_num((hi - lo) / 2, 2)}"
        else:
            text += f" ({_num(lo, 3)}–{_num(hi, 3)})"
    return text + (f" {unit}" if unit else "") + f" (n={s['n'][i]})"


def _ratio(r: dict[str, Any], i: int) -> str:
    """``2× (1.8–2.2)``; ``1.2× (0.3–no upper bound)`` when the baseline's own interval reaches
    0; ``no interval`` with fewer than 2 repetitions or no spread."""
    lo, hi = r["low"][i], r["high"][i]
    if not _known(lo):
        iv = "no interval"
    elif hi is None or math.isinf(hi):
        iv = f"{_num(max(lo, 0.0), 3)}–no upper bound"
    else:
        iv = f"{_num(lo, 3)}–{_num(hi, 3)}"
    return f"{_num(r['ratio'][i], 3)}× ({iv})"


def render(c: dict[str, Any]) -> str:
    out: list[Any] = []
    lines = [f"Compared in {c['db']} (ratios to the first side, 95 % intervals):"]
    lines += [f"  [{i}] {s['label']}: {len(s['runs'])} runs" for i, s in enumerate(c["sides"])]
    out.append("\n".join(lines) + "\n")
    for m in c["metrics"]:
        xs: list[Any] = []
        for s in m["series"]:
            xs += [x for x in s["x"] if x not in xs]
        if all(isinstance(x, (int, float)) for x in xs):
            xs.sort()
        header = [c["x_label"] or ""] + [s["name"] for s in m["series"]] + \
            [f"ratio {r['name']}" for r in m["ratios"]]
        rows = []
        for x in xs:
            row = [str(x)]
            row += [_mean(s, s["x"].index(x), m["unit"]) if x in s["x"] else ""
                    for s in m["series"]]
            row += [_ratio(r, r["x"].index(x)) if x in r["x"] else "" for r in m["ratios"]]
            rows.append(row)
        out.append(f"{m['title']} ({m['y_label']})\n"
                   + render_markdown([Table(header, rows)]).rstrip() + "\n")
    ran = [f"  [{i}] lab {', '.join(lab['name'] + (' (up)' if lab['up'] else '') for lab in s['ran_on']['labs']) or '–'}"
           f", experiment file {s['ran_on']['experiment_file'] or '–'}"
           for i, s in enumerate(c["sides"])]
    out.append("Where they ran:\n" + "\n".join(ran) + "\n")
    if c["environment"]:
        out.append("Environment differences:\n" + render_markdown([Table(
            ["", *(f"[{i}]" for i in range(len(c["sides"])))],
            [[d["label"], *d["shown"]] for d in c["environment"]])]).rstrip() + "\n")
    else:
        out.append("Environment: the same on every side.\n")
    for p in c["published"]:
        band = "–" if p["band"] is None else f"{_num(p['band'][0], 3)}–{_num(p['band'][1], 3)}×"
        ours = p.get("note") or (f"{_num(p['ratio'], 3)}× ({_num(p['low'], 3)}–"
                                 f"{_num(p['high'], 3)}), {p['verdict']}")
        out.append(f"Published {p['id']} ({p['claim']}): {p['published']}, band {band}; "
                   f"ours {ours}\n")
    return "\n".join(out).rstrip()
