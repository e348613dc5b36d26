"""``router``: forwarding and the lab's static routes (both set up by the lab core), plus
per-namespace settings.

Lab file keys::

    rp_filter: 0 | 1 | 2     # reverse-path filter on every interface (off, strict, loose)
    ttl: 1..255              # net.ipv4.ip_default_ttl: TTL of packets the node itself sends
                             # (and in a lab with IPv6 the hop limit, net.ipv6.conf.*.hop_limit)

Only ``net.*`` sysctls of the node's own namespace are written.  A router carries IPv4 and IPv6
alike: the lab core turns on forwarding of each family the lab's ``ip:`` names; IPv6 has no
reverse-path filter sysctl, so ``rp_filter`` applies to IPv4 only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import FunctionParams, NetworkFunction, register


class RouterParams(FunctionParams):
    rp_filter: Literal[0, 1, 2] | None = None
    ttl: int | None = Field(default=None, ge=1, le=255)


@register
class Router(NetworkFunction):
    kind = "router"
    Params = RouterParams
    params: RouterParams
    families = (4, 6)

    def sysctls(self) -> dict[str, str]:
        p = self.params
        out: dict[str, str] = {}
        if p.rp_filter is not None:
            # the kernel uses max(all, <interface>): set both, and default for later interfaces
            for dev in ["all", "default"] + [i.name for i in self.ctx.interfaces]:
                out[f"net.ipv4.conf.{dev}.rp_filter"] = str(p.rp_filter)
        if p.ttl is not None:
            out["net.ipv4.ip_default_ttl"] = str(p.ttl)
            if 6 in self.ctx.families:
                for dev in ["all", "default"] + [i.name for i in self.ctx.interfaces]:
                    out[f"net.ipv6.conf.{dev}.hop_limit"] = str(p.ttl)
        return out

    def configure(self) -> None:
        for key, value in self.sysctls().items():
            self.ctx.write_sysctl(key, value)

    def inspect(self) -> dict[str, Any]:
        keys = ["net.ipv4.ip_forward", "net.ipv4.ip_default_ttl", "net.ipv4.conf.all.rp_filter"]
        keys += [f"net.ipv4.conf.{i.name}.rp_filter" for i in self.ctx.interfaces]
        if 6 in self.ctx.families:
            keys += ["net.ipv6.conf.all.forwarding", "net.ipv6.conf.all.hop_limit"]
        out: dict[str, str | None] = {}
        for k in keys:
            try:
                out[k] = self.ctx.read_sysctl(k)
            except OSError:
                out[k] = None
        return {"sysctls": out}
