"""The chains' data plane's numbering: RFC 3032 label stack entries (:func:`lse`), the padding
label, and the numbers a classifier entry keys protocols and families by.  Pure, and light to
import (no models): :mod:`sfclab.plan.sfc` re-exports them for the planner, and the data
plane's maps (:mod:`sfclab.realize.dataplane`), which the agent of a host driven over SSH
loads on every call, take them from here."""

from __future__ import annotations

#: the label of padding entries (RFC 3032's reserved range: never given to a hop)
PAD_LABEL = 15
PROTOS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "any": 0}
#: a classifier's family as the data plane keys it (sfc_class_key.family); 0: either
FAMILIES = {"ipv4": 4, "ipv6": 6, "any": 0}


def lse(label: int, ttl: int, bottom: bool) -> int:
    """An RFC 3032 label stack entry: label, traffic class 0, bottom of stack, TTL."""
    return (label << 12) | (int(bottom) << 8) | ttl
