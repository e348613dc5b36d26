"""Checks across the whole lab that no single field can make: references, link forms,
bridge loops, interface names and explicit addresses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .addresses import families
from .kinds import KindTable, LinkForm
from .segments import segments
from .source import Document, format_place

if TYPE_CHECKING:
    from .lab import AddressingSpec, LinkSpec, NodeSpec


#: link keys that only some pairs of attachments understand
LINK_KEYS: dict[str, tuple[str, str, str]] = {
    "port": ("namespace", "ovs-bridge", "a namespace node and an ovs-bridge"),
    "connect": ("ovs-bridge", "ovs-bridge", "two ovs-bridges"),
}


def pair(a: NodeSpec, b: NodeSpec) -> str:
    """The link's attachment pair in a stable order, e.g. ``namespace-ovs-bridge``."""
    order = ("namespace", "linux-bridge", "ovs-bridge")
    x, y = sorted((a.attachment, b.attachment), key=order.index)
    return f"{x}-{y}"


def check_links(doc: Document, kinds: KindTable, nodes: dict[str, NodeSpec],
                links: list[LinkSpec], places: list[tuple[Any, ...]]) -> list[LinkForm]:
    """Check every link; return the form each takes (from ``kinds``)."""
    forms: list[LinkForm] = []
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
        for key, (x, y, words) in LINK_KEYS.items():
            if getattr(lk, key) is not None and {a.attachment, b.attachment} != {x, y}:
                raise doc.error(f"'{key}' applies only to a link between {words} (this one is "
                                f"{pair(a, b)})", place + (key,))
        form = kinds.link_form(a, b, lk)
        form.check(lk, (a, b), _locator(doc, place))
        forms.append(form)
        for j, ep in enumerate(lk.endpoints):
            n = nodes[ep.node]
            if n.is_bridge and ep.address is not None:
                raise doc.error(f"'{n.name}' is a {n.kind}: bridge ports have no address",
                                place + ("endpoints", j, "address"))
            if ep.interface:
                ifkey = (ep.node, ep.interface)
                if ifkey in ifnames:
                    raise doc.error(f"interface '{ep.interface}' of '{ep.node}' is already used "
                                    f"at {_fmt(ifnames[ifkey])}", place + ("endpoints", j))
                ifnames[ifkey] = place + ("endpoints", j)
        if a.is_bridge and b.is_bridge:
            ra, rb = root(a.name), root(b.name)
            if ra == rb:
                raise doc.error(f"this link closes a bridge loop through '{a.name}' and "
                                f"'{b.name}' (bridges would flood frames forever; sfclab runs no "
                                "STP)", place)
            parent[ra] = rb
    return forms


def _locator(doc: Document, place: tuple[Any, ...]) -> Any:
    """``at(*below)(message)``: the located error for a place below ``place``."""
    return lambda *below: (lambda message: doc.error(message, place + below))


def _fmt(loc: tuple[Any, ...]) -> str:
    return format_place(loc)


def check_addresses(doc: Document, addressing: AddressingSpec, nodes: dict[str, NodeSpec],
                    links: list[LinkSpec], places: list[tuple[Any, ...]],
                    spaces: list[str | None] | None = None) -> None:
    """Explicit addresses of each family (``address``, ``address6``): each unique, each in the
    subnet its segment already has, and no two segments' subnets overlapping, within one
    address space (a tenant's, or the public one: tenants' spaces may overlap)."""
    for family, key in ((4, "address"), (6, "address6")):
        _check_family_addresses(doc, nodes, links, places, spaces, family, key)


def _check_family_addresses(doc: Document, nodes: dict[str, NodeSpec], links: list[LinkSpec],
                            places: list[tuple[Any, ...]], spaces: list[str | None] | None,
                            family: int, key: str) -> None:
    space = spaces or [None] * len(links)
    seen: dict[Any, tuple[Any, ...]] = {}
    nets: list[tuple[Any, int, tuple[Any, ...], str | None]] = []
    # a /31 (IPv4) or /127 (IPv6) has no network or broadcast address (RFC 3021, RFC 6164)
    shortest_whole = 31 if family == 4 else 127
    for seg in segments(nodes, links):
        seg_net = None
        for li, j in seg.attachments:
            addr = links[li].endpoints[j].address_of(family)
            if addr is None:
                continue
            loc = places[li] + ("endpoints", j, key)
            seen_key = (space[li], addr.ip)
            if seen_key in seen:
                raise doc.error(f"address {addr.ip} is already given at "
                                f"{_fmt(seen[seen_key])}", loc)
            net = addr.network
            ends = (net.network_address, net.broadcast_address) if family == 4 \
                else (net.network_address,)
            if addr.ip in ends and net.prefixlen < shortest_whole:
                what = "the network or broadcast address" if family == 4 \
                    else "the subnet-router anycast address (host part zero)"
                raise doc.error(f"expected a host address, not {what} of {net}", loc)
            seen[seen_key] = loc
            if seg_net is None:
                seg_net = net
                for other, oseg, oloc, ospace in nets:
                    if oseg != seg.index and ospace == space[li] and other.overlaps(seg_net):
                        raise doc.error(f"subnet {seg_net} overlaps {other} given at {_fmt(oloc)} "
                                        "on another segment", loc)
                nets.append((seg_net, seg.index, loc, space[li]))
            elif net != seg_net:
                raise doc.error(f"expected an address in {seg_net}, the subnet this segment "
                                "already has", loc)


def check_families(doc: Document, ip: int | str, nodes: dict[str, NodeSpec],
                   links: list[LinkSpec], places: list[tuple[Any, ...]]) -> None:
    """An explicit address of a family the lab does not put on its links (``address6`` in an
    ``ip: 4`` lab, ``address`` in an ``ip: 6`` lab) is refused at its place, and so is a node
    whose kind cannot carry the lab's families (its :attr:`families`; every kind carries
    both now, the check stays for one that would not)."""
    fams = families(ip)
    for lk, place in zip(links, places):
        for j, ep in enumerate(lk.endpoints):
            for family, key in ((4, "address"), (6, "address6")):
                if ep.address_of(family) is not None and family not in fams:
                    raise doc.error(f"an IPv{family} address in a lab of 'ip: {ip}': set "
                                    f"'ip: dual' (or 'ip: {family}') to address links in "
                                    f"IPv{family}", place + ("endpoints", j, key))
    for name, n in nodes.items():
        carries = n.kind_ref.families
        missing = [f for f in fams if f not in carries]
        if missing:
            raise doc.error(f"a {n.kind} carries IPv{' and IPv'.join(map(str, carries))} only, "
                            f"and this lab is 'ip: {ip}': expected 'ip: 4' or another kind",
                            ("nodes", name, "kind"))
