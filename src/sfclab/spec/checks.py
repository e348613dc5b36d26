"""Checks across the whole lab that no single field can make: references, link forms,
bridge loops, interface names and explicit addresses."""

from __future__ import annotations

from typing import Any

from .lab import AddressingSpec, LinkSpec, NodeSpec
from .source import Document


def link_form(a: NodeSpec, b: NodeSpec) -> str:
    """One of ``ns-ns``, ``ns-linux``, ``ns-ovs``, ``ovs-ovs``, ``linux-linux``, ``linux-ovs``."""
    def cls(n: NodeSpec) -> str:
        return {"linux-bridge": "linux", "ovs-bridge": "ovs"}.get(n.kind, "ns")
    order = {"ns": 0, "linux": 1, "ovs": 2}
    x, y = sorted((cls(a), cls(b)), key=order.__getitem__)
    return f"{x}-{y}"


def check_links(doc: Document, nodes: dict[str, NodeSpec], links: list[LinkSpec],
                places: list[tuple[Any, ...]]) -> None:
    ifnames: dict[tuple[str, str], tuple[Any, ...]] = {}
    parent = {n: n for n, s in nodes.items() if s.is_bridge}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for lk, place in zip(links, places):
        for j, ep in enumerate(lk.endpoints):
            if ep.node not in nodes:
                known = ", ".join(sorted(nodes)) or "none"
                raise doc.error(f"unknown node '{ep.node}' (nodes are: {known})",
                                place + ("endpoints", j))
        a, b = (nodes[ep.node] for ep in lk.endpoints)
        if a.name == b.name:
            raise doc.error(f"a link joins two different nodes; both ends are '{a.name}'",
                            place + ("endpoints",))
        form = link_form(a, b)
        if lk.port is not None and form != "ns-ovs":
            raise doc.error("'port' applies only to a link between a namespace node and an "
                            f"ovs-bridge (this one is {form})", place + ("port",))
        if lk.connect is not None and form != "ovs-ovs":
            raise doc.error("'connect' applies only to a link between two ovs-bridges "
                            f"(this one is {form})", place + ("connect",))
        for j, ep in enumerate(lk.endpoints):
            n = nodes[ep.node]
            if n.is_bridge and ep.address is not None:
                raise doc.error(f"'{n.name}' is a {n.kind}: bridge ports have no address",
                                place + ("endpoints", j, "address"))
            if form == "ovs-ovs" and (lk.connect or "patch") == "patch" and ep.offloads():
                raise doc.error("patch ports have no offloads to set", place + ("endpoints", j))
            if form == "ns-ovs" and lk.port == "internal" and n.is_bridge and ep.offloads():
                raise doc.error("an internal port has only the namespace end; set offloads there",
                                place + ("endpoints", j))
            if ep.interface and form == "ns-ovs" and lk.port == "internal":
                raise doc.error("an internal port keeps its OVS port name inside the namespace; "
                                "remove 'interface' or use port: veth", place + ("endpoints", j))
            if ep.interface:
                key = (ep.node, ep.interface)
                if key in ifnames:
                    raise doc.error(f"interface '{ep.interface}' of '{ep.node}' is already used "
                                    f"at {_fmt(ifnames[key])}", place + ("endpoints", j))
                ifnames[key] = place + ("endpoints", j)
        if a.is_bridge and b.is_bridge:
            ra, rb = root(a.name), root(b.name)
            if ra == rb:
                raise doc.error(f"this link closes a bridge loop through '{a.name}' and "
                                f"'{b.name}' (bridges would flood frames forever; sfclab runs no "
                                "STP)", place)
            parent[ra] = rb


def _fmt(loc: tuple[Any, ...]) -> str:
    from .source import format_place

    return format_place(loc)


def check_addresses(doc: Document, addressing: AddressingSpec, nodes: dict[str, NodeSpec],
                    links: list[LinkSpec], places: list[tuple[Any, ...]]) -> None:
    """Explicit addresses: each unique, and no two segments' subnets overlapping."""
    from ..plan.segments import segments

    seen: dict[Any, tuple[Any, ...]] = {}
    nets: list[tuple[Any, int, tuple[Any, ...]]] = []
    for seg in segments(nodes, links):
        seg_net = None
        for li, j in seg.attachments:
            ep = links[li].endpoints[j]
            if ep.address is None:
                continue
            loc = places[li] + ("endpoints", j, "address")
            if ep.address.ip in seen:
                raise doc.error(f"address {ep.address.ip} is already given at {_fmt(seen[ep.address.ip])}",
                                loc)
            if ep.address.ip in (ep.address.network.network_address,
                                 ep.address.network.broadcast_address) and \
                    ep.address.network.prefixlen < 31:
                raise doc.error(f"expected a host address, not the network or broadcast address "
                                f"of {ep.address.network}", loc)
            seen[ep.address.ip] = loc
            if seg_net is None:
                seg_net = ep.address.network
                for other, oseg, oloc in nets:
                    if oseg != seg.index and other.overlaps(seg_net):
                        raise doc.error(f"subnet {seg_net} overlaps {other} given at {_fmt(oloc)} "
                                        "on another segment", loc)
                nets.append((seg_net, seg.index, loc))
            elif ep.address.network != seg_net:
                raise doc.error(f"expected an address in {seg_net}, the subnet this segment already "
                                "has", loc)
