"""Calibration: what the generator and the receiver can do by themselves, before any chain.

A *calibration* measures, over a direct link between two nodes, the generator-to-receiver
*ceiling* (the packet rate a max-rate trial delivers, per frame size) and the *latency floor*
(latency percentiles at an idle rate, ``IDLE_SHARE`` of the smallest size's ceiling, at most
``IDLE_MAX_PPS``), with the same core layout, engine and sink as every packet measurement.
It runs in a temporary two-node lab of its own (``cal<hex>``: ``chain: {length: 2}``, removed
afterwards whatever happens), or between two nodes of a running lab when one is named.

It is stored as JSON in the state directory (``<state>/calibration.json``, one per machine)::

    {"version": 1, "measured_at": "2026-11-24T12:00:00Z", "host": ..., "kernel": ...,
     "lab": "temporary" | name, "temporary_lab": "cal<hex>", "from": "src", "to": "dst", "engine": ..., "sink": ...,
     "duration_s": 1.0,
     "sizes": {"64": {"ceiling_pps", "sent_pps", "received_pps", "measurement_limited"}, ...},
     "latency_floor_us": {"rate_pps", "size", "p50", "p90", "p99", "p99.9", "max"}}

Measurements read it (:func:`stored`, only when host and kernel match) for
:func:`ceiling_for` a frame size: a trial offered above 90 % of it is ``generator_bound``
(:mod:`.limits`), and the measurement's ``environment.calibration`` carries it; experiments
calibrate once per invocation and keep it in their environment record.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..realize import lifecycle
from ..realize.kinds import load_lab_dict
from ..realize.state import state_root
from ..spec.measurement import RateRequest
from .environment import environment
from .measure import ETH_OVERHEAD, MIN_FRAME, Endpoints, PacketSetup

VERSION = 1
FILE = "calibration.json"
#: the frame sizes calibrated when none are asked for (RFC 2544's smallest, a middle, the largest)
DEFAULT_SIZES = (64, 512, 1518)
#: at most this many sizes in one calibration
MAX_SIZES = 16
#: the temporary lab's MTU (the plan's default) and so its largest frame
TEMP_MTU = 1500
#: the latency floor is measured at this share of the smallest size's ceiling ...
IDLE_SHARE = 0.05
#: ... and at most this rate
IDLE_MAX_PPS = 10_000.0
DEFAULT_DURATION_S = 1.0


@dataclass
class CalibrationRequest:
    """What to calibrate: frame sizes, and where (None: a temporary lab)."""

    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    lab: str | None = None
    src: str = "src"
    dst: str = "dst"
    duration_s: float = DEFAULT_DURATION_S


def parse_sizes(text: str | None) -> list[int]:
    """``"64,512,1518"`` -> sorted distinct ints (the bounds against the MTU come later)."""
    if text is None:
        return list(DEFAULT_SIZES)
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise SpecError("expected frame sizes such as 64,512,1518, got none", place="--sizes")
    if len(items) > MAX_SIZES:
        raise SpecError(f"expected at most {MAX_SIZES} frame sizes, got {len(items)}",
                        place="--sizes")
    out = set()
    for x in items:
        if not x.isdigit():
            raise SpecError(f"expected a frame size in bytes, got {x!r}", place="--sizes")
        out.add(int(x))
    return sorted(out)


def check_sizes(sizes: list[int], mtu: int, where: str) -> None:
    top = mtu + ETH_OVERHEAD
    bad = [s for s in sizes if not MIN_FRAME <= s <= top]
    if bad:
        raise SpecError(f"expected frame sizes from {MIN_FRAME} to {top} bytes ({where} MTU "
                        f"{mtu} + Ethernet), got {', '.join(map(str, bad))}", place="--sizes")


def state_file() -> Path:
    return state_root() / FILE


def calibrate(req: CalibrationRequest) -> dict[str, Any]:
    """Measure and store a calibration (see the module docstring); returns it.  Bad input
    (sizes, a lab without the nodes) is a ``SpecError``/``LabError`` before anything is made."""
    if not 0 < req.duration_s <= 60:
        raise SpecError(f"expected a trial duration in (0, 60] s, got {req.duration_s:g}",
                        place="--duration")
    if req.lab is not None:
        _state, plan = lifecycle.load_plan(req.lab)
        names = sorted(n.node for n in plan.namespaces)
        for node, option in ((req.src, "--from"), (req.dst, "--to")):
            if node not in names:
                raise SpecError(f"expected a node of lab '{req.lab}' ({', '.join(names)}), "
                                f"got '{node}'", place=option)
        ends = Endpoints(req.lab, req.src, req.dst)
        check_sizes(req.sizes, ends.mtu, f"path {req.src} -> {req.dst}'s")
        result = _measure(req.lab, req)
    else:
        check_sizes(req.sizes, TEMP_MTU, "the direct link's")
        name = f"cal{secrets.token_hex(3)}"
        lifecycle.up(load_lab_dict({"name": name, "chain": {"length": 2}}, "calibration lab"))
        try:
            result = _measure(name, CalibrationRequest(req.sizes, name, "src", "dst",
                                                       req.duration_s))
        finally:
            lifecycle.down(name)
        result.update(lab="temporary", temporary_lab=name)
    save(result)
    return result


def _measure(lab: str, req: CalibrationRequest) -> dict[str, Any]:
    r = RateRequest.model_validate({"type": "rate", "from": req.src, "to": req.dst,
                                    "size": req.sizes[0], "rates": ["max"],
                                    "duration": req.duration_s})
    env = environment()
    sizes: dict[str, Any] = {}
    with PacketSetup(lab, r, calibrated=False) as setup:
        assert setup.gen is not None
        for size in req.sizes:
            t = setup.gen.trial(None, req.duration_s, size)
            sizes[str(size)] = {"ceiling_pps": t.received_pps, "sent_pps": t.sent_pps,
                                "received_pps": t.received_pps,
                                "measurement_limited": t.measurement_limited or False}
        idle = min(IDLE_MAX_PPS, IDLE_SHARE * sizes[str(req.sizes[0])]["ceiling_pps"])
        idle = max(idle, 100.0)
        t = setup.gen.trial(idle, req.duration_s, req.sizes[0])
        floor: dict[str, Any] = {"rate_pps": idle, "size": req.sizes[0], **t.latency_us}
        where = setup.describe()
    return {"version": VERSION,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": env["hostname"], "kernel": env["kernel"]["release"],
            "lab": lab, "from": req.src, "to": req.dst, "engine": r.engine, "sink": r.sink,
            "duration_s": req.duration_s, "cores": where.get("cores"),
            "sizes": sizes, "latency_floor_us": floor}


def save(cal: dict[str, Any]) -> Path:
    """Write the calibration to the state directory (atomically: a temporary file renamed)."""
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(cal, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def stored() -> dict[str, Any] | None:
    """The stored calibration of this machine (host and kernel as now), or None."""
    try:
        cal = json.loads(state_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(cal, dict) or cal.get("version") != VERSION:
        return None
    env = environment()
    if cal.get("host") != env["hostname"] or cal.get("kernel") != env["kernel"]["release"]:
        return None
    return cal


def ceiling_for(cal: dict[str, Any] | None, size: int | str) -> float | None:
    """The ceiling for a frame size: calibrated, or interpolated between the calibrated sizes
    around it; None outside them, for imix, or without a calibration."""
    if not cal or not isinstance(size, int):
        return None
    points = sorted((int(k), float(v["ceiling_pps"])) for k, v in cal.get("sizes", {}).items())
    for (s0, c0), (s1, c1) in zip(points, points[1:]):
        if s0 <= size <= s1:
            return c0 + (c1 - c0) * (size - s0) / (s1 - s0)
    return next((c for s, c in points if s == size), None)


def summary(cal: dict[str, Any]) -> dict[str, Any]:
    """What a measurement's environment keeps of a calibration."""
    return {k: cal.get(k) for k in ("measured_at", "lab", "engine", "sink", "sizes",
                                    "latency_floor_us")}
