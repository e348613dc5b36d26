"""Automatic addressing: one subnet per segment from the lab's pool of each family it carries:
IPv4 from ``pool`` (198.18.0.0/15, the RFC 2544 benchmarking range, in /24s unless the lab says
otherwise), IPv6 from ``pool6`` (2001:2::/48, the RFC 5180 benchmarking range, in /64s unless
``prefix6`` says otherwise).  The families are assigned independently, by the same rules.

A segment with an explicit address keeps that address's subnet; the other segments take the
pool's subnets in order, skipping any that overlap an explicit one.  Within a segment, explicit
addresses stay and the others get the lowest free host numbers, in attachment order.

Tenants (:mod:`sfclab.spec.hosts`) have address spaces of their own: the planner assigns the
public space first, then each tenant's from the same pool, avoiding only the public subnets, so
tenants' addresses may be identical.
"""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network, ip_interface
from typing import Any

from ..errors import SpecError
from ..spec.lab import AddressingSpec, LinkSpec
from ..spec.segments import Segment


#: a subnet of either family, and an address with its prefix
Net = IPv4Network | IPv6Network
Iface = IPv4Interface | IPv6Interface


def assign(addressing: AddressingSpec, links: list[LinkSpec], segs: list[Segment],
           source: str, avoid: tuple[Any, ...] = (), family: int = 4
           ) -> tuple[dict[int, Any], dict[tuple[int, int], Any]]:
    """Return the subnet of each segment and the address of each attachment, of ``family``
    (4 or 6); no subnet taken from the pool overlaps ``avoid`` (another address space's
    subnets)."""
    explicit: dict[int, Net] = {}
    for seg in segs:
        for li, j in seg.attachments:
            a = links[li].endpoints[j].address_of(family)
            if a is not None:
                explicit[seg.index] = a.network
                break
    taken = list(explicit.values()) + list(avoid)
    pool, prefix, prefix_key = addressing.pool_of(family)
    if prefix < pool.prefixlen:
        raise SpecError(f"expected a prefix of at least /{pool.prefixlen} inside {pool}",
                        file=source, place=f"addressing.{prefix_key}")
    free = (n for n in pool.subnets(new_prefix=prefix)
            if not any(n.overlaps(t) for t in taken))
    subnets: dict[int, Net | None] = {}
    needed = [s for s in segs if s.attachments and s.index not in explicit]
    for seg in segs:
        if not seg.attachments:
            subnets[seg.index] = None
        elif seg.index in explicit:
            subnets[seg.index] = explicit[seg.index]
        else:
            net = next(free, None)
            if net is None:
                room = 2 ** (prefix - pool.prefixlen)
                pool_key = "pool" if family == 4 else "pool6"
                raise SpecError(f"the pool {pool} has room for {room} /{prefix} subnets "
                                f"but the lab needs {len(needed)}; set a longer "
                                f"addressing.{prefix_key} or a larger addressing.{pool_key}",
                                file=source, place="addressing")
            subnets[seg.index] = net

    addrs: dict[tuple[int, int], Iface] = {}
    for seg in segs:
        net = subnets[seg.index]
        if net is None:
            continue
        given = (links[li].endpoints[j].address_of(family) for li, j in seg.attachments)
        used = {a.ip for a in given if a is not None}
        hosts = (h for h in net.hosts() if h not in used)
        for li, j in seg.attachments:
            a = links[li].endpoints[j].address_of(family)
            if a is None:
                h = next(hosts, None)
                if h is None:
                    raise SpecError(f"subnet {net} has too few addresses for the "
                                    f"{len(seg.attachments)} endpoints on its segment",
                                    file=source, place=f"links[{li}]")
                a = ip_interface(f"{h}/{net.prefixlen}")
            addrs[(li, j)] = a
    return subnets, addrs
