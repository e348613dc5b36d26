"""Latency at shares of the NDR (``sfclab traffic ndr --latency``), as FD.io CSIT reports it:
one latency trial at 10, 50 and 90 % of the NDR found, each a deciding trial of the search's
kind (re-run when measurement-limited, kept with its reason if it stays so), and metrics named
``ndr<share>pct_latency_<percentile>_us`` for the results store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .generator import PacketGenerator
from .ndr import Progress, TrialRunner, Unmeasurable, metric_name, positive

#: shares of the NDR at which ``ndr --latency`` measures latency (CSIT's practice)
LATENCY_SHARES = (0.1, 0.5, 0.9)


def latency_at_shares(gen: PacketGenerator, ndr_pps: float, size: int | str, duration: float,
                      *, shares: Iterable[float] = LATENCY_SHARES, ramp_s: float | None = 0.5,
                      progress: Progress | None = None) -> list[dict[str, Any]]:
    """One latency trial at each share of ``ndr_pps``: ``{"share", "rate_pps", "latency_us",
    "latency_source", "loss_ratio", "measurement_limited", "trial"}`` per share; a limited
    trial is re-run like a search trial, and kept with its reason if it stays limited."""
    positive("ndr_pps", ndr_pps)
    shares = list(shares)
    runner = TrialRunner(gen, size, pause_s=0.0, ramp_s=ramp_s, max_trials=3 * len(shares),
                     progress=progress)
    out = []
    for share in shares:
        try:
            st = runner.run(share * ndr_pps, duration, "confirm", f"latency@{share:.0%}")
        except Unmeasurable as u:
            st = u.st
        t = st.trial
        out.append({"share": share, "rate_pps": share * ndr_pps,
                    "latency_us": dict(t.latency_us), "latency_source": t.latency_source,
                    "loss_ratio": t.loss_ratio,
                    "measurement_limited": t.measurement_limited or False,
                    "trial": st.to_dict()})
    return out


def latency_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``ndr10pct_latency_p50_us`` ... from :func:`latency_at_shares`'s rows."""
    return {f"ndr{round(r['share'] * 100)}pct_{metric_name(k)}": v
            for r in rows for k, v in r["latency_us"].items() if k in _PCTS}


_PCTS = ("p50", "p90", "p99", "p99.9", "max")
