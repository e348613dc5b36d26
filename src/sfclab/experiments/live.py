"""The real ``lab_up``, ``measure`` and ``calibration`` the experiment runner is given (its tests
use fakes).

``lab_up(lab_dict)`` builds the variant as a real lab and removes it on exit, whatever happens.
A lab of the same name left by an earlier ``sfclab run`` that was killed (its journal says the
process that made it is gone) is removed first, by its journal, so a resumed experiment does not
stop on "already up"; a lab someone else has up is never touched: that is an error.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..api import Lab
from ..errors import LabError
from ..realize import lifecycle
from ..realize.state import LabState, pid_alive
from ..spec import measurement as request
from ..traffic import measure as measurements
from ..traffic.result import Measurement

OWNER_KEY = "experiment_pid"


@contextlib.contextmanager
def lab_up(lab_dict: dict[str, Any]) -> Iterator[Lab]:
    lab = Lab.from_dict(lab_dict, source="experiment lab")
    state = LabState(lab.name)
    if state.exists:
        owner = state.meta().get(OWNER_KEY)
        if owner and not pid_alive(owner):
            lifecycle.down(lab.name)
        else:
            raise LabError(f"lab '{lab.name}' is already up and not left by a killed experiment;"
                           f" run 'sfclab down {lab.name}' or rename the experiment's lab")
    lab.up()
    try:
        state.set_meta(**{OWNER_KEY: os.getpid()})
        yield lab
    finally:
        lab.down()


def measure(lab: Lab, spec: dict[str, Any]) -> Measurement:
    """Run the measurement an experiment file describes (``measure:``) in a running lab."""
    return measurements.run(lab.name, request.validate(spec))


#: measurement types that run the packet generator (and so want its calibration)
PACKET_TYPES = ("rate", "ndr", "latency")


def calibration(measures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Calibrate the generator once for an experiment's packet measurements (their frame sizes
    that fit a direct link's MTU), in a temporary lab; None when it has none."""
    from ..traffic import calibrate  # light start-up: only experiments that measure packets

    packet = [m for m in measures if m.get("type") in PACKET_TYPES]
    if not packet:
        return None
    top = calibrate.TEMP_MTU + 18
    sizes = sorted({int(m.get("size", 64)) for m in packet
                    if isinstance(m.get("size", 64), int) and m.get("size", 64) <= top})
    return calibrate.calibrate(calibrate.CalibrationRequest(sizes=sizes or [64]))
