"""Which IPv4 addresses a lab may use: the one rule for links, the pool and the underlay."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network


def address_problem(a: IPv4Address | IPv4Network) -> str | None:
    """Why ``a`` cannot be put on a lab's link, or None."""
    for test, what in ((lambda x: x.is_loopback, "a loopback address"),
                       (lambda x: x.is_multicast, "a multicast address"),
                       (lambda x: x.is_unspecified, "the unspecified address"),
                       (lambda x: x.is_link_local, "a link-local address"),
                       (lambda x: x.is_reserved, "a reserved address")):
        if test(a):
            return what
    if isinstance(a, IPv4Network) and a.prefixlen == 0:
        return "the whole address space"
    if isinstance(a, IPv4Address) and a in IPv4Network("0.0.0.0/8"):
        return "an address of 'this network' (0.0.0.0/8)"
    return None
