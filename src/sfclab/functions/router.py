"""``router``: forwarding and the lab's static routes (both set up by the lab core), plus
per-namespace settings.

Lab file keys::

    rp_filter: 0 | 1 | 2     # reverse-path filter on every interface (off, strict, loose)
    ttl: 1..255              # net.ipv4.ip_default_ttl: TTL of packets the node itself sends

Only ``net.*`` sysctls of the node's own namespace are written.
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

    def sysctls(self) -> dict[str, str]:
        p = self.params
        out: dict[str, str] = {}
        if p.rp_filter is not None:
            # the kernel uses max(all, <interface>): set both, and default for later interfaces
            for dev in ["all", "default"] + [i.name for i in self.ctx.interfaces]:
                out[f"net.ipv4.conf.{dev}.rp_filter"] = str(p.rp_filter)
        if p.ttl is not None:
            out["net.ipv4.ip_default_ttl"] = str(p.ttl)
        return out

    def configure(self) -> None:
        for key, value in self.sysctls().items():
            self.ctx.write_sysctl(key, value)

    def inspect(self) -> dict[str, Any]:
        keys = ["net.ipv4.ip_forward", "net.ipv4.ip_default_ttl", "net.ipv4.conf.all.rp_filter"]
        keys += [f"net.ipv4.conf.{i.name}.rp_filter" for i in self.ctx.interfaces]
        out: dict[str, str | None] = {}
        for k in keys:
            try:
                out[k] = self.ctx.read_sysctl(k)
            except OSError:
                out[k] = None
        return {"sysctls": out}
