"""NDR/PDR by MLRsearch: FD.io CSIT's implementation of the IETF BMWG method (RFC 9971), the
PyPI package ``MLRsearch``, with our generator as its measurer.

One search serves every loss goal at once (NDR 0 % and PDR 0.5 % by default, as in CSIT):
short trials first, longer ones near the answer, each goal's load decided when enough trial
time agrees (``duration_sum``).  A trial that is measurement-limited (:mod:`.limits`: the
generator more than 2 % short of the load, the receiver dropping or saturated) never reaches
MLRsearch: it is re-run (at most ``limited_retries`` times); a load still limited then is out
of this machine's reach, and the search starts again below it (the top at 95 % of the least of
that load, what was sent and what the receiver took, at most ``MAX_CAPS`` times), recording ``not_measurable_above_pps``.
A figure within 2 % of the most the sender reached, or at the top of a range so cut, is reported
as a lower bound (``ndr_lower_bound_pps``), never as the chain's.

The result has the shape of :func:`sfclab.traffic.ndr.ndr_pdr`'s (``ndr_pps``, ``pdr_pps``,
``generator_limited``, ``trials``), with ``method: mlr``.
"""

from __future__ import annotations

import time
from typing import Any

from MLRsearch import (AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch,
                       SearchGoal)

from ..errors import MeasurementError
from . import limits
from .environment import environment
from .generator import GENERATOR_LIMIT_TOLERANCE, PacketGenerator, Trial
from .ndr import (DECIDING, LIMITED_RETRIES, MAX_CAPS, Progress, SearchTrial, Unmeasurable,
                  goal_labels)
from .result import Measurement

#: how much trial time at one load decides a goal there, in final trial durations
DURATION_SUM_TRIALS = 2.0
#: seconds before a limited trial's re-run
RERUN_PAUSE_S = 1.0
#: the longest a search may take
SEARCH_DURATION_MAX_S = 1800.0


class _Measurer(AbstractMeasurer):
    """MLRsearch's measurer: one trial of our generator per call."""

    def __init__(self, gen: PacketGenerator, size: int | str, ramp_s: float | None,
                 progress: Progress | None, limited_retries: int = LIMITED_RETRIES,
                 rerun_pause_s: float = RERUN_PAUSE_S):
        self.gen = gen
        self.size = size
        self.ramp_s = ramp_s
        self.progress = progress
        self.trials: list[SearchTrial] = []
        self.max_sent_pps = 0.0
        self.limited_retries = limited_retries
        self.rerun_pause_s = rerun_pause_s

    def run(self, load: float | None, duration: float, purpose: str) -> Trial:
        """One trial; a deciding one that stays measurement-limited after its re-runs raises
        :class:`~sfclab.traffic.ndr.Unmeasurable`."""
        t = self._once(load, duration, purpose)
        if purpose not in DECIDING:
            return t
        first = len(self.trials) - 1
        runs = 1
        while t.measurement_limited and runs <= limits.retries_for(t, self.limited_retries):
            time.sleep(self.rerun_pause_s)  # let a passing load go by
            t = self._once(load, duration, purpose)
            runs += 1
        if t.measurement_limited:
            raise Unmeasurable(self.trials[first:])
        return t

    def _once(self, load: float | None, duration: float, purpose: str) -> Trial:
        t = self.gen.trial(load, duration, self.size,
                           ramp_s=self.ramp_s if load is not None else None)
        self.max_sent_pps = max(self.max_sent_pps, t.pair_sent_pps)
        st = SearchTrial(len(self.trials), purpose, None, t)
        self.trials.append(st)
        if self.progress:
            self.progress({"index": st.index, "trial": st.to_dict()})
        return t

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        t = self.run(intended_load, intended_duration, "search")
        intended = max(round(intended_load * intended_duration), 1)
        loss = round(t.loss_ratio * intended)  # the trial reached the load (not limited)
        return MeasurementResult(intended_duration=intended_duration,
                                 intended_load=intended_load, offered_count=intended,
                                 loss_count=min(loss, intended),
                                 offered_duration=t.duration_s)


def mlr_search(gen: PacketGenerator, size: int | str, *, duration: float = 2.0,
               loss_goals: list[float] | None = None, precision: float = 0.01,
               max_rate_pps: float | None = None, min_rate_pps: float | None = None,
               ramp_s: float | None = 0.5, limited_retries: int = LIMITED_RETRIES,
               rerun_pause_s: float = RERUN_PAUSE_S,
               progress: Progress | None = None) -> Measurement:
    """Search the highest loads meeting ``loss_goals`` (ratios; default NDR 0, PDR 0.005)."""
    goals = sorted(set(loss_goals if loss_goals is not None else [0.0, 0.005]))
    m = _Measurer(gen, size, ramp_s, progress, limited_retries, rerun_pause_s)
    unmeasurable: list[dict[str, Any]] = []
    t0 = time.monotonic()
    top = max_rate_pps if max_rate_pps is not None else _top_of_range(m, duration, unmeasurable)
    if not top or top <= 0:
        raise MeasurementError("the generator sent nothing: no search range")
    bottom = min_rate_pps or max(top / 1000.0, 10.0)
    search_goals = _goals(goals, duration, precision)
    results, top = _search_below_the_unmeasurable(search_goals, bottom, top, m, unmeasurable)
    elapsed = time.monotonic() - t0
    not_measurable = min((u["rate_pps"] for u in unmeasurable), default=None)
    metrics: dict[str, float] = {"trials": len(m.trials), "search_time_s": elapsed,
                                 "traffic_time_s": sum(s.trial.duration_s for s in m.trials),
                                 "generator_max_pps": m.max_sent_pps, "range_max_pps": top,
                                 "measurement_limited_trials": sum(
                                     1 for s in m.trials if s.trial.measurement_limited)}
    if not_measurable is not None:
        metrics["not_measurable_above_pps"] = not_measurable
    extra: dict[str, Any] = {"not_measurable_above_pps": not_measurable,
                             "search": {"range_pps": [bottom, top],
                                        "unmeasurable": unmeasurable,
                                        "ended_unmeasurable": results is None}}
    # a rate at the generator's most (or at the top of a range it set) is a lower bound only
    capped = max_rate_pps is None or bool(unmeasurable)
    goal_rows = []
    for label, goal, sg in zip(goal_labels(goals), goals, search_goals):
        row = _goal_row(label, goal, results[sg] if results is not None else None,
                        m.max_sent_pps, top * (1 - precision) if capped else None)
        goal_rows.append(row)
        if row["rate_pps"] is not None:
            metrics[f"{label}_lower_bound_pps" if row["lower_bound"] else f"{label}_pps"] = \
                row["rate_pps"]
        extra[f"{label}_pps"] = row["chain_rate_pps"]
    limited = any(g["generator_limited"] for g in goal_rows)
    metrics["generator_limited"] = float(limited)
    extra.update(generator_limited=limited, goals=goal_rows,
                 trials=[s.to_dict() for s in m.trials],
                 any_trial_generator_limited=any(s.trial.generator_limited for s in m.trials))
    params = {"method": "mlr", "size": size, "duration": duration, "loss_goals": goals,
              "precision": precision, "min_rate_pps": bottom, "max_rate_pps": max_rate_pps,
              "ramp_s": ramp_s, "duration_sum_s": DURATION_SUM_TRIALS * duration,
              "limited_retries": limited_retries, "generator": type(gen).__name__}
    return Measurement(type="ndr_pdr", params=params, metrics=metrics, environment=environment(),
                       raw={"generator_output": [s.trial.raw for s in m.trials]}, extra=extra)


def _top_of_range(m: _Measurer, duration: float, unmeasurable: list[dict[str, Any]]) -> float:
    """The most the sender reaches is the top of the search; if that trial was limited by the
    measurement (the receiver dropped), the top is set below it and the rate noted."""
    first = m.run(None, duration, "max-rate")
    if not first.measurement_limited:
        return first.pair_sent_pps
    unmeasurable.append({"rate_pps": first.pair_sent_pps, "trial": 0,
                         "reason": first.measurement_limited})
    return limits.measurable_below(first)


def _search_below_the_unmeasurable(search_goals: list[SearchGoal], bottom: float, top: float,
                                   m: _Measurer, unmeasurable: list[dict[str, Any]]
                                   ) -> tuple[Any, float]:
    """Search; each time a rate proves not measurable here, lower the top below it and search
    again (at most ``MAX_CAPS`` times).  The results (``None`` if it ended unmeasurable) and
    the top of the range searched last."""
    while True:
        try:
            return _search(search_goals, bottom, top, m), top
        except Unmeasurable as u:
            unmeasurable.append({"rate_pps": u.rate_pps, "trial": u.st.index,
                                 "reason": u.st.trial.measurement_limited})
            measured = [s.trial.offered_pps for s in m.trials
                        if s.purpose == "search" and not s.trial.measurement_limited
                        and s.trial.offered_pps is not None
                        and s.trial.offered_pps < u.rate_pps]
            top = min(top, u.new_top(max(measured, default=0.0)))
            if len(unmeasurable) > MAX_CAPS or top <= bottom:
                return None, top


def _goal_row(label: str, goal: float, r: Any, max_sent_pps: float,
              cap_pps: float | None) -> dict[str, Any]:
    """One loss goal's row: its rate, and whether that rate is only a lower bound (at the
    generator's most, or at ``cap_pps``, the top of a range the search itself set)."""
    low = r.relevant_lower_bound if r is not None else None
    rate = float(low.float_load) if low is not None else None
    lower_bound = rate is not None and (
        rate >= GENERATOR_LIMIT_TOLERANCE * max_sent_pps
        or (cap_pps is not None and rate >= cap_pps))
    high = r.relevant_upper_bound if r is not None else None
    return {"label": label, "loss_goal": goal, "loss_goal_pct": goal * 100.0,
            "rate_pps": rate, "chain_rate_pps": None if lower_bound else rate,
            "interval_pps": [rate, float(high.float_load) if high else None],
            "generator_limited": lower_bound, "lower_bound": lower_bound}


def _goals(goals: list[float], duration: float, precision: float) -> list[SearchGoal]:
    return [SearchGoal(loss_ratio=g, exceed_ratio=0.5, relative_width=precision,
                       initial_trial_duration=min(1.0, duration), final_trial_duration=duration,
                       duration_sum=DURATION_SUM_TRIALS * duration, fail_fast=False)
            for g in goals]


def _search(search_goals: list[SearchGoal], bottom: float, top: float, m: _Measurer) -> Any:
    config = Config()
    config.goals = search_goals
    config.min_load = bottom
    config.max_load = top
    config.search_duration_max = SEARCH_DURATION_MAX_S
    config.warmup_duration = search_goals[0].initial_trial_duration
    return MultipleLossRatioSearch(config=config).search(measurer=m, debug=lambda _m: None)
