"""The lab-file keys of a load balancer, shared by its two kinds: ``balancer`` (nftables DNAT,
:mod:`.balancer`) and ``bpf-balancer`` (eBPF, :mod:`.bpf_balancer`), so one can be swapped for
the other with the same keys::

    vip: 198.18.9.10                 # the virtual address clients send to; IPv4 or IPv6
    proto: tcp | udp | any           # default any (TCP and UDP)
    ports: 80 | "8000-8100"          # destination ports balanced, default 1-65535
    backends:                        # 1 to 16, distinct, none the VIP, all of its family
      - {address: 198.18.5.2, weight: 2}   # weight 1 to 100, default 1
    sticky: tuple | source           # what chooses a flow's backend: its 5-tuple (default),
                                     # or its source address alone (a client keeps its backend)

Packets to the VIP (its protocol and ports) get a backend's address as their destination;
replies get the VIP back as their source.  A connection keeps its backend for its life.  One
balancer balances one family, its VIP's, which the lab's ``ip:`` must carry
(:func:`vip_family_problem`); a dual-stack service is two balancer nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address, IPv6Address
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .base import FunctionParams
from .params import Ports

#: backends a balancer holds (the eBPF program's per-node backend entries)
MAX_BACKENDS = 16
#: the largest weight of one backend (the kernel twin repeats a backend per unit of weight)
MAX_WEIGHT = 100


class Backend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: IPv4Address | IPv6Address
    weight: int = Field(default=1, ge=1, le=MAX_WEIGHT)


class BalancerParams(FunctionParams):
    vip: IPv4Address | IPv6Address
    proto: Literal["tcp", "udp", "any"] = "any"
    ports: Ports = (1, 65535)
    backends: list[Backend] = Field(min_length=1)
    sticky: Literal["tuple", "source"] = "tuple"

    @field_validator("ports")
    @classmethod
    def _no_port_zero(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] == 0:
            raise ValueError("ports from 1 to 65535 (port 0 carries no flow)")
        return v

    @field_validator("backends")
    @classmethod
    def _fits(cls, backends: list[Backend]) -> list[Backend]:
        if len(backends) > MAX_BACKENDS:
            raise ValueError(f"at most {MAX_BACKENDS} backends (the eBPF program's entries per "
                             f"node), got {len(backends)}")
        seen = [b.address for b in backends]
        twice = sorted({str(a) for a in seen if seen.count(a) > 1})
        if twice:
            raise ValueError(f"a backend address once ({twice[0]} is listed twice)")
        return backends

    @model_validator(mode="after")
    def _vip_is_no_backend(self) -> BalancerParams:
        if any(b.address == self.vip for b in self.backends):
            raise ValueError(f"a vip no backend has ({self.vip} is also a backend)")
        return self

    @model_validator(mode="after")
    def _one_family(self) -> BalancerParams:
        for b in self.backends:
            if b.address.version != self.vip.version:
                raise ValueError(f"backends of the vip's family (IPv{self.vip.version}): "
                                 f"{b.address} is IPv{b.address.version}")
        return self


def vip_family_problem(vip: IPv4Address | IPv6Address, families: Sequence[int]) -> str | None:
    """Why a balancer of ``vip`` cannot be in a lab whose links carry ``families``, or None."""
    if vip.version in families:
        return None
    return (f"expected a vip of the lab's families (IPv{' and IPv'.join(map(str, families))}), "
            f"got an IPv{vip.version} address ({vip})")
