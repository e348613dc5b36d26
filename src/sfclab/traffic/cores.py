"""Which cores do what during a packet measurement: the generator apart from the chain.

On one host the kernel forwards a sent frame through the chain inside the sender's own system
call, so a sender sharing its core with the chain is clocked by the chain and can never
overload it (a shaper two hops away then looks lossless at any offered rate).  A measurement
therefore pins the sender to cores of its own and moves the receive processing of the chain's
first hop to the others: RPS (:func:`sfclab.kernel.cpus.steered`) and, because an XDP program
on the first hop (a steered lab's) runs in the NAPI poll before RPS, that veth's NAPI made
threaded and its kernel thread pinned (:mod:`.first_hop`).  The sink (an in-kernel counter by
default, which runs where the last hop delivers) gets a core of its own when there are three:
the receiving interfaces' NAPI is then pinned there too.

==============  =========================  ==================================================
online cores    generator                  chain (first hop's receive processing) and sink
==============  =========================  ==================================================
1               shares the only core       ``separated`` false: the result says so and warns
2               the last core              the other core, the sink too
3 or more       the last core              the first ones; the sink gets the second to last
==============  =========================  ==================================================

The cores are the online ones, or those listed in ``$SFCLAB_CPUS`` (``"2-5"``, ``"0,2,4"``),
which must all be online: a machine with many cores lends some to a measurement.

``placement()`` is what each trial records (``raw["placement"]``): the cores of the generator,
the sink and the chain, and each pinned NAPI thread with its role (``first_hop``, ``receiver``).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import SpecError
from ..kernel import cpus

ENV_CPUS = "SFCLAB_CPUS"
MAX_CPU = 4095


def parse_cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``; a ``ValueError`` naming what was expected otherwise."""
    out: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"expected a CPU list such as 0-3 or 0,2,4, got {text!r}")
        a, b = int(lo), int(hi) if dash else int(lo)
        if a > b or b > MAX_CPU:
            raise ValueError(f"expected CPU ranges low-high up to {MAX_CPU}, got {part!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def usable(online: list[int], env: str | None) -> list[int]:
    """The cores a measurement may use: ``online``, or the ``$SFCLAB_CPUS`` list within it."""
    if not env:
        return online
    try:
        wanted = parse_cpu_list(env)
    except ValueError as e:
        raise SpecError(str(e), place=f"${ENV_CPUS}") from None
    off = [c for c in wanted if c not in online]
    if off:
        raise SpecError(f"expected online CPUs ({cpus.cpu_list(online)}), got {env!r} with "
                        f"{cpus.cpu_list(off)}", place=f"${ENV_CPUS}")
    return wanted


@dataclass
class CoreLayout:
    generator: list[int]
    sink: list[int]
    chain: list[int]
    separated: bool  # the generator has cores the chain does not use
    notes: list[str] = field(default_factory=list)
    steered: list[str] = field(default_factory=list)  # "node/interface" whose RPS was set
    #: NAPI threads pinned (first_hop.NapiChange.to_dict() with a "role")
    napi: list[dict[str, Any]] = field(default_factory=list)
    #: what was put back when the measurement ended (first_hop.FirstHopPinning.restored)
    restored: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def placement(self) -> dict[str, Any]:
        """Where the generator, the receiver and the first hop ran (a trial's record)."""
        first = [n for n in self.napi if n.get("role") == "first_hop"]
        return {"generator": list(self.generator), "receiver": list(self.sink),
                "chain": list(self.chain), "separated": self.separated,
                "first_hop": {"rps": list(self.steered), "napi_threads": first},
                "receiver_napi": [n for n in self.napi if n.get("role") == "receiver"]}


def layout(online: list[int] | None = None) -> CoreLayout:
    """The layout for the online cores (see the module's table)."""
    cores = online if online is not None else usable(cpus.online(), os.environ.get(ENV_CPUS))
    if len(cores) < 2:
        return CoreLayout(cores, cores, cores, False,
                          ["one core: the generator runs the chain's work too, so the offered "
                           "rate is clocked by the chain; rates found are lower bounds"])
    if len(cores) == 2:
        return CoreLayout([cores[1]], [cores[0]], [cores[0]], True,
                          ["two cores: the sink shares the chain's core"])
    return CoreLayout([cores[-1]], [cores[-2]], cores[:-2], True)
