"""SID planning for chains with ``encap: srv6`` (draft-ietf-spring-sr-service-programming).

An SRv6 chain carries the very path the planner gives every chain (:mod:`.sfc`: nodes,
function instances, one label per hop); only the bytes on the wire differ.  Each label becomes
a *segment identifier* (SID): an IPv6 address in the locator of the node that owns the label,
with the label as its function part::

    locator of node id N:  2001:2:ff:N::/64      (N: the node's id in the data plane, 1-256)
    SID of label L at N:   2001:2:ff:N::L

The locators lie in 2001:2:ff::/48, just outside the labs' default IPv6 pool (2001:2::/48,
:mod:`.addressing`), so they overlap no link prefix the pool gives.  The SIDs are never
routed: the forwarder (XDP) acts on the active SID by its label and redirects as for a label.

The classifier's H.Encaps writes the path's labels as the SRH's segment list in reverse
(segments[0] is the last SID, RFC 8754) with segments left = n - 1, and the outer destination
the first SID; the outer source is the ingress's locator address (``2001:2:ff:N::``).  A
frame carries ``40 + 8 + 16 n`` bytes more than its inner packet (:func:`overhead`).

The same layout is ``enum sfc_srv6`` in ``include/sfc_srv6.h``; :data:`C_CONSTANTS` is this
module's statement of it, checked against the objects' BTF (``sfclab.realize.contract``).
"""

from __future__ import annotations

from ipaddress import IPv6Address, IPv6Network

#: the network every node's locator is cut from
LOCATORS = IPv6Network("2001:2:ff::/48")
#: the outer IPv6 header and the SRH's fixed part
HEADER = 40 + 8
#: one segment of the SRH
SID_BYTES = 16
#: traffic class 1 of a label stack entry: the path (or parked stack) is an SRv6 one
LSE_SRV6 = 0x200


def locator(node_id: int) -> IPv6Network:
    """The /64 locator of the node whose data-plane id is ``node_id``."""
    if not 0 < node_id < 1 << 16:
        raise ValueError(f"a node id from 1 to 65535, got {node_id}")
    return IPv6Network((int(LOCATORS.network_address) | node_id << 64, 64))


def sid(node_id: int, label: int) -> IPv6Address:
    """The SID of ``label``, owned by node ``node_id``."""
    return IPv6Address(int(locator(node_id).network_address) | label)


def label_of(s: IPv6Address) -> tuple[int, int]:
    """(node id, label) of a SID of this layout; ValueError for another address."""
    if s not in LOCATORS:
        raise ValueError(f"{s} is not in the SFC locators {LOCATORS}")
    v = int(s)
    return (v >> 64) & 0xffff, v & 0xffffffff


def segment_list(stack: list[int], owner: dict[int, int]) -> list[IPv6Address]:
    """The SRH's segment list of a path's ``stack`` (labels, top first; ``owner``: label ->
    its node's id): the last SID first, as the classifier writes it."""
    return [sid(owner[lbl], lbl) for lbl in reversed(stack)]


def overhead(n: int) -> int:
    """Bytes an outer IPv6 header and an SRH of ``n`` SIDs add to a packet."""
    return HEADER + SID_BYTES * n


#: enum sfc_srv6 in include/sfc_srv6.h -> the value this module's layout gives it
C_CONSTANTS = {
    "SFC_SRV6_LOC_W0": int(LOCATORS.network_address) >> 96,
    "SFC_SRV6_LOC_W1": (int(LOCATORS.network_address) >> 64) & 0xffffffff,
    "SFC_SRV6_HDR": HEADER,
    "SFC_SRV6_SID": SID_BYTES,
    "SFC_SRV6_ROOM": HEADER + SID_BYTES * 16,
    "SFC_LSE_SRV6": LSE_SRV6,
}
