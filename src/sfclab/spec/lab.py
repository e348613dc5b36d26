"""The lab file: a validated, immutable description of namespaces, bridges and links.

Model (containerlab's words)::

    name: demo                      # [A-Za-z0-9][A-Za-z0-9_.-]*, at most 32 characters
    ip: dual                        # 4 (default) | 6 | dual: the address families of links
    addressing: {pool: 198.18.0.0/15, prefix: 24}   # optional; one subnet per segment
    # IPv6: {pool6: 2001:2::/48, prefix6: 64} (RFC 5180's benchmarking range, a /64 a segment)
    mtu: 1500                       # optional default for every link
    chain: {length: 5, link: veth}  # optional shorthand, expanded by sfclab.spec.chain
    nodes:
      src: {kind: host}             # endpoint namespace
      r1:  {kind: router}           # forwarding namespace (any function kind forwards too)
      sw:  {kind: linux-bridge}     # a Linux bridge in a namespace of its own
      br:  {kind: ovs-bridge}       # an Open vSwitch bridge (userspace datapath if no module)
    links:
      - endpoints: [src, "r1:eth5"] # "node" or "node:interface", or a mapping:
      - endpoints: [{node: r1, address: 198.18.9.1/24, tx-checksum: off}, sw]
      - endpoints: [{node: r1, address6: "2001:2:0:9::1/64"}, src]   # ip: 6 or dual
        mtu: 9000
      - endpoints: [r1, br]
        port: internal              # namespace<->ovs-bridge: veth (default) | internal
      - endpoints: [br, br2]
        connect: patch              # ovs-bridge<->ovs-bridge: patch (default) | veth

``load_lab(path)`` and ``load_lab_dict(d, source)`` return a :class:`Lab` or raise
:class:`~sfclab.errors.SpecError` naming the file, the place and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from ..errors import SpecError
import yaml

from . import chain, checks, hosts as hosts_spec, sfc, text
from .addresses import IP_FAMILIES, IPV6_POOL, IPV6_PREFIX, address_problem, families
from .chain import ChainSpec
from .hosts import Attach, HostSpec, Rate, UnderlaySpec
from .image import ImageSpec
from .sfc import GroupSpec, SfcChainSpec
from .kinds import KindTable, LinkForm, NodeKind
from .names import (LAB_NAME_MAX, NAME_RE, NAME_WORDS, NODE_NAME_MAX, ifname_problem,
                    node_name_ok)
from .source import Document, format_place
from .strict import Strict as _Model
from .wording import pydantic_error



class EndpointSpec(_Model):
    node: str
    interface: str | None = None
    address: IPv4Interface | None = None
    address6: IPv6Interface | None = None
    tso: bool | None = None
    gso: bool | None = None
    gro: bool | None = None
    tx_checksum: bool | None = Field(default=None, alias="tx-checksum")

    @field_validator("interface")
    @classmethod
    def _ifname(cls, v: str | None) -> str | None:
        problem = None if v is None else ifname_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("address")
    @classmethod
    def _address(cls, v: IPv4Interface | None) -> IPv4Interface | None:
        if v is not None:
            problem = address_problem(v.network) or address_problem(v.ip)
            if problem:
                raise ValueError(f"a unicast host address on a link, not {problem}")
            if v.network.prefixlen < 8:
                raise ValueError("a prefix of /8 or longer on a link")
        return v

    @field_validator("address6", mode="before")
    @classmethod
    def _address6_text(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, str):
            raise ValueError("an IPv6 address with its prefix as text, e.g. 2001:2:0:9::1/64")
        if isinstance(v, str) and "/" not in v:
            raise ValueError(f"an IPv6 address with its prefix length, e.g. {v}/64")
        return v

    @field_validator("address6")
    @classmethod
    def _address6(cls, v: IPv6Interface | None) -> IPv6Interface | None:
        if v is not None:
            problem = address_problem(v.network) or address_problem(v.ip)
            if problem:
                raise ValueError(f"a unicast host address on a link, not {problem}")
            if not 16 <= v.network.prefixlen <= 127:
                raise ValueError("a prefix between /16 and /127 on a link")
        return v

    def address_of(self, family: int) -> IPv4Interface | IPv6Interface | None:
        """The endpoint's explicit address of ``family`` (4 or 6), or None."""
        return self.address if family == 4 else self.address6

    def offloads(self) -> dict[str, bool]:
        """The offloads this endpoint asks to set, in ethtool's words."""
        out = {"tso": self.tso, "gso": self.gso, "gro": self.gro, "tx-checksum": self.tx_checksum}
        return {k: v for k, v in out.items() if v is not None}


def _endpoint(v: Any) -> Any:
    if isinstance(v, str):
        node, _, iface = v.partition(":")
        return {"node": node, "interface": iface} if iface else {"node": node}
    return v


class LinkSpec(_Model):
    endpoints: list[EndpointSpec] = Field(min_length=2, max_length=2)
    mtu: int | None = Field(default=None, ge=68, le=65535)
    port: Literal["veth", "internal"] | None = None
    connect: Literal["patch", "veth"] | None = None
    attach: Attach | None = None  # labs with hosts: how the host context meets the node
    rate: Rate | None = None  # labs with hosts: bits per second, shaped in the host context

    @field_validator("endpoints", mode="before")
    @classmethod
    def _endpoints(cls, v: Any) -> Any:
        return [_endpoint(e) for e in v] if isinstance(v, list) else v


class AddressingSpec(_Model):
    pool: IPv4Network = IPv4Network("198.18.0.0/15")
    prefix: int = Field(default=24, ge=8, le=30)
    pool6: IPv6Network = IPV6_POOL
    prefix6: int = Field(default=IPV6_PREFIX, ge=16, le=127)

    @field_validator("pool", "pool6")
    @classmethod
    def _pool(cls, v: IPv4Network | IPv6Network) -> IPv4Network | IPv6Network:
        problem = address_problem(v)
        if problem:
            raise ValueError(f"a pool of unicast addresses, not {problem}")
        return v

    def pool_of(self, family: int) -> tuple[IPv4Network | IPv6Network, int, str]:
        """The pool of ``family``, its subnets' prefix length and that key's name."""
        return (self.pool, self.prefix, "prefix") if family == 4 else \
            (self.pool6, self.prefix6, "prefix6")


class LabFile(_Model):
    name: str = Field(max_length=LAB_NAME_MAX)
    ip: Any = 4  # checked by _ip: 4 | 6 | dual
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    links: list[dict[str, Any]] = Field(default_factory=list)
    chain: ChainSpec | None = None
    addressing: AddressingSpec = AddressingSpec()
    mtu: int | None = Field(default=None, ge=68, le=65535)
    chains: Any = None  # validated by sfclab.spec.sfc, against the nodes
    groups: Any = None
    hosts: Any = None  # validated by sfclab.spec.hosts
    underlay: Any = None
    tenants: Any = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"a name of {NAME_WORDS}")
        return v

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: Any) -> int | str:
        if isinstance(v, str) and v in ("4", "6"):
            v = int(v)
        if isinstance(v, bool) or v not in IP_FAMILIES:
            raise ValueError(f"4, 6 or dual (the address families of the lab's links), "
                             f"not {v!r}")
        return v


class HostParams(_Model):
    kind: Literal["host"]


class LinuxBridgeParams(_Model):
    kind: Literal["linux-bridge"]


class OvsBridgeParams(_Model):
    kind: Literal["ovs-bridge"]
    datapath: Literal["auto", "netdev", "system"] = "auto"


#: node keys every kind takes, read by :mod:`sfclab.spec.hosts` (not the kind's own)
NODE_PLACEMENT_KEYS = ("host", "tenant")
#: the node key of its container (:mod:`sfclab.spec.image`), taken by every kind but bridges
NODE_IMAGE_KEY = "image"


@dataclass(frozen=True)
class NodeSpec:
    """A validated node: its name, its kind (from the kind table) and its validated keys."""

    name: str
    kind_ref: NodeKind = field(compare=False)
    params: Any  # the kind's validated pydantic model
    host: str | None = None  # labs with hosts: where it runs
    tenants: tuple[str, ...] = ()  # the tenants it belongs to (none: public)
    image: ImageSpec | None = None  # its processes run in a container from this image

    @property
    def kind(self) -> str:
        return self.kind_ref.name

    @property
    def attachment(self) -> str:
        return self.kind_ref.attachment

    @property
    def is_bridge(self) -> bool:
        return self.kind_ref.attachment != "namespace"

    @property
    def has_namespace(self) -> bool:
        return self.kind_ref.has_namespace

    @property
    def is_l3(self) -> bool:
        return not self.is_bridge

    @property
    def forwards(self) -> bool:
        return self.kind_ref.forwards


@dataclass(frozen=True)
class Lab:
    """A validated lab: every reference resolved, every name legal, every link's form known."""

    name: str
    nodes: dict[str, NodeSpec]
    links: list[LinkSpec]
    addressing: AddressingSpec
    source: str = "<lab>"
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    forms: list[LinkForm] = field(default_factory=list, compare=False)  # one per link
    doc: Document | None = field(default=None, compare=False, repr=False)
    chains: dict[str, SfcChainSpec] = field(default_factory=dict)  # service function chains
    groups: dict[str, GroupSpec] = field(default_factory=dict)
    hosts: dict[str, HostSpec] = field(default_factory=dict)  # empty: this machine alone
    underlay: UnderlaySpec | None = None
    #: the address space of each link: a tenant's name, or None (public)
    link_spaces: list[str | None] = field(default_factory=list)
    ip: int | str = 4  # the address families of its links: 4, 6 or dual

    @property
    def families(self) -> tuple[int, ...]:
        """The families (4, 6) its links are addressed in."""
        return families(self.ip)

    @property
    def tenants(self) -> list[str]:
        out: list[str] = []
        for n in self.nodes.values():
            out += [t for t in n.tenants if t not in out]
        return out

    def error_at(self, e: SpecError, loc: tuple[Any, ...]) -> SpecError:
        """``e`` (raised for a place below ``loc``) located in this lab's file: file, full
        place and line."""
        below = tuple(e.place.split(".")) if e.place else ()
        e.file = e.file or self.source
        e.place = format_place(loc + below)
        if self.doc is not None and e.line is None:
            e.line = self.doc.line_of(loc + below)
        return e

    def to_dict(self) -> dict[str, Any]:
        """The full (expanded) form, as ``sfclab expand`` prints it."""
        return self.raw


def _pydantic_error(doc: Document, e: ValidationError, prefix: tuple[Any, ...]) -> SpecError:
    loc, msg = pydantic_error(e)
    return doc.error(msg, prefix + loc)


def load_lab(path: str, kinds: KindTable) -> Lab:
    """Read and validate a lab file against the kind table ``kinds``."""
    return validate(Document.from_file(path), kinds)


def load_lab_text(text: str, source: str, kinds: KindTable) -> Lab:
    return validate(Document(text, source), kinds)


def load_lab_dict(data: dict[str, Any], source: str, kinds: KindTable) -> Lab:
    """Validate a lab given as a mapping (e.g. inline in an experiment file)."""
    return validate(Document(yaml.safe_dump(data, sort_keys=False), source), kinds)


def validate(doc: Document, kinds: KindTable) -> Lab:
    """Validate a parsed lab document; every kind and link form comes from ``kinds``."""
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("expected a mapping with 'name', 'nodes' and 'links'", ())
    text.refuse_nul(doc, data)
    try:
        top = LabFile.model_validate(data)
    except ValidationError as e:
        raise _pydantic_error(doc, e, ()) from None
    nodes_raw, links_raw = _raw_nodes_and_links(doc, top)
    hosts, underlay = hosts_spec.validate_hosts(doc, top.hosts, top.underlay)
    placement = hosts_spec.node_placement(doc, hosts, nodes_raw)
    tenancy = hosts_spec.validate_tenants(doc, top.tenants, nodes_raw)
    nodes = {name: NodeSpec(name, *_node_kind_and_params(doc, kinds, name, n), placement[name],
                            tenancy[name], _node_image(doc, name, n))
             for name, n in nodes_raw.items()}
    links, places = _links(doc, links_raw, top.mtu)
    forms = checks.check_links(doc, kinds, nodes, links, places)
    hosts_spec.check_hosted(doc, hosts, nodes, links, places)
    link_spaces = [hosts_spec.link_space(doc, nodes, lk, place)
                   for lk, place in zip(links, places)]
    checks.check_addresses(doc, top.addressing, nodes, links, places, link_spaces)
    checks.check_families(doc, top.ip, nodes, links, places)

    raw: dict[str, Any] = {"name": top.name}
    if top.ip != 4:
        raw["ip"] = top.ip
    if "addressing" in data:
        raw["addressing"] = data["addressing"]
    if hosts:
        raw["hosts"] = {h: s.model_dump(mode="json", exclude_none=True) for h, s in hosts.items()}
        raw["underlay"] = underlay.model_dump(mode="json") if underlay else None
    if top.tenants is not None:
        raw["tenants"] = top.tenants
    raw["nodes"] = {k: dict(v) for k, v in nodes_raw.items()}
    raw["links"] = [_dump_link(lk) for lk in links]
    chains, groups = sfc.validate(doc, top.chains, top.groups, nodes, families(top.ip))
    if groups:
        raw["groups"] = {g: s.model_dump(exclude_none=True) for g, s in groups.items()}
    if chains:
        raw["chains"] = {c: s.as_dict() for c, s in chains.items()}
    return Lab(top.name, nodes, links, top.addressing, doc.source, raw, forms, doc, chains,
               groups, hosts, underlay, link_spaces, top.ip)


def _raw_nodes_and_links(doc: Document, top: LabFile
                         ) -> tuple[dict[str, Any], list[tuple[tuple[Any, ...], Any]]]:
    """The nodes and links as written, a ``chain:`` expanded first (a node written under
    ``nodes`` without a kind adds to the chain's node of that name), each link with its place."""
    nodes_raw: dict[str, Any] = {}
    links_raw: list[tuple[tuple[Any, ...], Any]] = []
    if top.chain is not None:
        gen_nodes, gen_links = chain.expand(top.chain, doc)
        nodes_raw.update(gen_nodes)
        links_raw += [(("chain",), lk) for lk in gen_links]
    for name, n in top.nodes.items():
        nodes_raw[name] = {**nodes_raw.get(name, {}), **n} if name in nodes_raw and "kind" not in n \
            else n
    links_raw += [(("links", i), lk) for i, lk in enumerate(top.links)]
    if not nodes_raw:
        raise doc.error("expected at least one node (under 'nodes', or a 'chain')", ("nodes",))
    return nodes_raw, links_raw


def _node_kind_and_params(doc: Document, kinds: KindTable, name: str, n: Any
                          ) -> tuple[Any, Any]:
    """Node ``name``'s kind (from the table) and its parameters, validated by that kind."""
    place = ("nodes", name)
    if not node_name_ok(str(name)):
        raise doc.error(f"expected a node name of {NAME_WORDS}, at most {NODE_NAME_MAX} "
                        f"characters, got {name!r}", place)
    if not isinstance(n, dict):
        raise doc.error("expected a mapping with 'kind'", place)
    kind = n.get("kind")
    known = ", ".join(kinds.node_kind_names())
    if kind is None:
        raise doc.error(f"missing key 'kind' (one of: {known})", place)
    ref = kinds.node_kind(str(kind))
    if ref is None:
        raise doc.error(f"unknown kind '{kind}' (expected one of: {known})", place + ("kind",))
    own = {k: v for k, v in n.items() if k not in NODE_PLACEMENT_KEYS and k != NODE_IMAGE_KEY}
    if NODE_IMAGE_KEY in n and ref.attachment != "namespace":
        raise doc.error(f"a {ref.name} is a bridge and runs no processes: 'image' is taken by "
                        "hosts, routers and function kinds", place + (NODE_IMAGE_KEY,))
    try:
        return ref, ref.params_model().model_validate(ref.params_input(own))
    except ValidationError as e:
        raise _pydantic_error(doc, e, place) from None


def _node_image(doc: Document, name: str, n: dict[str, Any]) -> ImageSpec | None:
    """Node ``name``'s container (its ``image`` key, checked as text), or ``None``."""
    if NODE_IMAGE_KEY not in n:
        return None
    try:
        return ImageSpec.model_validate(n[NODE_IMAGE_KEY])
    except ValidationError as e:
        raise _pydantic_error(doc, e, ("nodes", name, NODE_IMAGE_KEY)) from None


def _links(doc: Document, links_raw: list[tuple[tuple[Any, ...], Any]], default_mtu: int | None
           ) -> tuple[list[LinkSpec], list[tuple[Any, ...]]]:
    """Each link validated, with the lab's ``mtu`` where it sets none, and its place."""
    links: list[LinkSpec] = []
    places: list[tuple[Any, ...]] = []
    for place, lk in links_raw:
        if not isinstance(lk, dict):
            raise doc.error("expected a mapping with 'endpoints'", place)
        try:
            spec = LinkSpec.model_validate(lk)
        except ValidationError as e:
            raise _pydantic_error(doc, e, place) from None
        if spec.mtu is None and default_mtu is not None:
            spec = spec.model_copy(update={"mtu": default_mtu})
        links.append(spec)
        places.append(place)
    return links, places


def _dump_link(lk: LinkSpec) -> dict[str, Any]:
    eps: list[Any] = []
    for ep in lk.endpoints:
        d = ep.model_dump(by_alias=True, exclude_none=True)
        if d.keys() == {"node"}:
            eps.append(ep.node)
        elif d.keys() == {"node", "interface"}:
            eps.append(f"{ep.node}:{ep.interface}")
        else:
            for key in ("address", "address6"):
                if key in d:
                    d[key] = str(d[key])
            eps.append(d)
    out: dict[str, Any] = {"endpoints": eps}
    for k in ("mtu", "port", "connect", "attach", "rate"):
        v = getattr(lk, k)
        if v is not None:
            out[k] = v
    return out


__all__ = ["Lab", "LinkSpec", "EndpointSpec", "NodeSpec", "load_lab", "load_lab_dict",
           "load_lab_text", "format_place"]
