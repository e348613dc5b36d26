"""Which cores do what during a packet measurement: the generator apart from the chain.

On one host the kernel forwards a sent frame through the chain inside the sender's own system
call, so a sender sharing its core with the chain is clocked by the chain and can never
overload it (a shaper two hops away then looks lossless at any offered rate).  A measurement
therefore pins the sender to cores of its own and steers the receive processing of the chain's
first hop to the others (RPS, :func:`sfclab.kernel.cpus.steered`); the sink runs with the chain
when there are too few cores to give it its own.

==============  =========================  ==================================================
online cores    generator                  chain (first hop's receive processing) and sink
==============  =========================  ==================================================
1               shares the only core       ``separated`` false: the result says so and warns
2               the last core              the other core, the sink too
3 or more       the last core              the first ones; the sink gets the second to last
==============  =========================  ==================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..kernel import cpus


@dataclass
class CoreLayout:
    generator: list[int]
    sink: list[int]
    chain: list[int]
    separated: bool  # the generator has cores the chain does not use
    notes: list[str] = field(default_factory=list)
    steered: list[str] = field(default_factory=list)  # "node/interface" whose RPS was set

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def layout(online: list[int] | None = None) -> CoreLayout:
    """The layout for the online cores (see the module's table)."""
    cores = online if online is not None else cpus.online()
    if len(cores) < 2:
        return CoreLayout(cores, cores, cores, False,
                          ["one core: the generator runs the chain's work too, so the offered "
                           "rate is clocked by the chain; rates found are lower bounds"])
    if len(cores) == 2:
        return CoreLayout([cores[1]], [cores[0]], [cores[0]], True,
                          ["two cores: the sink shares the chain's core"])
    return CoreLayout([cores[-1]], [cores[-2]], cores[:-2], True)
