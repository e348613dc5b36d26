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

``placement()`` is what each trial records (``raw["placement"]``): the cores of the generator,
the sink and the chain, and each pinned NAPI thread with its role (``first_hop``, ``receiver``).
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
    cores = online if online is not None else cpus.online()
    if len(cores) < 2:
        return CoreLayout(cores, cores, cores, False,
                          ["one core: the generator runs the chain's work too, so the offered "
                           "rate is clocked by the chain; rates found are lower bounds"])
    if len(cores) == 2:
        return CoreLayout([cores[1]], [cores[0]], [cores[0]], True,
                          ["two cores: the sink shares the chain's core"])
    return CoreLayout([cores[-1]], [cores[-2]], cores[:-2], True)
