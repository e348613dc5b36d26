"""The one structured result every measurement returns.

A :class:`Measurement` is what an iperf3 run, a rate curve, an NDR/PDR search or a latency
trial hands back, and its :meth:`Measurement.to_dict` is what the experiment store consumes::

    {"type": "iperf3" | "rate_curve" | "ndr_pdr" | "latency",
     "params":      the request as made (flows, size, loss goals, ...),
     "metrics":     flat name -> float (throughput_bps, jain_fairness, udp_loss_ratio,
                    retransmits, ndr_pps, pdr_pps, latency_p50_us, ...),
     "environment": kernel, CPU, tool versions (see environment.py),
     "cpu":         per-core and per-process CPU use during the measurement (see cpu.py),
     "raw":         the tools' own output (parsed JSON, every trial), kept for re-analysis,
     ...            anything in ``extra`` (per-flow lists, trials, flags), at the top level}

Metrics hold only numbers, so stores and plots can treat every measurement alike; anything
structured (per-flow rates, the trial list) goes to ``extra``.  Booleans become 0.0/1.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

#: keys of ``to_dict()`` that ``extra`` may not replace
CORE_KEYS = ("type", "params", "metrics", "environment", "cpu", "raw")


class ResultError(ValueError, TypeError):
    """A measurement result that is not one (metrics missing or not numbers); a ``TypeError``
    too, for a value of the wrong type."""


def _as_metric(name: str, value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    raise ResultError(f"metric {name!r} is not a finite number: {value!r}")


@dataclass
class Measurement:
    """One measurement: what was asked (``params``), what came out (``metrics``), and context."""

    type: str
    params: dict[str, Any]
    metrics: dict[str, float]
    environment: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)
    raw: Any = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # None means "not measured" (e.g. no retransmit count for UDP): drop it, keep the rest flat.
        self.metrics = {k: _as_metric(k, v) for k, v in self.metrics.items() if v is not None}
        clash = set(self.extra) & set(CORE_KEYS)
        if clash:
            raise ValueError(f"extra may not replace {sorted(clash)}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": self.type,
            "params": dict(self.params),
            "metrics": dict(self.metrics),
            "environment": self.environment,
            "cpu": self.cpu,
            "raw": self.raw,
        }
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Measurement:
        """A result given as a mapping (a measurement function of a test, a stored run),
        validated here, once; raises :class:`ResultError`."""
        if not isinstance(d, Mapping) or not isinstance(d.get("metrics"), Mapping):
            raise ResultError("the measurement returned no 'metrics' mapping")
        extra = {k: v for k, v in d.items() if k not in CORE_KEYS}
        return cls(type=str(d.get("type")), params=d.get("params") or {},
                   metrics=dict(d["metrics"]),
                   environment=d.get("environment", {}), cpu=d.get("cpu", {}),
                   raw=d.get("raw", {}), extra=extra)
