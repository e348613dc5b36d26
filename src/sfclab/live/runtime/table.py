"""Each host runtime's operations on a running lab, by the runtime's name
(:data:`sfclab.realize.runtime.RUNTIMES` has the same names), and :func:`live_for`, the
lookup every operation on a running lab starts from."""

from __future__ import annotations

from ...realize.runtime import kind_for
from ...realize.runtime.rows import Rows
from ...realize.state import LabState
from .base import LiveRuntime


def _local() -> type[LiveRuntime]:
    from .local import LocalLive
    return LocalLive


def _ssh() -> type[LiveRuntime]:
    from .ssh import SshLive
    return SshLive


def _kubernetes() -> type[LiveRuntime]:
    from .kubernetes import KubeLive
    return KubeLive


#: each runtime's operations on a running lab, by its name, each row's module loaded when the
#: row is first read (:mod:`sfclab.realize.runtime.rows`)
LIVE: Rows[type[LiveRuntime]] = Rows({"local": _local, "ssh": _ssh, "kubernetes": _kubernetes})


def live_for(state: LabState) -> LiveRuntime:
    """The runtime of running lab ``state`` (:func:`sfclab.realize.runtime.kind_for`)."""
    return LIVE[kind_for(state)](state)
