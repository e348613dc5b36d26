"""Rate measurements over a :class:`~sfclab.traffic.generator.PacketGenerator`: the NDR/PDR
search, the offered-vs-received rate curve and latency at a rate.

Terms.  A *trial* offers a constant rate (pps) for a duration; the generator stops the traffic,
waits for queues to drain and only then reads its counters (that is the generator's contract,
see ``generator.py``; counters read while traffic still flows would count packets in flight as
lost).  *Loss* is ``(sent - received) / sent`` over packets the generator actually sent, never
over what was asked for.  A trial is *generator-limited* when ``sent_pps`` fell short of the
offered rate (``Trial.generator_limited``); its *effective rate* is then ``sent_pps``.
A *loss goal* is a loss ratio; the rate found for it is the highest rate whose trial loss is at
most the goal.  With several goals (default NDR 0.001 %, PDR 0.1 %) one search serves all.

The search (after NFVbench and RFC 2544 binary search, with RFC 9971 (MLRsearch) ideas):

1. Range.  ``max_rate_pps`` (e.g. line rate) if given, after a short warm-up trial at a tenth
   of it; otherwise a *max-rate trial* (offered ``None``) learns what the generator can send,
   and that is the top of the range (it also warms up ARP, caches and flow tables).
   The bottom is ``min_rate_pps`` (default a thousandth of the top).
2. Every goal keeps an interval ``[lo, hi)``: ``lo`` the highest effective rate that passed it,
   ``hi`` the lowest that failed it.  *Each trial updates every goal*, so the goals share
   their intervals until a trial passes one and fails another, where they split.
3. Goals are served in order of increasing loss goal: trial at the top if nothing failed yet,
   else at the midpoint, until ``hi - lo <= precision * hi`` (relative precision, default 0.5 %).
   A pass contradicting an earlier fail (noise) or the reverse resets the stale bound.
4. Confirmation: a trial of ``confirm_duration`` at the found rate.  If it fails, the goal's
   ``hi`` drops to that rate, ``lo`` steps down by ``step_down`` (doubling on each retry) and
   the search resumes; after ``max_confirm_retries`` failures the goal is reported unconfirmed.
5. Trials that measured the tools.  A *search* or *confirm* trial that is measurement-limited
   (:mod:`.limits`: the generator fell more than 2 % short of the offered rate, or the receiver
   dropped frames itself or saturated) decides nothing: it is re-run, at most
   ``limited_retries`` times (default 2).  A rate still limited then is out of this machine's
   reach.  If it lay inside a goal's interval ``(lo, hi)``, that goal ends there, keeping the
   ``lo`` it verified (``unresolved``).  If it was the top of the range, the top drops to 95 %
   of the least of that rate, what the generator sent and what the receiver took
   (:func:`.limits.measurable_below`) and the search goes on below it (a goal whose only
   failures lie above the new top tries the top afresh), at most ``MAX_CAPS`` times; then, or
   when the new top falls under the range's bottom, the search ends.
   ``not_measurable_above_pps`` records the lowest such rate.  Limited trials stay in
   ``trials`` with their reason (``measurement_limited``), for the record.
6. Lower bounds.  A goal that passes at the top of a range that is the generator's own maximum
   (a max-rate trial) or that was cut by unmeasurable rates is only a lower bound: the chain
   kept up with all that could be measured.  A lower bound is never reported as the chain's
   figure: ``ndr_pps`` is then ``None`` and ``ndr_lower_bound_pps`` carries it.
   ``generator_limited`` is true whenever a goal is such a lower bound or a trial that decided
   it (its ``lo`` or ``hi`` trial) fell short of the offered rate.

Ramp.  ``ramp_s`` goes to the generator's ``trial()`` (the interface has it): the offered rate
climbs from 0 over the first ``ramp_s`` seconds of each trial, so a trial does not start with a
burst that fills the chain's queues at once.  ``pause_s`` separates trials.  ``progress`` (a
callable taking a dict) is called after every trial with the trial and the current intervals.
Latency at shares of the NDR found is :mod:`.ndrlatency`'s.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MeasurementError, SpecError
from .environment import environment
from . import limits
from .generator import PacketGenerator, Trial
from .result import Measurement

DEFAULT_LOSS_GOALS = "0.001%,0.1%"
#: re-runs of a measurement-limited trial before its rate counts as unmeasurable
LIMITED_RETRIES = 2
#: at most this many cuts of the range before the search gives up
MAX_CAPS = 5
#: trial purposes whose outcome decides a goal (the others never do)
DECIDING = ("search", "confirm")
Progress = Callable[[dict[str, Any]], None]

_PCT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%\s*$")


# ---------------------------------------------------------------------------------------------
# input

def parse_loss_goals(goals: str | Iterable[float | str]) -> list[float]:
    """Loss goals as ratios, sorted ascending, duplicates removed.

    A string is a comma-separated list of percentages, each with its ``%`` sign
    (``"0.001%,0.1%"``).  An iterable may mix such strings and floats, which are ratios
    (``1e-5``).  Each goal must be in ``[0, 1)`` as a ratio.  Raises ``SpecError``.
    """
    items: list[float | str]
    if isinstance(goals, str):
        items = [g for g in goals.split(",")]
        if not goals.strip():
            raise SpecError("no loss goal given", place="loss_goals")
    else:
        items = list(goals)
        if not items:
            raise SpecError("no loss goal given", place="loss_goals")
    out: list[float] = []
    for item in items:
        if isinstance(item, str):
            m = _PCT_RE.match(item)
            if not m:
                raise SpecError(f"loss goal {item.strip()!r} is not a percentage such as '0.1%'",
                                place="loss_goals")
            ratio = float(m.group(1)) / 100.0
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            ratio = float(item)
        else:
            raise SpecError(f"loss goal {item!r} is neither a percentage nor a ratio",
                            place="loss_goals")
        if math.isnan(ratio) or not 0.0 <= ratio < 1.0:
            raise SpecError(f"loss goal {item!r} is outside [0 %, 100 %)", place="loss_goals")
        out.append(ratio)
    return sorted(set(out))


def goal_labels(goals: Sequence[float]) -> list[str]:
    """``ndr`` for the lowest goal, ``pdr`` for the highest, ``goal1``... in between.
    A single goal is ``ndr`` when it is at most 0.001 %, else ``pdr``."""
    if len(goals) == 1:
        return ["ndr" if goals[0] <= 1e-5 else "pdr"]
    return ["ndr"] + [f"goal{i}" for i in range(1, len(goals) - 1)] + ["pdr"]


def positive(name: str, value: float | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) \
            or math.isnan(value) or value <= 0:
        raise SpecError(f"{name} must be a positive number, not {value!r}", place=name)


# ---------------------------------------------------------------------------------------------
# trials

@dataclass
class SearchTrial:
    """One trial of a search, with why it was run."""

    index: int
    purpose: str  # "max-rate", "warm-up", "search", "confirm", "curve", "latency"
    goal: str | None  # label of the goal it served
    trial: Trial

    @property
    def effective_pps(self) -> float:
        t = self.trial
        if t.offered_pps is None or t.generator_limited:
            return t.pair_sent_pps
        return t.offered_pps

    def to_dict(self) -> dict[str, Any]:
        t = self.trial
        return {"index": self.index, "purpose": self.purpose, "goal": self.goal,
                "offered_pps": t.offered_pps, "effective_pps": self.effective_pps,
                "sent_pps": t.sent_pps, "received_pps": t.received_pps, "sent": t.sent,
                "received": t.received, "lost": t.lost, "loss_ratio": t.loss_ratio,
                "duration_s": t.duration_s, "size": t.size,
                "window_s": t.window_s if t.window_s is not None else t.duration_s,
                "generator_limited": t.generator_limited,
                "measurement_limited": t.measurement_limited or False,
                "generator_bound": t.generator_bound,
                **({"receiver_drops": t.receiver_drops} if t.receiver_drops is not None else {}),
                **({"generator_behind": t.generator_behind,
                    "generator_skipped": t.generator_skipped}
                   if t.generator_behind is not None else {}),
                **({"first_hop_held_s": t.first_hop_held_s}
                   if t.first_hop_held_s is not None else {}),
                **({"cores": t.cores} if t.cores is not None else {}),
                **({"latency_us": dict(t.latency_us)} if t.latency_us else {}),
                **({"located": t.located} if t.located is not None else {}),
                **({"pairs": [{"pair": p.raw.get("pair"), "offered_pps": p.offered_pps,
                               "sent_pps": p.sent_pps, "received_pps": p.received_pps,
                               "sent": p.sent, "received": p.received,
                               "loss_ratio": p.loss_ratio,
                               "generator_limited": p.generator_limited,
                               "measurement_limited": p.measurement_limited or False}
                              for p in t.pairs]} if t.pairs else {})}


class TrialRunner:
    """Runs trials on a generator: pause between them, ramp if supported, budget, progress;
    a deciding trial that is measurement-limited is re-run (see the module's step 5)."""

    def __init__(self, gen: PacketGenerator, size: int | str, *, pause_s: float,
                 ramp_s: float | None, max_trials: int, progress: Progress | None,
                 status: Callable[[], dict[str, Any]] | None = None,
                 limited_retries: int = LIMITED_RETRIES):
        self.gen = gen
        self.size = size
        self.pause_s = pause_s
        self.ramp_s = ramp_s or None
        self.max_trials = max_trials
        self.progress = progress
        self.status = status
        self.limited_retries = limited_retries
        self.trials: list[SearchTrial] = []

    def run(self, rate: float | None, duration: float, purpose: str,
            goal: str | None = None) -> SearchTrial:
        """One trial; a deciding one (:data:`DECIDING`) that is measurement-limited is run
        again, at most ``limited_retries`` times (and :data:`.limits.MACHINE_RETRIES` more
        while only the machine's stalls limit it), then :class:`Unmeasurable` is raised."""
        attempts = [self._once(rate, duration, purpose, goal)]
        if purpose not in DECIDING:
            return attempts[0]
        while attempts[-1].trial.measurement_limited and \
                len(attempts) <= limits.retries_for(attempts[-1].trial, self.limited_retries):
            if self.pause_s > 0:
                time.sleep(self.pause_s)  # twice the pause: let a passing load go by
            attempts.append(self._once(rate, duration, purpose, goal))
        if attempts[-1].trial.measurement_limited:
            raise Unmeasurable(attempts)
        return attempts[-1]

    def _once(self, rate: float | None, duration: float, purpose: str,
              goal: str | None) -> SearchTrial:
        if len(self.trials) >= self.max_trials:
            raise _OutOfTrials()
        if self.trials and self.pause_s > 0:
            time.sleep(self.pause_s)
        t = self.gen.trial(rate, duration, self.size, ramp_s=self.ramp_s)
        if t.sent <= 0 and purpose not in DECIDING:  # a deciding one is limited: re-run
            raise MeasurementError(f"the generator sent nothing in a trial at "
                                   f"{'maximum rate' if rate is None else f'{rate:.0f} pps'}")
        st = SearchTrial(len(self.trials), purpose, goal, t)
        self.trials.append(st)
        if self.progress is not None:
            event = st.to_dict()
            if self.status is not None:
                event.update(self.status())
            self.progress(event)
        return st


class _OutOfTrials(Exception):
    pass


class Unmeasurable(Exception):
    """A rate whose trials stayed measurement-limited after their re-runs (``attempts``)."""

    def __init__(self, attempts: list[SearchTrial]):
        super().__init__(attempts[-1].trial.measurement_limited)
        self.attempts = attempts
        self.st = attempts[-1]

    @property
    def rate_pps(self) -> float:
        t = self.st.trial
        return t.offered_pps if t.offered_pps is not None else t.pair_sent_pps

    def new_top(self, measured_below: float = 0.0) -> float:
        """The range's top below this rate: the best of the attempts'
        :func:`.limits.measurable_below`, and at least ``measured_below`` (the highest rate
        below it that a trial did measure: one bad moment does not unmake it)."""
        best = max(limits.measurable_below(a.trial) for a in self.attempts)
        return min(max(best, measured_below), self.rate_pps)


# ---------------------------------------------------------------------------------------------
# the NDR/PDR search

@dataclass
class _Goal:
    label: str
    loss: float
    lo: float
    lo_trial: SearchTrial | None = None  # None: lo not verified by a trial
    hi: float | None = None
    hi_trial: SearchTrial | None = None
    done: bool = False
    below_min: bool = False
    converged: bool = False
    unresolved: bool = False  # a rate inside [lo, hi) stayed measurement-limited
    confirmed: bool | None = None
    retries: int = 0
    history: list[tuple[float, float | None]] = field(default_factory=list)

    def passes(self, st: SearchTrial) -> bool:
        return st.trial.loss_ratio <= self.loss


class NdrPdrSearch:
    """One NDR/PDR search; :meth:`run` returns the :class:`Measurement` (type ``ndr_pdr``).

    Use :func:`ndr_pdr` unless you need the object (e.g. to inspect ``trials`` afterwards).
    """

    def __init__(self, gen: PacketGenerator, size: int | str, *, duration: float = 10.0,
                 loss_goals: str | Iterable[float | str] = DEFAULT_LOSS_GOALS,
                 precision: float = 0.005, min_rate_pps: float | None = None,
                 max_rate_pps: float | None = None, warmup_s: float = 1.0,
                 ramp_s: float | None = 0.5, confirm: bool = True,
                 confirm_duration: float | None = None, max_confirm_retries: int = 3,
                 step_down: float = 0.02, pause_s: float = 0.5, max_trials: int = 80,
                 limited_retries: int = LIMITED_RETRIES, progress: Progress | None = None):
        positive("duration", duration)
        positive("min_rate_pps", min_rate_pps, allow_none=True)
        positive("max_rate_pps", max_rate_pps, allow_none=True)
        positive("confirm_duration", confirm_duration, allow_none=True)
        if not (isinstance(precision, (int, float)) and 0 < precision < 0.5):
            raise SpecError(f"precision must be a ratio in (0, 0.5), not {precision!r}",
                            place="precision")
        if not 0 < step_down < 1:
            raise SpecError(f"step_down must be in (0, 1), not {step_down!r}", place="step_down")
        if min_rate_pps is not None and max_rate_pps is not None and min_rate_pps >= max_rate_pps:
            raise SpecError("min_rate_pps must be below max_rate_pps", place="min_rate_pps")
        if warmup_s < 0 or pause_s < 0 or max_trials < 1 or max_confirm_retries < 0 \
                or not 0 <= limited_retries <= 10:
            raise SpecError("warmup_s and pause_s must be >= 0, max_trials >= 1, "
                            "max_confirm_retries >= 0, limited_retries in 0..10")
        if isinstance(size, int) and size <= 0:
            raise SpecError(f"frame size must be positive, not {size}", place="size")
        self.gen = gen
        self.size = size
        self.duration = float(duration)
        self.loss_goals = parse_loss_goals(loss_goals)
        self.precision = float(precision)
        self.min_rate_req = min_rate_pps
        self.max_rate_req = max_rate_pps
        self.warmup_s = warmup_s
        self.confirm = confirm
        self.confirm_duration = float(confirm_duration or duration)
        self.max_confirm_retries = max_confirm_retries
        self.step_down = step_down
        self.goals = [_Goal(label, loss, lo=0.0)
                      for label, loss in zip(goal_labels(self.loss_goals), self.loss_goals)]
        self.runner = TrialRunner(gen, size, pause_s=pause_s, ramp_s=ramp_s, max_trials=max_trials,
                              progress=progress, status=self._status,
                              limited_retries=limited_retries)
        self.upper = 0.0
        self.lower = 0.0
        self.upper_from_generator = False
        self.generator_max_pps: float | None = None
        self.out_of_trials = False
        #: the lowest rate whose trials stayed measurement-limited, and why
        self.not_measurable_above: float | None = None
        self.unmeasurable: list[dict[str, Any]] = []
        self.capped = False  # the range's top was cut below an unmeasurable rate
        self.ended_unmeasurable = False  # no measurable range was left

    # -- bookkeeping --------------------------------------------------------------------------

    def _status(self) -> dict[str, Any]:
        return {"intervals": {g.label: [g.lo, g.hi] for g in self.goals},
                "done": [g.label for g in self.goals if g.done]}

    def _evidence(self) -> list[SearchTrial]:
        return [s for s in self.runner.trials
                if s.purpose in DECIDING and not s.trial.measurement_limited]

    def _apply(self, st: SearchTrial) -> None:
        """Update every unfinished goal with one trial's outcome."""
        e = st.effective_pps
        for g in self.goals:
            if g.done:
                continue
            if g.passes(st):
                if e >= g.lo or g.lo_trial is None:
                    g.lo, g.lo_trial = max(e, g.lo if g.lo_trial else 0.0), st
                if g.hi is not None and e >= g.hi:  # contradicts an earlier fail: drop it
                    fails = [s for s in self._evidence() if not g.passes(s)
                             and s.effective_pps > e]
                    best = min(fails, key=lambda s: s.effective_pps, default=None)
                    g.hi, g.hi_trial = (best.effective_pps, best) if best else (None, None)
            else:
                if g.hi is None or e < g.hi:
                    g.hi, g.hi_trial = e, st
                if e <= g.lo:  # contradicts an earlier pass: fall back to a lower one
                    passes = [s for s in self._evidence() if g.passes(s)
                              and s.effective_pps < e]
                    best = max(passes, key=lambda s: s.effective_pps, default=None)
                    if best is not None:
                        g.lo, g.lo_trial = best.effective_pps, best
                    else:
                        g.lo, g.lo_trial = self.lower, None
            g.history.append((g.lo, g.hi))

    def _next_rate(self, g: _Goal) -> float | None:
        """The next rate to try for ``g``, or None when its interval is resolved."""
        if g.hi is None or self._no_fail_in_range(g):
            if g.lo_trial is not None and g.lo >= self.upper * (1 - self.precision):
                return None  # passes at the top of the range
            return self.upper
        if g.hi <= self.lower:
            g.below_min = True
            return None
        if g.hi - g.lo > self.precision * g.hi:
            return (g.lo + g.hi) / 2.0
        if g.lo_trial is None:
            return g.lo  # verify the bottom (the range minimum, or a stepped-down rate)
        return None

    # -- phases ----------------------------------------------------------------------------

    def _no_fail_in_range(self, g: _Goal) -> bool:
        """No measurable failure: none at all, or only above a top cut since."""
        return g.hi is None or g.hi > self.upper

    def _passed_at_top(self, g: _Goal) -> bool:
        return (self._no_fail_in_range(g) and g.lo_trial is not None
                and g.lo >= self.upper * (1 - self.precision))

    def _at_generator_top(self, g: _Goal) -> bool:
        """The goal passed at the top of a range that is the generator's own maximum, or that
        was cut below an unmeasurable rate: a lower bound."""
        return (self.upper_from_generator or self.capped) and self._passed_at_top(g)

    def _note_unmeasurable(self, u: Unmeasurable) -> None:
        rate = u.rate_pps
        self.unmeasurable.append({"rate_pps": rate, "trial": u.st.index,
                                  "reason": u.st.trial.measurement_limited})
        if self.not_measurable_above is None or rate < self.not_measurable_above:
            self.not_measurable_above = rate

    def _cap(self, u: Unmeasurable) -> bool:
        """Cut the range below a rate that stayed measurement-limited; False: nothing is left
        to measure (the search ends)."""
        self._note_unmeasurable(u)
        measured = [s.effective_pps for s in self._evidence() if s.effective_pps < u.rate_pps]
        top = u.new_top(max(measured, default=0.0))
        if len(self.unmeasurable) > MAX_CAPS or top <= self.lower:
            self.ended_unmeasurable = True
            for g in self.goals:
                g.done = True
            return False
        self.upper = min(self.upper, top)
        self.capped = True
        return True

    def _range(self) -> None:
        if self.max_rate_req is None:
            st = self.runner.run(None, self.duration, "max-rate")
            self.generator_max_pps = st.trial.pair_sent_pps
            self.upper = st.trial.pair_sent_pps
            self.upper_from_generator = True
            if st.trial.measurement_limited:  # e.g. the receiver dropped: start below that
                self.upper = limits.measurable_below(st.trial)
                self.capped = True
                self.not_measurable_above = st.trial.pair_sent_pps
                self.unmeasurable.append({"rate_pps": st.trial.pair_sent_pps, "trial": st.index,
                                          "reason": st.trial.measurement_limited})
        else:
            self.upper = float(self.max_rate_req)
            if self.warmup_s > 0:
                self.runner.run(self.upper / 10.0, self.warmup_s, "warm-up")
        self.lower = float(self.min_rate_req) if self.min_rate_req else self.upper / 1000.0
        if self.lower >= self.upper:
            raise SpecError(f"min_rate_pps {self.lower:.0f} is not below the top of the range "
                            f"{self.upper:.0f} pps", place="min_rate_pps")
        for g in self.goals:
            g.lo = self.lower

    def _search_goal(self, g: _Goal) -> None:
        while not g.done:
            rate = self._next_rate(g)
            if rate is not None:
                self._apply(self.runner.run(rate, self.duration, "search", g.label))
                continue
            g.converged = True
            if g.below_min or g.lo_trial is None or not self.confirm \
                    or self._at_generator_top(g):
                g.done = True
                break
            lo_t = g.lo_trial
            if lo_t.purpose == "confirm" and lo_t.trial.duration_s >= self.confirm_duration:
                g.confirmed = True  # another goal's confirmation trial already passed here
                g.done = True
                break
            st = self.runner.run(g.lo, self.confirm_duration, "confirm", g.label)
            ok = g.passes(st)
            self._apply(st)
            if ok:
                g.confirmed = True
                g.done = True
                break
            g.retries += 1
            g.converged = False
            if g.retries > self.max_confirm_retries:
                g.confirmed = False
                g.done = True
                break
            # step down below the rate that failed confirmation and search again
            failed = st.effective_pps
            stepped = max(self.lower, failed * (1 - self.step_down * 2 ** (g.retries - 1)))
            if stepped < g.lo or g.lo_trial is None or g.lo >= failed:
                g.lo, g.lo_trial = stepped, None

    def run(self) -> Measurement:
        t0 = time.monotonic()
        try:
            self._range()
            for g in self.goals:
                while not g.done:
                    try:
                        self._search_goal(g)
                    except Unmeasurable as u:
                        if g.hi is not None and u.rate_pps < g.hi:
                            self._note_unmeasurable(u)
                            g.unresolved = g.done = True  # inside its interval: keep lo
                        elif not self._cap(u):
                            break
        except _OutOfTrials:
            self.out_of_trials = True
            for g in self.goals:
                g.done = True
        return self._result(time.monotonic() - t0)

    # -- result --------------------------------------------------------------------------------

    def _goal_result(self, g: _Goal) -> dict[str, Any]:
        at_top = self._passed_at_top(g)
        deciding = [s for s in (g.lo_trial, g.hi_trial) if s is not None]
        unfinished = self.ended_unmeasurable and not g.converged
        lower_bound = self._at_generator_top(g) or (unfinished and g.lo_trial is not None)
        gen_limited = lower_bound or any(s.trial.generator_limited for s in deciding)
        rate = g.lo if g.lo_trial is not None and not g.below_min else None
        return {
            "label": g.label, "loss_goal": g.loss, "loss_goal_pct": g.loss * 100.0,
            "rate_pps": rate,
            "chain_rate_pps": None if lower_bound else rate,
            "interval_pps": [g.lo, g.hi],
            "converged": g.converged and not self.out_of_trials and not g.unresolved,
            "unresolved": g.unresolved,
            "confirmed": g.confirmed,
            "confirm_retries": g.retries,
            "generator_limited": gen_limited,
            "lower_bound": lower_bound,
            "at_max_rate": at_top and not self.upper_from_generator and not self.capped,
            "below_min": g.below_min,
            "lo_trial": g.lo_trial.index if g.lo_trial else None,
            "hi_trial": g.hi_trial.index if g.hi_trial else None,
        }

    def _result(self, elapsed: float) -> Measurement:
        goals = [self._goal_result(g) for g in self.goals]
        by_label = {r["label"]: r for r in goals}
        metrics: dict[str, float | None] = {
            "generator_limited": any(r["generator_limited"] for r in goals),
            "trials": len(self.runner.trials),
            "search_time_s": elapsed,
            "traffic_time_s": sum(s.trial.duration_s for s in self.runner.trials),
            "generator_max_pps": self.generator_max_pps,
            "range_max_pps": self.upper,
            "measurement_limited_trials": sum(1 for s in self.runner.trials
                                              if s.trial.measurement_limited),
            "not_measurable_above_pps": self.not_measurable_above,
        }
        for r in goals:
            metrics[f"{r['label']}_pps"] = r["chain_rate_pps"]
            if r["lower_bound"]:
                metrics[f"{r['label']}_lower_bound_pps"] = r["rate_pps"]
        params = {
            "size": self.size, "duration": self.duration, "loss_goals": self.loss_goals,
            "precision": self.precision, "min_rate_pps": self.min_rate_req,
            "max_rate_pps": self.max_rate_req, "warmup_s": self.warmup_s,
            "ramp_s": self.runner.ramp_s, "confirm": self.confirm,
            "confirm_duration": self.confirm_duration,
            "max_confirm_retries": self.max_confirm_retries, "step_down": self.step_down,
            "pause_s": self.runner.pause_s, "max_trials": self.runner.max_trials,
            "limited_retries": self.runner.limited_retries,
            "generator": type(self.gen).__name__,
        }
        trials = [s.to_dict() for s in self.runner.trials]
        extra = {
            "ndr_pps": by_label["ndr"]["chain_rate_pps"] if "ndr" in by_label else None,
            "pdr_pps": by_label["pdr"]["chain_rate_pps"] if "pdr" in by_label else None,
            "generator_limited": bool(metrics["generator_limited"]),
            "converged": all(r["converged"] for r in goals),
            "goals": goals,
            "trials": trials,
            "not_measurable_above_pps": self.not_measurable_above,
            "search": {"range_pps": [self.lower, self.upper],
                       "range_from_generator": self.upper_from_generator,
                       "out_of_trials": self.out_of_trials,
                       "unmeasurable": self.unmeasurable,
                       "ended_unmeasurable": self.ended_unmeasurable},
        }
        return Measurement(type="ndr_pdr", params=params, metrics=metrics,  # type: ignore[arg-type]  # None: not measured, dropped by Measurement
                           environment=environment(), cpu={},
                           raw={"generator_output": [s.trial.raw for s in self.runner.trials]},
                           extra=extra)


def ndr_pdr(gen: PacketGenerator, size: int | str, **kw: Any) -> Measurement:
    """Search the rates meeting each loss goal; see :class:`NdrPdrSearch` for the options."""
    return NdrPdrSearch(gen, size, **kw).run()


# ---------------------------------------------------------------------------------------------
# rate curve and latency

def rate_curve(gen: PacketGenerator, rates: Iterable[float], size: int | str, duration: float,
               *, pause_s: float = 0.5, ramp_s: float | None = 0.5,
               progress: Progress | None = None) -> Measurement:
    """One trial per offered rate: the offered-vs-received curve (type ``rate_curve``).

    Each point has ``offered_pps``, ``sent_pps``, ``received_pps``, ``loss_ratio`` and
    ``generator_limited``; metrics give the highest received rate and whether any point was
    generator-limited (such a point shows the generator, not the chain).
    """
    rates = [float(r) if not isinstance(r, bool) else r for r in rates]
    if not rates:
        raise SpecError("no rate given", place="rates")
    for r in rates:
        positive("rate", r)
    positive("duration", duration)
    runner = TrialRunner(gen, size, pause_s=pause_s, ramp_s=ramp_s, max_trials=len(rates),
                     progress=progress)
    points = []
    for r in rates:
        st = runner.run(r, duration, "curve")
        points.append(st.to_dict())
    best = max(points, key=lambda p: p["received_pps"])
    metrics = {
        "max_received_pps": best["received_pps"],
        "max_received_at_offered_pps": best["offered_pps"],
        "points": len(points),
        "generator_limited": any(p["generator_limited"] for p in points),
    }
    return Measurement(type="rate_curve",
                       params={"rates_pps": rates, "size": size, "duration": duration,
                               "pause_s": pause_s, "ramp_s": runner.ramp_s,
                               "generator": type(gen).__name__},
                       metrics=metrics, environment=environment(),
                       raw={"generator_output": [s.trial.raw for s in runner.trials]},
                       extra={"points": points})


def metric_name(pct: str) -> str:
    return "latency_" + pct.replace(".", "_") + "_us"  # p99.9 -> latency_p99_9_us


def latency(gen: PacketGenerator, rate: float, size: int | str, duration: float, *,
            ramp_s: float | None = 0.5) -> Measurement:
    """Latency percentiles (as the generator reports them, in µs) at one offered rate.

    Metrics: ``latency_p50_us``, ``latency_p90_us``, ``latency_p99_us``, ``latency_p99_9_us``,
    ``latency_max_us`` (whichever the generator measured), plus loss and ``generator_limited``.
    """
    positive("rate", rate)
    positive("duration", duration)
    runner = TrialRunner(gen, size, pause_s=0.0, ramp_s=ramp_s, max_trials=1, progress=None)
    st = runner.run(rate, duration, "latency")
    t = st.trial
    if not t.latency_us:
        raise MeasurementError(f"{type(gen).__name__} reported no latency")
    metrics: dict[str, float] = {metric_name(k): v for k, v in t.latency_us.items()}
    metrics.update(loss_ratio=t.loss_ratio, sent_pps=t.sent_pps, received_pps=t.received_pps,
                   generator_limited=t.generator_limited,
                   measurement_limited=bool(t.measurement_limited))
    return Measurement(type="latency",
                       params={"rate_pps": rate, "size": size, "duration": duration,
                               "ramp_s": runner.ramp_s, "generator": type(gen).__name__},
                       metrics=metrics, environment=environment(), raw=t.raw,
                       extra={"trial": st.to_dict(), "generator_limited": t.generator_limited,
                              "measurement_limited": t.measurement_limited or False,
                              "latency_source": t.latency_source})


def chain_cpu_per_packet(extra: dict[str, Any]) -> tuple[float, str] | None:
    """The chain's CPU microseconds per packet received in the trial that set a search's NDR
    (its fastest search or confirm trial without loss), from a search's ``extra`` (this
    module's or MLRsearch's: both keep every trial with its ``cores``), and what it was read
    from (:func:`trial_cpu_per_packet`).  None without such a trial."""
    lossless = [t for t in extra.get("trials", []) if t.get("purpose") in ("search", "confirm")
                and not t.get("lost") and t.get("received") and t.get("cores")]
    if not lossless:
        return None
    return trial_cpu_per_packet(max(lossless, key=lambda t: t["effective_pps"]))


def trial_cpu_per_packet(t: dict[str, Any]) -> tuple[float, str] | None:
    """The chain's CPU microseconds per packet of one trial (a trial's dict, with ``cores``)
    and what it was read from: ``"threads"``, the run time of the chain's own threads over
    the frames received in the same span (``cores.chain.threads_cpu_s`` and
    ``threads_frames``, :class:`~.wrappers.CoreWatchedGenerator`; ``received`` when a trial
    has no ``threads_frames``), else ``"core"``, the chain core's busy time over the window
    (which counts other programs' time there too).  None without either."""
    chain = (t.get("cores") or {}).get("chain", {})
    if chain.get("threads_cpu_s") is not None:
        frames = chain.get("threads_frames") or t.get("received")
        return (chain["threads_cpu_s"] * 1e6 / frames, "threads") if frames else None
    if chain.get("busy_pct") is None or not t.get("received"):
        return None
    return chain["busy_pct"] / 100 * t["window_s"] * 1e6 / t["received"], "core"
