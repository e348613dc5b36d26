"""NDR/PDR by MLRsearch: FD.io CSIT's implementation of the IETF BMWG method (RFC 9971), the
PyPI package ``MLRsearch``, with our generator as its measurer.

One search serves every loss goal at once (NDR 0 % and PDR 0.5 % by default, as in CSIT):
short trials first, longer ones near the answer, each goal's load decided when enough trial
time agrees (``duration_sum``).  A trial the generator could not drive at the intended load
counts what it did not send as lost, so the search never credits the chain with a rate the
sender did not reach; a figure within 3 % of the most the sender reached is reported as a
lower bound (``ndr_lower_bound_pps``), never as the chain's.

The result has the shape of :func:`sfclab.traffic.ndr.ndr_pdr`'s (``ndr_pps``, ``pdr_pps``,
``generator_limited``, ``trials``), with ``method: mlr``.
"""

from __future__ import annotations

import time
from typing import Any

from MLRsearch import (AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch,
                       SearchGoal)

from ..errors import MeasurementError
from .environment import environment
from .generator import GENERATOR_LIMIT_TOLERANCE, PacketGenerator, Trial
from .ndr import Progress, SearchTrial, goal_labels
from .result import Measurement

#: how much trial time at one load decides a goal there, in final trial durations
DURATION_SUM_TRIALS = 2.0
#: the longest a search may take
SEARCH_DURATION_MAX_S = 1800.0


class _Measurer(AbstractMeasurer):
    """MLRsearch's measurer: one trial of our generator per call."""

    def __init__(self, gen: PacketGenerator, size: int | str, ramp_s: float | None,
                 progress: Progress | None):
        self.gen = gen
        self.size = size
        self.ramp_s = ramp_s
        self.progress = progress
        self.trials: list[SearchTrial] = []
        self.max_sent_pps = 0.0

    def run(self, load: float | None, duration: float, purpose: str) -> Trial:
        t = self.gen.trial(load, duration, self.size,
                           ramp_s=self.ramp_s if load is not None else None)
        self.max_sent_pps = max(self.max_sent_pps, t.sent_pps)
        st = SearchTrial(len(self.trials), purpose, None, t)
        self.trials.append(st)
        if self.progress:
            self.progress({"index": st.index, "trial": st.to_dict()})
        return t

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        t = self.run(intended_load, intended_duration, "search")
        intended = max(round(intended_load * intended_duration), 1)
        loss = round(t.loss_ratio * intended)
        if t.generator_limited:  # what was not sent counts as lost: never credit a rate the
            # sender did not reach (sent_pps already allows for the ramp)
            loss += max(intended - round(t.sent_pps * intended_duration), 0)
        return MeasurementResult(intended_duration=intended_duration,
                                 intended_load=intended_load, offered_count=intended,
                                 loss_count=min(loss, intended),
                                 offered_duration=t.duration_s)


def mlr_search(gen: PacketGenerator, size: int | str, *, duration: float = 2.0,
               loss_goals: list[float] | None = None, precision: float = 0.01,
               max_rate_pps: float | None = None, min_rate_pps: float | None = None,
               ramp_s: float | None = 0.5, progress: Progress | None = None) -> Measurement:
    """Search the highest loads meeting ``loss_goals`` (ratios; default NDR 0, PDR 0.005)."""
    goals = sorted(set(loss_goals if loss_goals is not None else [0.0, 0.005]))
    labels = goal_labels(goals)
    m = _Measurer(gen, size, ramp_s, progress)
    t0 = time.monotonic()
    top = max_rate_pps
    if top is None:  # the most the sender reaches is the top of the search
        top = m.run(None, duration, "max-rate").sent_pps
    if not top or top <= 0:
        raise MeasurementError("the generator sent nothing: no search range")
    bottom = min_rate_pps or max(top / 1000.0, 10.0)
    search_goals = [SearchGoal(loss_ratio=g, exceed_ratio=0.5, relative_width=precision,
                               initial_trial_duration=min(1.0, duration),
                               final_trial_duration=duration,
                               duration_sum=DURATION_SUM_TRIALS * duration,
                               fail_fast=False)
                    for g in goals]
    config = Config()
    config.goals = search_goals
    config.min_load = bottom
    config.max_load = top
    config.search_duration_max = SEARCH_DURATION_MAX_S
    config.warmup_duration = min(1.0, duration)
    results = MultipleLossRatioSearch(config=config).search(measurer=m, debug=lambda _m: None)
    elapsed = time.monotonic() - t0

    metrics: dict[str, float] = {"trials": len(m.trials), "search_time_s": elapsed,
                                 "traffic_time_s": sum(s.trial.duration_s for s in m.trials),
                                 "generator_max_pps": m.max_sent_pps, "range_max_pps": top}
    goal_rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    limited_any = any(s.trial.generator_limited for s in m.trials)
    for label, goal, sg in zip(labels, goals, search_goals):
        r = results[sg]
        low = r.relevant_lower_bound
        rate = float(low.float_load) if low is not None else None
        lower_bound = rate is not None and (
            rate >= GENERATOR_LIMIT_TOLERANCE * m.max_sent_pps or
            (max_rate_pps is None and rate >= top * (1 - precision)))
        high = r.relevant_upper_bound
        goal_rows.append({"label": label, "loss_goal": goal, "loss_goal_pct": goal * 100.0,
                          "rate_pps": rate, "chain_rate_pps": None if lower_bound else rate,
                          "interval_pps": [rate, float(high.float_load) if high else None],
                          "generator_limited": lower_bound, "lower_bound": lower_bound})
        if rate is not None and not lower_bound:
            metrics[f"{label}_pps"] = rate
        elif rate is not None:
            metrics[f"{label}_lower_bound_pps"] = rate
        extra[f"{label}_pps"] = None if lower_bound else rate
    limited = any(g["generator_limited"] for g in goal_rows)
    metrics["generator_limited"] = float(limited)
    extra.update(generator_limited=limited, goals=goal_rows,
                 trials=[s.to_dict() for s in m.trials],
                 any_trial_generator_limited=limited_any)
    params = {"method": "mlr", "size": size, "duration": duration, "loss_goals": goals,
              "precision": precision, "min_rate_pps": bottom, "max_rate_pps": max_rate_pps,
              "ramp_s": ramp_s, "duration_sum_s": DURATION_SUM_TRIALS * duration,
              "generator": type(gen).__name__}
    return Measurement(type="ndr_pdr", params=params, metrics=metrics, environment=environment(),
                       raw={"generator_output": [s.trial.raw for s in m.trials]}, extra=extra)
