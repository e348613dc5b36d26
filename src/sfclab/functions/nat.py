"""``nat``: a router that masquerades traffic leaving toward one neighbour and optionally
forwards ports from that side inward (DNAT).

Lab file keys::

    outside: NODE                                   # the neighbour on the outside
    forward:                                        # optional port forwards
      - {proto: tcp, port: 8080, to: "198.18.3.2:80"}
      - {proto: tcp, port: 8443, to: "[2001:2:0:3::2]:443"}   # IPv6 labs (ip: 6 or dual)

Masquerading rewrites the source of every packet leaving through the interface toward
``outside`` to that interface's address; a port forward rewrites the destination of packets
arriving from ``outside`` for ``port`` to ``to``.  Rules live in ``table ip sfclab_nat`` in the
node's namespace; ``inspect`` returns their counters.

IPv6 (labs of ``ip: 6`` or ``dual``) is NAT66 by masquerade, in ``table ip6 sfclab_nat`` beside
the IPv4 table: stateful, ports rewritten where two inside flows would collide, exactly what the
IPv4 masquerade does, so a chain meets the same NAT in either family (the property sfclab's
chains and proxies are tested against).  NPTv6 (RFC 6296) was not chosen: it is stateless 1:1
prefix translation, which hides nothing and needs an outside prefix as long as each inside one,
so it would not exercise a chain the way a NAT does.  Port forwards go to the table of their
``to`` address's family.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import SpecError
from .base import FunctionContext, FunctionParams, NetworkFunction, register
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
        split_to(v)
        return v

    @property
    def family(self) -> int:
        return split_to(self.to)[0]

    def target(self) -> tuple[IPv4Address | IPv6Address, int]:
        """The address ``to`` names and its port (0: none given, the forwarded port kept)."""
        family, addr, port = split_to(self.to)
        return (IPv6Address(addr) if family == 6 else IPv4Address(addr)), int(port or 0)


def split_to(v: str) -> tuple[int, str, str]:
    """``ADDRESS[:PORT]`` (IPv4) or ``[ADDRESS]:PORT`` / ``ADDRESS`` (IPv6): its family, address
    and port ('' if none); ValueError if it is neither."""
    words = "an address with an optional port: ADDRESS[:PORT], or [IPV6-ADDRESS]:PORT"
    if v.startswith("["):
        addr, sep, port = v[1:].partition("]")
        if not sep or (port and not port.startswith(":")):
            raise ValueError(words)
        port = port[1:]
        family = 6
    elif v.count(":") > 1:
        addr, port, family = v, "", 6
    else:
        addr, _, port = v.partition(":")
        family = 4
    try:
        IPv6Address(addr) if family == 6 else IPv4Address(addr)
    except ValueError:
        raise ValueError(words) from None
    if port or v.endswith(":"):
        lo, hi = parse_ports(port)
        if lo != hi or lo == 0:
            raise ValueError("a single port from 1 to 65535 after the address")
    return family, addr, port


def check_forwards(ctx: FunctionContext, forward: list[PortForward]) -> None:
    """A ``SpecError`` at the first forward whose ``to`` is of a family the lab's links do not
    carry (its ``ip:``); shared by ``nat`` and ``bpf-nat``."""
    for i, f in enumerate(forward):
        if f.family not in ctx.families:
            raise SpecError(f"an IPv{f.family} address in a lab without IPv{f.family} "
                            "(its 'ip:')", place=f"forward.{i}.to")


class NatParams(FunctionParams):
    outside: str
    forward: list[PortForward] = Field(default_factory=list)


@register
class Nat(NetworkFunction):
    kind = "nat"
    Params = NatParams
    params: NatParams
    families = (4, 6)  # NAT44 and NAT66, both by masquerade

    def programs(self) -> list[str]:
        return ["nft"]

    def check(self) -> None:
        neighbour(self.ctx, self.params.outside, "outside")
        check_forwards(self.ctx, self.params.forward)

    def _tables(self) -> list[tuple[str, int]]:
        """The nft families of its tables: ``ip`` for IPv4, ``ip6`` for IPv6."""
        return [(t, f) for t, f in (("ip", 4), ("ip6", 6)) if f in self.ctx.families]

    def ruleset(self) -> str:
        p = self.params
        out_if = neighbour(self.ctx, p.outside, "outside").name
        lines: list[str] = []
        for table, family in self._tables():
            lines += [f"table {table} {TABLE}", f"delete table {table} {TABLE}",
                      f"table {table} {TABLE} {{",
                      "  chain prerouting {", "    type nat hook prerouting priority dstnat;"]
            for i, f in enumerate(p.forward):
                if f.family == family:
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
        counters: dict[str, Any] = {}
        for table, family in self._tables():
            cp = self.ctx.run(["nft", "-j", "list", "table", table, TABLE], check=False)
            if cp.returncode != 0:
                continue
            for item in json.loads(cp.stdout).get("nftables", []):
                rule = item.get("rule")
                if not rule or not rule.get("comment", "").startswith("sfclab "):
                    continue
                c = next((e["counter"] for e in rule["expr"] if "counter" in e), None)
                if c:  # forwards by index; the IPv6 masquerade as "masquerade6"
                    name = rule["comment"][len("sfclab "):]
                    name += "6" if family == 6 and name == "masquerade" else ""
                    counters[name] = {"packets": c["packets"], "bytes": c["bytes"]}
        # counters count the first packet of each connection (nat chains see only those)
        return {"outside": self.params.outside,
                "interface": neighbour(self.ctx, self.params.outside, "outside").name,
                "connections": counters}
