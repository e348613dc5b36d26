"""Units people read: a metric's quantity from its name, and the prefix that fits its magnitude.

Metric names end in their unit (``throughput_bps``, ``received_pps``, ``latency_us_p99``,
``loss_ratio``, ``cpu.…_s``); :func:`quantity` reads it and :func:`scale` picks one prefix for a
whole column or axis (the one that fits its largest value), so a table shows ``12.3 Gbit/s``
rather than ``1.23e+10`` and an axis is labelled ``throughput (Gbit/s)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    """What a metric measures: its base unit and the prefixes it may take."""

    label: str  # "throughput", "packet rate" ...
    unit: str  # the base unit as written after a prefix: "bit/s", "pps", "s" ...
    prefixes: tuple[tuple[float, str], ...]  # (factor, prefix), largest first


_SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIME = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))

BITS = Quantity("throughput", "bit/s", _SI)
PACKETS = Quantity("packet rate", "pps", _SI)
SECONDS = Quantity("time", "s", _TIME)
RATIO = Quantity("ratio", "%", ((0.01, ""),))
PLAIN = Quantity("", "", ((1.0, ""),))

#: (pattern on the metric name, quantity, factor from the name's unit to the base unit)
_RULES: tuple[tuple[re.Pattern[str], Quantity, float], ...] = (
    (re.compile(r"(^|_)bps($|_)|bits_per_second"), BITS, 1.0),
    (re.compile(r"(^|_)pps($|_)"), PACKETS, 1.0),
    (re.compile(r"(^|_)us($|_)"), SECONDS, 1e-6),
    (re.compile(r"(^|_)ms($|_)"), SECONDS, 1e-3),
    (re.compile(r"(^|_)ns($|_)"), SECONDS, 1e-9),
    (re.compile(r"(^|_)(s|seconds)($|_)"), SECONDS, 1.0),
    (re.compile(r"ratio|fraction|fairness"), RATIO, 1.0),
)


CPU_SHARE = Quantity("CPU", "%", ((1.0, ""),))
_CPU_FIELDS = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "busy",
               "guest", "percent"}


def quantity(metric: str) -> tuple[Quantity, float]:
    """The metric's quantity and the factor from its stored values to the base unit."""
    name = metric.rsplit(".", 1)[-1]
    if metric.startswith("cpu.") and name in _CPU_FIELDS:
        return CPU_SHARE, 1.0
    for pattern, q, factor in _RULES:
        if pattern.search(name):
            if q is RATIO and "fairness" in name:
                return PLAIN, 1.0
            return q, factor
    return PLAIN, 1.0


@dataclass(frozen=True)
class Scale:
    """One prefix for a column or an axis: ``value * factor`` is in ``unit``."""

    factor: float
    unit: str

    def __call__(self, v: float) -> float:
        return v * self.factor

    def format(self, v: float, digits: int = 4) -> str:
        if v is None or math.isnan(v):
            return "–"
        return f"{v * self.factor:.{digits}g}" + (f" {self.unit}" if self.unit else "")


def scale(metric: str, values: Iterable[float]) -> Scale:
    """The scale for ``values`` of ``metric``: the largest prefix its largest value reaches."""
    q, base = quantity(metric)
    finite = [abs(v) * base for v in values if v is not None and not math.isnan(v)]
    top = max(finite, default=0.0)
    if q is RATIO:
        return Scale(100.0 * base, "%")
    if q is CPU_SHARE:
        return Scale(1.0, "%")
    chosen = q.prefixes[-1]
    for factor, prefix in q.prefixes:
        if top >= factor:
            chosen = (factor, prefix)
            break
    return Scale(base / chosen[0], f"{chosen[1]}{q.unit}")


def axis_label(metric: str, s: Scale) -> str:
    """``throughput_bps`` in Gbit/s -> ``throughput (Gbit/s)``."""
    name = metric.rsplit(".", 1)[-1]
    words = re.sub(r"(^|_)(bps|pps|us|ms|ns|s|ratio)($|_)", r"\1\3", name).strip("_")
    words = words.replace("_", " ") or quantity(metric)[0].label or metric
    return f"{words} ({s.unit})" if s.unit else words
