"""The address family of a packet measurement: which of an endpoint's addresses the generator
sends to, and the frame-size floor that family sets.

A measurement of ``ip: 4`` (the default) sends to the receiver's IPv4 address, one of ``ip: 6``
to its IPv6 address, as the lab's plan gives them (a lab of ``ip: 6`` or ``dual`` has IPv6
addresses, ``docs/labs.md``).  The path (hops, MTU, first hop) follows the plan's routes of the
same family.

Frame sizes count as RFC 2544 counts them (Ethernet header and FCS included); the probe after
the UDP header must fit, so the smallest frame is 64 bytes over IPv4 and 84 over IPv6 (40 bytes
of IPv6 header against IPv4's 20): :data:`MIN_FRAME_OF`.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_interface

from ..errors import LabError
from ..plan.model import InterfacePlan, Plan
from ..spec.measurement import MIN_FRAME_OF

__all__ = ["MIN_FRAME_OF", "address_of", "interface_address"]


def address_of(plan: Plan, lab: str, node: str, family: int) -> IPv4Address | IPv6Address:
    """The address of ``node`` the generator sends to for ``family`` (4 or 6); a
    :class:`LabError` when the node has none of that family."""
    try:
        return plan.address_of(node, family)
    except KeyError:
        raise LabError(f"node '{node}' of lab '{lab}' has no IPv{family} address (a lab has "
                       f"IPv6 addresses with ip: 6 or dual, IPv4 ones with ip: 4 or dual)"
                       ) from None


def interface_address(i: InterfacePlan, family: int) -> IPv4Address | IPv6Address | None:
    """The interface's address of ``family``, or None."""
    a = i.address6 if family == 6 else i.address
    return ip_interface(a).ip if a else None
