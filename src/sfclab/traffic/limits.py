"""Does a trial measure the chain, or the measuring tools?  The checks a trial makes of itself.

A trial is *measurement-limited* when something other than the system under test set its
figures.  The reasons, each one row of :data:`CHECKS` (a check is a function of the trial's
facts returning a reason or None), in the order they are reported:

=====================  ==========================================================================
check                  the trial is limited when
=====================  ==========================================================================
``generator``          the generator sent below ``GENERATOR_TOLERANCE`` (98 %) of the offered
                       rate over the measured window: the chain was never offered the rate
``generator_over``     it sent above ``2 - GENERATOR_TOLERANCE`` (102 %) of it (a sender that
                       fell behind and caught up in a burst): the chain was offered more
``first_hop_held``     the chain's first hop (its NAPI thread, pinned to the chain's core) was
                       kept from running for ``HELD_MIN_S`` (1 ms) or more once it had work
                       (its core not run by the machine), and the trial lost no more frames
                       than arrived at the offered rate meanwhile: a chain's first hop in XDP
                       holds 256 frames (the veth's ring), 2 ms at 128 kpps
``receiver_drops``     the receiver dropped frames itself (a socket sink's full receive buffer,
                       ``SO_RXQ_OVFL``; the kernel sink's own drop count): loss that is the
                       receiver's, not the chain's
``receiver_saturated`` the receiver says it could not keep up (its own busy-core test)
=====================  ==========================================================================

The facts come from the generator (``Trial.sent_pps``, ``receiver_drops``,
``receiver_saturated``) and the first hop's stall meter (``first_hop_held_s``,
:mod:`sfclab.kernel.stall`); absent facts (``None``) do not limit.  The reason is one sentence with
the numbers (``"generator sent 912,000 of 1,000,000 pps offered (91.2 %, below 98 %)"``); several
reasons are joined by ``"; "``.

Apart from these, ``generator_bound`` warns that the offered rate is above
``CEILING_SHARE`` (90 %) of the generator-to-receiver ceiling calibrated for the frame size
(:mod:`.calibrate`): such a trial may have reached its rate, but close to what the tools
themselves can do.  It is a warning, not a limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

#: a generator that sent less than this share of the offered rate did not offer it
GENERATOR_TOLERANCE = 0.98
#: an offered rate above this share of the calibrated ceiling is ``generator_bound``
CEILING_SHARE = 0.90
#: below a limited trial, the rate worth trying next: this share of what the tools managed
BACKOFF = 0.95
#: a first hop kept from running this long is its machine's stall, not a scheduler's ordinary
#: wake-up (here 23 us typical, 0.5 ms at the 99.9th percentile from one core to another)
HELD_MIN_S = 0.001


class TrialFacts(Protocol):
    """What the checks read of a trial (a :class:`~sfclab.traffic.generator.Trial`)."""

    offered_pps: float | None
    duration_s: float
    window_s: float | None
    sent: int
    sent_pps: float
    receiver_drops: int | None
    receiver_saturated: bool | None
    first_hop_held_s: float | None

    @property
    def lost(self) -> int:
        """Frames sent inside the window that did not arrive."""

    @property
    def pairs(self) -> Sequence[TrialFacts] | None:
        """Several sender -> receiver pairs' own trials (the totals above are their sums)."""


def generator_short(t: TrialFacts) -> str | None:
    if t.offered_pps is None or t.offered_pps <= 0:
        return None  # "as fast as possible": nothing was promised
    share = t.sent_pps / t.offered_pps
    if share >= GENERATOR_TOLERANCE:
        return None
    return (f"generator sent {t.sent_pps:,.0f} of {t.offered_pps:,.0f} pps offered "
            f"({share * 100:.1f} %, below {GENERATOR_TOLERANCE * 100:.0f} %)")


def generator_over(t: TrialFacts) -> str | None:
    if t.offered_pps is None or t.offered_pps <= 0:
        return None
    share = t.sent_pps / t.offered_pps
    if share <= 2 - GENERATOR_TOLERANCE:
        return None
    return (f"generator sent {t.sent_pps:,.0f} of {t.offered_pps:,.0f} pps offered "
            f"({share * 100:.1f} %, above {(2 - GENERATOR_TOLERANCE) * 100:.0f} %)")


def first_hop_held(t: TrialFacts) -> str | None:
    held = t.first_hop_held_s
    if held is None or held < HELD_MIN_S or not t.offered_pps or t.lost <= 0:
        return None
    meanwhile = t.offered_pps * held
    if t.lost > meanwhile:
        return None
    return (f"the machine did not run the chain's first hop for {held * 1e3:.1f} ms once it had "
            f"work; the {t.lost:,} frames lost are no more than the {meanwhile:,.0f} that "
            f"arrived meanwhile")


def receiver_dropped(t: TrialFacts) -> str | None:
    if not t.receiver_drops:
        return None
    return f"receiver dropped {t.receiver_drops:,} frames itself"


def receiver_saturated(t: TrialFacts) -> str | None:
    return "receiver saturated" if t.receiver_saturated else None


#: check name -> function; the reasons are reported in this order
CHECKS: dict[str, Callable[[TrialFacts], str | None]] = {
    "generator": generator_short,
    "generator_over": generator_over,
    "first_hop_held": first_hop_held,
    "receiver_drops": receiver_dropped,
    "receiver_saturated": receiver_saturated,
}


def reasons(t: TrialFacts) -> list[str]:
    """Every reason the trial is measurement-limited (empty: it measured the chain)."""
    return [r for check in CHECKS.values() if (r := check(t)) is not None]


#: the checks that blame the machine, not the tools: a trial limited by these alone is re-run
#: ``MACHINE_RETRIES`` more times (its stalls come and go; they are not the rate's)
MACHINE_CHECKS = ("first_hop_held",)
MACHINE_RETRIES = 6


def machine_only(t: TrialFacts) -> bool:
    """Limited, and only by the machine's stalls (in every pair that is limited)."""
    trials = list(t.pairs) if t.pairs else [t]
    found = [(name, r) for one in trials for name, check in CHECKS.items()
             if (r := check(one)) is not None]
    return bool(found) and all(name in MACHINE_CHECKS for name, _ in found)


def retries_for(t: TrialFacts, limited_retries: int) -> int:
    """How many times a deciding trial limited as ``t`` is may be re-run in all."""
    return limited_retries + (MACHINE_RETRIES if machine_only(t) else 0)


def limited_reason(t: TrialFacts) -> str | None:
    """The reasons as one string, or None for a trial that measured the chain."""
    found = reasons(t)
    return "; ".join(found) if found else None


def measurable_below(t: TrialFacts) -> float:
    """The rate worth trying below a limited trial: ``BACKOFF`` of the least of the offered
    rate, what the generator sent and what the receiver took (sent less its own drops).

    With several sender -> receiver pairs the offered rate is each pair's while the trial's
    totals are the pairs' sums: the least of the pairs' own figures is the rate worth trying
    (three senders sharing one core that each sent 177 of 407 kpps offered give 168 kpps a
    pair, not 95 % of 407)."""
    if t.pairs:
        return min(measurable_below(p) for p in t.pairs)
    rates = [t.sent_pps]
    if t.offered_pps is not None:
        rates.append(t.offered_pps)
    window = t.window_s or t.duration_s
    if t.receiver_drops and window > 0:
        rates.append(max(t.sent - t.receiver_drops, 0) / window)
    return BACKOFF * min(rates)


def generator_bound(offered_pps: float | None, ceiling_pps: float | None) -> bool:
    """Offered above ``CEILING_SHARE`` of the calibrated ceiling (False without a ceiling)."""
    if ceiling_pps is None or ceiling_pps <= 0:
        return False
    if offered_pps is None:
        return True  # as fast as possible is the ceiling itself
    return offered_pps > CEILING_SHARE * ceiling_pps
