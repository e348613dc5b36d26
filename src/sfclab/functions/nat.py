"""``nat``: a router that masquerades traffic leaving toward one neighbour and optionally
forwards ports from that side inward (DNAT).

Lab file keys::

    outside: NODE                                   # the neighbour on the outside
    forward:                                        # optional port forwards
      - {proto: tcp, port: 8080, to: "198.18.3.2:80"}

Masquerading rewrites the source of every packet leaving through the interface toward
``outside`` to that interface's address; a port forward rewrites the destination of packets
arriving from ``outside`` for ``port`` to ``to``.  Rules live in ``table ip sfclab_nat`` in the
node's namespace; ``inspect`` returns their counters.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import FunctionParams, NetworkFunction, register
from .params import neighbour, parse_ports

TABLE = "sfclab_nat"


class PortForward(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proto: Literal["tcp", "udp"] = "tcp"
    port: int = Field(ge=1, le=65535)
    to: str

    @field_validator("to")
    @classmethod
    def _address_port(cls, v: str) -> str:
        addr, sep, port = v.rpartition(":")
        try:
            IPv4Address(addr if sep else v)
        except ValueError:
            raise ValueError("an address with an optional port, ADDRESS[:PORT]") from None
        if sep:
            lo, hi = parse_ports(port)
            if lo != hi or lo == 0:
                raise ValueError("a single port from 1 to 65535 after the address")
        return v


class NatParams(FunctionParams):
    outside: str
    forward: list[PortForward] = Field(default_factory=list)


@register
class Nat(NetworkFunction):
    kind = "nat"
    Params = NatParams
    params: NatParams

    def check(self) -> None:
        neighbour(self.ctx, self.params.outside, "outside")

    def programs(self) -> list[str]:
        return ["nft"]

    def ruleset(self) -> str:
        p = self.params
        out_if = neighbour(self.ctx, p.outside, "outside").name
        lines = [f"table ip {TABLE}", f"delete table ip {TABLE}", f"table ip {TABLE} {{",
                 "  chain prerouting {", "    type nat hook prerouting priority dstnat;"]
        for i, f in enumerate(p.forward):
            lines.append(f'    iifname "{out_if}" {f.proto} dport {f.port} counter '
                         f'dnat to {f.to} comment "sfclab forward {i}"')
        lines += ["  }", "  chain postrouting {",
                  "    type nat hook postrouting priority srcnat;",
                  f'    oifname "{out_if}" counter masquerade comment "sfclab masquerade"',
                  "  }", "}"]
        return "\n".join(lines) + "\n"

    def configure(self) -> None:
        self.ctx.run(["nft", "-f", "-"], input=self.ruleset())

    def inspect(self) -> dict[str, Any]:
        cp = self.ctx.run(["nft", "-j", "list", "table", "ip", TABLE], check=False)
        counters: dict[str, Any] = {}
        if cp.returncode == 0:
            for item in json.loads(cp.stdout).get("nftables", []):
                rule = item.get("rule")
                if not rule or not rule.get("comment", "").startswith("sfclab "):
                    continue
                c = next((e["counter"] for e in rule["expr"] if "counter" in e), None)
                if c:
                    counters[rule["comment"][len("sfclab "):]] = {"packets": c["packets"],
                                                                  "bytes": c["bytes"]}
        # counters count the first packet of each connection (nat chains see only those)
        return {"outside": self.params.outside,
                "interface": neighbour(self.ctx, self.params.outside, "outside").name,
                "connections": counters}
