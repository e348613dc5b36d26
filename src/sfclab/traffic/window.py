"""The measured window of a native trial: the span of send time over which its rates hold.

A trial's sender climbs from 0 to the asked rate over its ramp, then sends at that rate until the
end of sending; the sink keeps counting through the drain that follows.  Dividing everything the
sink counted by any one span overstates a saturated element: a shaper passes its full rate from
the ramp's middle through the drain, longer than the span the sender offered its rate in (a 1 s
trial read 5.07 kpps through a 3.30 kpps shaper).  So a trial's figures come from one window of
*send time*, ``[end of ramp, end of sending]``, in which the sender ran at the asked rate:

- the sender stamps each probe with its send time and marks the probes it stamps inside the window
  (``PROBE_MAGIC_WINDOW``, include/sfcgen_shared.h); it reports how many it sent so
  (``sent_window``) and the window's length (``window_s``, CLOCK_MONOTONIC, the same clock the
  probes carry).  Offered rate = ``sent_window / window_s``.
- the sink (socket or XDP) counts the distinct marked probes that arrived (``received_window``),
  whenever they arrive (a queue may hold them into the drain): the loss ratio is
  ``1 - received_window / sent_window``, exact for the window's probes (a probe lost in the ramp
  neither dilutes nor adds to it).
- the received rate is the window's received probes over the same window:
  ``received_window / window_s`` (RFC 2544: frames received over the offered duration).  Every
  figure of the trial is over this one interval, so ``received_pps <= sent_pps`` and
  ``received_pps / sent_pps = received / sent = 1 - loss_ratio`` hold exactly.  (Before, the
  received rate was the arrivals' own span, ``rx_window_s``: under overload a starved sink's
  arrivals bunch up, the span shrinks, and the rate read up to 40 % above received / window,
  disagreeing with the loss.)  One limit stays, and is the element's, not the arithmetic's: a
  queue that grows during the window (an HTB leaf of 1000 packets still filling at the ramp's
  end) lets through more of the window's probes than its rate times the window, by the growth
  over the window (1000 packets over a 0.5 s window: up to 2 kpps); a longer trial shrinks it.
  The arrivals' span stays in the sink's report (``rx_window_s``) for re-analysis.
The whole trial's counts (ramp and drain included) stay in the trial as ``sent_total`` and
``received_total``: they are what kernel drop counters (a loss locator) see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import MeasurementError


@dataclass(frozen=True)
class WindowCounts:
    """Probes sent and received (distinct) inside the measured window and its length; the
    arrivals over the span from the window's first to its latest probe are kept apart
    (``rx_received``, ``rx_window_s``), never divided into a rate."""

    sent: int
    received: int
    window_s: float
    rx_received: int = 0
    rx_window_s: float = 0.0

    @property
    def sent_pps(self) -> float:
        return self.sent / self.window_s

    @property
    def received_pps(self) -> float:
        return self.received / self.window_s


def window_counts(sender: Mapping[str, Any], sink: Mapping[str, Any]) -> WindowCounts:
    """The window's counts from the sender's ``sent`` report and the sink's snapshot; a
    :class:`MeasurementError` when either lacks them (an sfcgen built before the window) or
    the window is empty (the ramp took the whole trial)."""
    try:
        sent = int(sender["sent_window"])
        window_s = float(sender["window_s"])
        received = int(sink["received_window"])
        rx_received = int(sink.get("rx_window_received", 0))
        rx_window_s = float(sink.get("rx_window_s", 0.0))
    except (KeyError, TypeError, ValueError) as e:
        raise MeasurementError(
            f"sfcgen reported no measured window ({e}): rebuild it (make -C native)") from e
    if window_s <= 0:
        raise MeasurementError(
            f"the trial's measured window is empty (window_s={window_s}): the ramp must end "
            "before the sending does")
    return WindowCounts(sent=sent, received=min(received, sent), window_s=window_s,
                        rx_received=rx_received, rx_window_s=rx_window_s)
