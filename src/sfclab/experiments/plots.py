"""Figures, written headless (matplotlib's Agg canvas, never pyplot or a display) as PNG and
SVG side by side: ``plot_x(..., stem)`` writes ``stem.png`` and ``stem.svg`` and returns both
paths.

- :func:`plot_series`          a metric against a swept parameter, 95 % CI bars, one line per
                               series (the other swept parameters)
- :func:`plot_relative`        the same, relative to each series' first point (the baseline)
- :func:`plot_offered_received` received against offered rate, with the lossless diagonal
- :func:`plot_fit`             throughput against chain length with the fitted power law
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .fit import ChainAnalysis
from .stats import Series, floored, relative_to_baseline
from .units import metric_words, nonnegative, param_words

FORMATS = ("png", "svg")


def _figure() -> Figure:
    fig = Figure(figsize=(6.4, 4.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, stem: str | Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` (no timestamps, so reruns give identical SVG)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for fmt in FORMATS:
        p = stem.with_name(stem.name + "." + fmt)
        meta = {"Date": None} if fmt == "svg" else {}
        fig.savefig(p, format=fmt, metadata=meta)
        out.append(p)
    return out


def _numeric(xs: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs)


def _positions(all_series: Sequence[Series]) -> tuple[dict[str, float], list[Any] | None]:
    """x positions: the values themselves when numeric, else categories in first-seen order."""
    xs = [v for s in all_series for v in s.xs]
    if _numeric(xs):
        return {repr(v): float(v) for v in xs}, None
    cats: list[Any] = []
    for v in xs:
        if v not in cats:
            cats.append(v)
    return {repr(v): float(i) for i, v in enumerate(cats)}, cats


#: at most this many swept values are each a tick of their own
MAX_TICKS = 20


def _errorbars(ax: Any, all_series: Sequence[Series], yscale: float = 1.0) -> None:
    """Mean and 95 % interval per point, the interval cut at 0 where the metric cannot be
    negative; the x ticks are the swept values (chain length 2, 3, 5, 8: never 2.5)."""
    pos, cats = _positions(all_series)
    for s in all_series:
        floor = 0.0 if nonnegative(s.metric) else None
        pts = [floored(p, floor) for p in s.points]
        x = [pos[repr(v)] for v in s.xs]
        y = [p.mean * yscale for p in pts]
        below = [0.0 if math.isnan(p.ci_low) else (p.mean - p.ci_low) * yscale for p in pts]
        above = [0.0 if math.isnan(p.ci_high) else (p.ci_high - p.mean) * yscale for p in pts]
        ax.errorbar(x, y, yerr=[below, above], marker="o", capsize=3, label=s.name)
    if cats is not None:
        ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    elif len(pos) <= MAX_TICKS:
        ticks = sorted(set(pos.values()))
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    if len(all_series) > 1 or (all_series and all_series[0].label):
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)


def plot_series(all_series: Sequence[Series], stem: str | Path, *, ylabel: str | None = None,
                title: str | None = None, logy: bool = False,
                yscale: float = 1.0) -> list[Path]:
    """A metric against a swept parameter, mean with 95 % CI bars, one line per series;
    values are multiplied by ``yscale`` (the unit ``ylabel`` names, e.g. 1e-9 for Gbit/s)."""
    if not all_series:
        raise ValueError("nothing to plot")
    fig = _figure()
    ax = fig.add_subplot()
    _errorbars(ax, all_series, yscale)
    ax.set_xlabel(param_words(all_series[0].x))
    ax.set_ylabel(ylabel or metric_words(all_series[0].metric))
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    return save(fig, stem)


def plot_relative(all_series: Sequence[Series], stem: str | Path, *,
                  title: str | None = None) -> list[Path]:
    """Each series divided by its value at its first x (e.g. the shortest chain)."""
    rel = [relative_to_baseline(s) for s in all_series if s.xs]
    if not rel:
        raise ValueError("nothing to plot")
    fig = _figure()
    ax = fig.add_subplot()
    _errorbars(ax, rel)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel(param_words(rel[0].x))
    ax.set_ylabel(f"{metric_words(rel[0].metric)} relative to {param_words(rel[0].x)} "
                  f"{rel[0].xs[0]}")
    if title:
        ax.set_title(title)
    return save(fig, stem)


def loss_onset(pts: Sequence[tuple[float, float]], loss: float = 0.001) -> float | None:
    """The lowest offered rate at which more than ``loss`` of the packets were lost."""
    for off, rec in sorted(pts):
        if off > 0 and rec < off * (1 - loss):
            return off
    return None


def plot_offered_received(curves: Mapping[str, Sequence[tuple[float, float]]],
                          stem: str | Path, *, unit: str = "pps", scale: float = 1.0,
                          title: str | None = None,
                          limited: Sequence[tuple[float, float]] = ()) -> list[Path]:
    """Received against offered rate, one line per curve, in ``unit`` (values multiplied by
    ``scale``); the diagonal is no loss, and where a curve first loses more than 0.1 % is
    marked.  ``limited`` points (offered, received) were measurement-limited (the generator or
    the receiver, not the chain, set them): each is circled with a red ring."""
    if not curves:
        raise ValueError("nothing to plot")
    fig = _figure()
    ax = fig.add_subplot()
    top = 0.0
    for name, pts in curves.items():
        pts = sorted(pts)
        xs, ys = [p[0] * scale for p in pts], [p[1] * scale for p in pts]
        line = ax.plot(xs, ys, marker="o", markersize=3, label=name)[0]
        onset = loss_onset(pts)
        if onset is not None:
            ax.axvline(onset * scale, color=line.get_color(), linewidth=0.8, linestyle="--")
            ax.annotate("loss > 0.1 %", (onset * scale, 0), xytext=(3, 3),
                        textcoords="offset points", fontsize="x-small", rotation=90,
                        color=line.get_color())
        top = max([top, *xs, *ys])
    if limited:
        ax.scatter([o * scale for o, _ in limited], [r * scale for _, r in limited], s=80,
                   facecolors="none", edgecolors="red", linewidths=1.2,
                   label="measurement-limited", zorder=3)
    ax.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle=":", label="ideal (no loss)")
    ax.set_xlabel(f"offered rate ({unit})")
    ax.set_ylabel(f"received rate ({unit})")
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    return save(fig, stem)


def plot_fit(lengths: Sequence[float], throughputs: Sequence[float], analysis: ChainAnalysis,
             stem: str | Path, *, ylabel: str = "throughput", yscale: float = 1.0,
             title: str | None = None) -> list[Path]:
    """Each run's throughput against chain length, the power law fitted on every length and,
    when it stops holding, the law fitted where it holds (values multiplied by ``yscale``)."""
    fig = _figure()
    ax = fig.add_subplot()
    ax.scatter(lengths, [t * yscale for t in throughputs], s=12, alpha=0.6, label="runs")
    grid = np.linspace(min(lengths), max(lengths), 200)
    f = analysis.fit
    ax.plot(grid, f.predict(grid) * yscale,
            label=f"fit: l = {100 * f.loss:.1f} %, R² = {f.r2:.3f}")
    h = analysis.holding
    if analysis.breaks_at is not None and h is not None:
        ax.plot(grid, h.predict(grid) * yscale, linestyle="--",
                label=f"fit up to n = {analysis.holds_up_to}: l = {100 * h.loss:.1f} %")
        ax.axvline(analysis.breaks_at, color="grey", linewidth=0.8, linestyle=":")
    ax.set_yscale("log")
    ax.set_xlabel("chain length")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3, which="both")
    if title:
        ax.set_title(title)
    return save(fig, stem)
