"""Each host runtime's operations on a running lab, by the runtime's name
(:data:`sfclab.realize.runtime.RUNTIMES` has the same names), and :func:`live_for`, the
lookup every operation on a running lab starts from."""

from __future__ import annotations

from ...realize.runtime import kind_for
from ...realize.state import LabState
from .base import LiveRuntime
from .kubernetes import KubeLive
from .local import LocalLive
from .ssh import SshLive

#: each runtime's operations on a running lab, by its name
LIVE: dict[str, type[LiveRuntime]] = {"local": LocalLive, "ssh": SshLive,
                                      "kubernetes": KubeLive}


def live_for(state: LabState) -> LiveRuntime:
    """The runtime of running lab ``state`` (:func:`sfclab.realize.runtime.kind_for`)."""
    return LIVE[kind_for(state)](state)
