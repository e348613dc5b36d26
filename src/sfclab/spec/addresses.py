"""Which addresses a lab may use: the one rule for links, the pools and the underlay.

IPv4 and IPv6 share the rule (no loopback, multicast, unspecified, link-local or reserved
address); each family adds its own: IPv4 refuses 'this network' (0.0.0.0/8), IPv6 the
IPv4-mapped addresses (::ffff:0:0/96).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

#: the lab-level address families: ``ip: 4`` (the default), ``ip: 6`` and ``ip: dual``
IP_FAMILIES: tuple[int | str, ...] = (4, 6, "dual")
#: the IPv6 pool's default: RFC 5180's benchmarking range
IPV6_POOL = IPv6Network("2001:2::/48")
#: the IPv6 subnet a link gets by default: a /64, as RFC 4291 lays interfaces out
IPV6_PREFIX = 64


def families(ip: int | str) -> tuple[int, ...]:
    """The address families (4, 6) a lab of ``ip:`` value ``ip`` puts on its links."""
    return {4: (4,), 6: (6,), "dual": (4, 6)}[ip]


def address_problem(a: IPv4Address | IPv4Network | IPv6Address | IPv6Network) -> str | None:
    """Why ``a`` cannot be put on a lab's link, or None."""
    for test, what in ((lambda x: x.is_loopback, "a loopback address"),
                       (lambda x: x.is_multicast, "a multicast address"),
                       (lambda x: x.is_unspecified, "the unspecified address"),
                       (lambda x: x.is_link_local, "a link-local address"),
                       (lambda x: x.is_reserved, "a reserved address")):
        if test(a):
            return what
    if isinstance(a, (IPv4Network, IPv6Network)) and a.prefixlen == 0:
        return "the whole address space"
    if isinstance(a, IPv4Address) and a in IPv4Network("0.0.0.0/8"):
        return "an address of 'this network' (0.0.0.0/8)"
    if isinstance(a, IPv6Address) and a.ipv4_mapped is not None:
        return "an IPv4-mapped address"
    return None
