"""Paths through a plan: the hops a packet takes from a node to an address, following the
plan's routes by longest prefix (pure: the same rules the kernel applies to what we install).
Used to refuse measurements between nodes with no path and to find a path's MTU.

Tenants may have identical address plans, so an address can belong to several nodes: a next
hop is the owner of the gateway (or of the destination) among the current node's neighbours.
Device routes (no gateway: a shared node's per-tenant tables) only repeat connected networks,
which are followed as connected.

An IPv6 destination is followed through the IPv6 addresses and routes (``address6``, routes to
IPv6 prefixes), an IPv4 one through the IPv4 ones."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any

from .model import Plan

DEFAULT_MTU = 1500


class NoPath(Exception):
    """There is no route, or the route loops or crosses a node that does not forward."""


def hops(plan: Plan, src: str, dst_ip: IPv4Address | IPv6Address,
         limit: int = 4096) -> list[str]:
    """The nodes visited from ``src`` to the owner of ``dst_ip``, both included, over the
    addresses and routes of ``dst_ip``'s family."""
    v6 = dst_ip.version == 6

    def addr(i: Any) -> str:
        return (i.address6 if v6 else i.address) or ""

    owners: dict[IPv4Address | IPv6Address, list[str]] = {}
    for i in plan.interfaces:
        if addr(i):
            owners.setdefault(ip_address(addr(i).split("/")[0]), []).append(i.node)
    if dst_ip not in owners:
        raise NoPath(f"no node has address {dst_ip}")
    neighbours: dict[str, set[str]] = {}
    for i in plan.interfaces:
        neighbours.setdefault(i.node, set()).add(i.peer)

    def owner(a: IPv4Address | IPv6Address, near: str) -> str:
        """The node with ``a``: the one next to ``near`` when several have it."""
        found = owners[a]
        return next((n for n in found if n in neighbours.get(near, ())), found[0])

    connected: dict[str, list[Any]] = {}
    for i in plan.interfaces:
        if addr(i) and i.netns:
            connected.setdefault(i.node, []).append(ip_network(addr(i), strict=False))
    routes: dict[str, list[tuple[Any, IPv4Address | IPv6Address]]] = {}
    for r in plan.routes:
        if r.gateway and ip_network(r.dst).version == dst_ip.version:
            routes.setdefault(r.node, []).append((ip_network(r.dst), ip_address(r.gateway)))
    forwards = {ns.node: ns.forwards for ns in plan.namespaces}
    path, node = [src], src
    for _ in range(limit):
        if node in owners[dst_ip]:
            return path
        if any(dst_ip in n for n in connected.get(node, [])):
            nxt = owner(dst_ip, node)
        else:
            match = [(n, gw) for n, gw in routes.get(node, []) if dst_ip in n]
            if not match:
                raise NoPath(f"{node} has no route to {dst_ip}")
            gw = max(match, key=lambda x: x[0].prefixlen)[1]
            if gw not in owners:
                raise NoPath(f"{node} routes {dst_ip} via {gw}, which no node has")
            nxt = owner(gw, node)
        if nxt not in owners[dst_ip] and not forwards.get(nxt, False):
            raise NoPath(f"the path from {src} to {dst_ip} would cross {nxt}, which does not "
                         "forward")
        path.append(nxt)
        node = nxt
    raise NoPath(f"routing loop from {src} to {dst_ip}")


def path_mtu(plan: Plan, nodes: list[str]) -> int:
    """The smallest MTU of the interfaces of the nodes along ``nodes``."""
    on_path = set(nodes)
    mtus = [i.mtu or DEFAULT_MTU for i in plan.interfaces if i.node in on_path and i.netns]
    return min(mtus) if mtus else DEFAULT_MTU
