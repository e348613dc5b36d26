"""A link's ``rate``, shaped in the host context: a token bucket (TBF) as the root qdisc of the
port toward the node, so each direction is shaped once, where it enters its node, and a tenant
inside the node (who owns only its side of the veth) cannot lift it."""

from __future__ import annotations

from .context import HostContext

#: the bucket's latency bound
LATENCY = "20ms"


def burst(rate: int, mtu: int) -> int:
    """Bytes of burst: 5 ms at the rate, at least four frames."""
    return max(rate // 8 // 200, 4 * (mtu + 14))


def shape(ctx: HostContext, dev: str, rate: int, mtu: int) -> None:
    ctx.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate}bit",
             "burst", str(burst(rate, mtu)), "latency", LATENCY])
