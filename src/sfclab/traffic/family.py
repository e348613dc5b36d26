"""The address family of a packet measurement: which of an endpoint's addresses the generator
sends to, and the frame-size floor that family sets.

A measurement of ``ip: 4`` (the default) sends to the receiver's IPv4 address, as the lab's
plan gives it.  One of ``ip: 6`` sends to the receiver's IPv6 address: a global-scope address on
one of the interfaces the plan gives that node, read from its namespace, so an IPv6 address the
lab carries is found whoever put it there.  The path (hops, MTU, first hop) is the one the plan
computes: a dual-stack lab routes both families over the same links.

Frame sizes count as RFC 2544 counts them (Ethernet header and FCS included); the probe after
the UDP header must fit, so the smallest frame is 64 bytes over IPv4 and 84 over IPv6 (40 bytes
of IPv6 header against IPv4's 20): :data:`MIN_FRAME_OF`.
"""

from __future__ import annotations

import json
from ipaddress import IPv6Address

from ..errors import LabError
from ..kernel import netns
from ..plan.model import Plan
from ..spec.measurement import MIN_FRAME_OF

__all__ = ["MIN_FRAME_OF", "address_of"]


def _ipv6_of(ns: str, ifnames: set[str]) -> list[IPv6Address]:
    """Global IPv6 addresses on the named interfaces of namespace ``ns``, in interface order."""
    cp = netns.run(ns, ["ip", "-j", "-6", "addr", "show", "scope", "global"], check=False)
    if cp.returncode != 0:
        return []
    out = []
    for link in json.loads(cp.stdout or "[]"):
        if link.get("ifname") not in ifnames:
            continue
        for a in link.get("addr_info", []):
            if a.get("family") == "inet6" and not a.get("tentative"):
                out.append(IPv6Address(a["local"]))
    return out


def address_of(plan: Plan, lab: str, node: str, family: int) -> str:
    """The address of ``node`` the generator sends to for ``family`` (4 or 6); a
    :class:`LabError` when the node has none of IPv6."""
    if family == 4:
        return str(plan.address_of(node))
    names = {i.name for i in plan.interfaces_of(node)}
    found = _ipv6_of(plan.netns_of(node), names)
    if not found:
        raise LabError(f"node '{node}' of lab '{lab}' has no global IPv6 address on its "
                       f"interfaces ({', '.join(sorted(names))}): measuring with ip 6 needs one")
    return str(found[0])
