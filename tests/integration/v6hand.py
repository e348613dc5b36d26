"""IPv6 given by hand to a running IPv4 lab, for tests of IPv6 traffic and classifiers until
labs are dual-stack themselves.

Every interface with an IPv4 address 198.18.X.Y/24 gets 2001:2:0:X::Y/64 (no duplicate address
detection); a node's IPv4 routes (default, or to 198.18.X.0/24) get their IPv6 twins through the mapped
gateway; a
node with more than one interface forwards IPv6.  Only the namespaces of the lab the test made
are touched: IPv6 is turned on inside them, nothing in the root namespace changes.
"""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv6Address

from sfclab.kernel import netns
from sfclab.plan.model import Plan


def six(v4: str) -> IPv6Address:
    """198.18.X.Y -> 2001:2:0:X::Y"""
    a = IPv4Interface(v4).ip.packed
    return IPv6Address(f"2001:2:0:{a[2]:x}::{a[3]:x}")


def give_ipv6(plan: Plan) -> dict[str, IPv6Address]:
    """Give the lab of ``plan`` IPv6 as above; each node's first IPv6 address, by node."""
    first: dict[str, IPv6Address] = {}
    for ns in plan.namespaces:
        name = plan.netns_of(ns.node)
        netns.run(name, ["sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0",
                         "net.ipv6.conf.default.accept_dad=0"])
        netns.run(name, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0",
                         "net.ipv6.conf.default.disable_ipv6=0"])
        ifaces = [i for i in plan.interfaces_of(ns.node) if i.address]
        for i in ifaces:
            netns.run(name, ["sysctl", "-qw", f"net.ipv6.conf.{i.name}.accept_dad=0",
                             f"net.ipv6.conf.{i.name}.disable_ipv6=0"])
            a = six(i.address or "")
            netns.run(name, ["ip", "-6", "addr", "add", f"{a}/64", "dev", i.name, "nodad"])
            first.setdefault(ns.node, a)
        if len(ifaces) > 1:
            netns.run(name, ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"])
    for r in plan.routes:
        if not r.gateway or r.table is not None:
            continue
        dst = "default" if r.dst == "0.0.0.0/0" else f"{six(r.dst)}/64"
        netns.run(r.netns, ["ip", "-6", "route", "add", dst, "via", str(six(r.gateway + "/24")),
                            "dev", r.dev])
    _reachable(plan, first)
    return first


def _reachable(plan: Plan, first: dict[str, IPv6Address], tries: int = 10) -> None:
    """Wait until every node reaches every other one over IPv6: neighbour discovery of fresh
    addresses can miss its first solicitation, and then takes a second to try again."""
    for a in first:
        for b, addr in first.items():
            if a == b:
                continue
            for _ in range(tries):
                cp = netns.run(plan.netns_of(a), ["ping", "-6", "-c1", "-W1", str(addr)],
                               check=False)
                if cp.returncode == 0:
                    break
            else:
                raise AssertionError(f"{a} does not reach {b} ({addr}) over IPv6")
