"""``shaper``: a router whose egress is rate-limited by HTB or TBF.

Lab file keys::

    rate: 50mbit           # tc units: bit kbit mbit gbit tbit (bps kbps ... are bytes/s)
    ceil: 60mbit           # htb only: borrowable ceiling, default = rate
    burst: 64kb            # bucket size, default max(10 ms at rate, 128 KiB)
    discipline: htb | tbf  # default htb
    toward: NODE           # shape only the interface toward NODE (default: every interface)
    overhead_only: true    # HTB at 1 Tbit/s: the shaper's cost without shaping (no rate needed)

One ``tc -batch`` per node replaces the root qdisc of each shaped interface.  The default burst
is large enough for the 64 KiB GSO packets veth carries; smaller bursts make TBF drop them.

What it makes it owns: before the batch runs, the interfaces and the qdisc (kind, handle
``1:``) are recorded in ``<state_dir>/qdiscs.json``; ``stop`` deletes, on each recorded
interface, the root qdisc only if it is still that one (so a node whose function ``chain
migrate`` moved away forwards with the default qdisc again), then forgets the record.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import model_validator

from .base import FunctionParams, NetworkFunction, register
from .params import Rate, Size, neighbour

OVERHEAD_RATE = 10**12
MIN_BURST = 128 * 1024
HANDLE = "1:"  # the root handle of the qdiscs a shaper makes
RECORD = "qdiscs.json"  # in the function's state directory: what it made, written first


class ShaperParams(FunctionParams):
    rate: Rate | None = None
    ceil: Rate | None = None
    burst: Size | None = None
    discipline: Literal["htb", "tbf"] = "htb"
    toward: str | None = None
    overhead_only: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "ShaperParams":
        if self.overhead_only:
            if self.discipline != "htb":
                raise ValueError("overhead_only needs discipline: htb")
            if self.rate is not None and self.rate != OVERHEAD_RATE:  # (re-validation: equal)
                raise ValueError("overhead_only shapes at 1 Tbit/s: give no rate")
            self.rate = OVERHEAD_RATE
        if self.rate is None:
            raise ValueError("rate is required (or overhead_only: true)")
        if self.ceil is not None:
            if self.discipline != "htb":
                raise ValueError("ceil is an htb setting")
            if self.ceil < self.rate:
                raise ValueError("ceil must be at least rate")
        return self

    def effective_burst(self) -> int:
        assert self.rate is not None
        return self.burst or max(self.rate // 8 // 100, MIN_BURST)


@register
class Shaper(NetworkFunction):
    kind = "shaper"
    Params = ShaperParams
    params: ShaperParams
    families = (4, 6)  # HTB and TBF on the egress qdisc shape frames of any protocol

    def check(self) -> None:
        if self.params.toward is not None:
            neighbour(self.ctx, self.params.toward, "toward")

    def programs(self) -> list[str]:
        return ["tc"]

    def devices(self) -> list[str]:
        if self.params.toward is not None:
            return [neighbour(self.ctx, self.params.toward, "toward").name]
        return [i.name for i in self.ctx.interfaces]

    def batch(self) -> str:
        p = self.params
        rate = p.rate
        assert rate is not None  # validation sets it (overhead_only: 1 Tbit/s)
        burst = p.effective_burst()
        lines = []
        for dev in self.devices():
            if p.discipline == "htb":
                ceil = p.ceil or rate
                lines += [f"qdisc replace dev {dev} root handle 1: htb default 10",
                          f"class add dev {dev} parent 1: classid 1:10 htb rate {rate}bit "
                          f"ceil {ceil}bit burst {burst} cburst {burst}"]
            else:
                # queue: the bucket plus 50 ms at rate, so TCP is not starved by tail drops
                limit = burst + rate // 8 // 20
                lines.append(f"qdisc replace dev {dev} root handle 1: tbf rate {rate}bit "
                             f"burst {burst} limit {limit}")
        return "\n".join(lines) + "\n"

    def configure(self) -> None:
        self.ctx.state_dir.mkdir(parents=True, exist_ok=True)
        made = [{"dev": dev, "kind": self.params.discipline, "handle": HANDLE}
                for dev in self.devices()]
        (self.ctx.state_dir / RECORD).write_text(json.dumps(made))
        self.ctx.run(["tc", "-batch", "-"], input=self.batch())

    def stop(self) -> None:
        """Delete the root qdiscs it made (those recorded, still of its kind and handle)."""
        super().stop()
        record = self.ctx.state_dir / RECORD
        try:
            made = json.loads(record.read_text())
        except (OSError, ValueError):
            return
        for q in made:
            root = self._root(q["dev"])
            if root is not None and root.get("kind") == q["kind"] and \
                    root.get("handle") == q["handle"]:
                self.ctx.run(["tc", "qdisc", "del", "dev", q["dev"], "root"], check=False)
        record.unlink(missing_ok=True)

    def _root(self, dev: str) -> dict[str, Any] | None:
        """The root qdisc of ``dev`` as ``tc -j`` shows it (None: no such device, none)."""
        cp = self.ctx.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], check=False)
        try:
            return next((q for q in json.loads(cp.stdout or "[]") if q.get("root")), None)
        except json.JSONDecodeError:
            return None

    def inspect(self) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {"discipline": p.discipline, "rate_bps": p.rate,
                               "ceil_bps": p.ceil or p.rate if p.discipline == "htb" else None,
                               "burst_bytes": p.effective_burst(),
                               "overhead_only": p.overhead_only, "interfaces": {}}
        for dev in self.devices():
            q = self._root(dev)
            if q is not None:
                out["interfaces"][dev] = {k: q.get(k) for k in
                                          ("kind", "bytes", "packets", "drops", "overlimits",
                                           "requeues", "backlog", "qlen")}
        return out
