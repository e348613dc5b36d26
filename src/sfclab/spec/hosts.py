"""Hosts and tenants in the lab file: where each node runs and whose it is.

Model::

    hosts:                            # optional; a lab without it lives on this machine alone
      h1: {cpus: 1, memory: 512M}     # an emulated host: a namespace that plays its root context
      h2: {cpus: 1, address: 198.19.255.12}
    underlay: {subnet: 198.19.255.0/24, mtu: 1500}   # optional: the network joining the hosts
    tenants:                          # optional: isolated virtual networks
      red:  {nodes: [a1, r1, nat]}
      blue: {nodes: [b1, nat]}        # nat is shared: it reaches each tenant by its own interface
    nodes:
      a1: {kind: host, host: h1}      # 'host': where it runs (default: the first host)
      b1: {kind: host, host: h2, tenant: blue}   # 'tenant' (a name or a list) works too
    links:
      - endpoints: [a1, r1]
        attach: shortbridge           # how the link meets the node in the host context
                                      # (direct: the tunnel device in the node; comparison only)
        rate: 100mbit                 # shaped in the host context, out of the tenant's reach

A node with no tenant is *public*.  A node of several tenants (a shared function) is also
public.  A link belongs to the one space both its ends share (a tenant, or public); a link
between nodes that share none, or more than one, is refused: that is how nothing of one tenant
reaches another's nodes.  A host with ``ssh`` (see :class:`SshSpec`) is a real machine that
sfclab drives over SSH; it needs an ``address``, and a lab's hosts are all emulated or all real.
A host's ``node_selector`` (``up --kube`` only) names labels its Kubernetes Node must carry,
each key with that value, as a Pod's ``nodeSelector`` does: placement considers only those
Nodes for it.
"""

from __future__ import annotations

import os
import re
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator

from .addresses import address_problem
from .limits import MAX_HOST_CPUS
from .names import NAME_RE, NAME_WORDS
from .quantities import parse_rate, parse_size
from .strict import Strict as _Model
from .wording import pydantic_error

if TYPE_CHECKING:
    from .lab import LinkSpec, NodeSpec
    from .source import Document

#: how a link meets a node's interface in the host context
Attach = Literal["bridge", "shortbridge", "shortbridge-vxlandev", "ovs", "hybrid", "direct"]
ATTACH_WORDS = "bridge, shortbridge, shortbridge-vxlandev, ovs, hybrid or direct"
#: the smallest memory a host may have: every node process needs some
MIN_HOST_MEMORY = 8 * 1024 * 1024

Rate = Annotated[int, BeforeValidator(parse_rate)]
Size = Annotated[int, BeforeValidator(parse_size)]


class SshSpec(_Model):
    """How sfclab reaches a real host: SSH as ``user`` with the private ``key`` (a file; relative
    to the lab file), on ``port``; ``python`` is the remote interpreter that has sfclab (it runs
    the agent, :mod:`sfclab.realize.agent`), ``state`` the remote state directory, ``netns`` the
    namespace of this machine the connection leaves from (default: this process's),
    ``known_hosts`` the file of trusted host keys (default: ``~/.ssh/known_hosts``)."""

    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
    key: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    python: str = Field(default="python3", pattern=r"^[A-Za-z0-9_./+-]+$")
    state: str = Field(default="/run/sfclab", pattern=r"^/[A-Za-z0-9_./+-]*$")
    netns: str | None = None
    known_hosts: str | None = None

    @field_validator("state")
    @classmethod
    def _state(cls, v: str) -> str:
        if any(part in (".", "..") for part in v.split("/")):
            raise ValueError("an absolute folder path without '.' or '..' parts")
        return v


#: a Kubernetes label's key: an optional DNS-subdomain prefix and ``/``, then a name of 1 to 63
#: letters, digits, ``-``, ``_`` and ``.`` that starts and ends alphanumeric
LABEL_KEY_RE = re.compile(r"^(?:(?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]"
                          r"([-a-z0-9]*[a-z0-9])?)*/)?(?=.{1,63}$)[A-Za-z0-9]"
                          r"(?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")
#: a Kubernetes label's value: empty, or as a key's name part
LABEL_VALUE_RE = re.compile(r"^(?:(?=.{1,63}$)[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
#: labels one host's ``node_selector`` may name at most
MAX_NODE_SELECTOR = 16


class HostSpec(_Model):
    cpus: int | None = Field(default=None, ge=1, le=MAX_HOST_CPUS)
    memory: Size | None = None
    address: IPv4Address | None = None
    ssh: SshSpec | None = None
    #: ``up --kube``: labels the host's Kubernetes Node must carry (key -> value)
    node_selector: dict[str, str] | None = None

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return v
        if not 1 <= len(v) <= MAX_NODE_SELECTOR:
            raise ValueError(f"1 to {MAX_NODE_SELECTOR} Node labels (key: value)")
        for key, value in v.items():
            if not LABEL_KEY_RE.match(key):
                raise ValueError(f"a Kubernetes label key ([prefix/]name, the name 1 to 63 "
                                 f"letters, digits, -, _ or ., alphanumeric at both ends), "
                                 f"not {key!r}")
            if not LABEL_VALUE_RE.match(value):
                raise ValueError(f"a Kubernetes label value for {key} (empty, or 1 to 63 "
                                 f"letters, digits, -, _ or ., alphanumeric at both ends), "
                                 f"not {value!r}")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: int | None) -> int | None:
        if v is not None and v < MIN_HOST_MEMORY:
            raise ValueError("a memory size of at least 8M")
        return v


class UnderlaySpec(_Model):
    subnet: IPv4Network = IPv4Network("198.19.255.0/24")
    mtu: int = Field(default=1500, ge=1280, le=65535)

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: IPv4Network) -> IPv4Network:
        problem = address_problem(v) or address_problem(v.network_address)
        if problem:
            raise ValueError(f"a subnet of unicast addresses, not {problem}")
        if v.prefixlen > 29 or not v.is_private and not v.subnet_of(IPv4Network("198.18.0.0/15")):
            raise ValueError("a private subnet of /29 or larger, e.g. 198.19.255.0/24")
        return v


class TenantSpec(_Model):
    nodes: list[str] = Field(min_length=1)


def _located(doc: Document, model: Any, value: Any, place: tuple[Any, ...]) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as e:
        loc, msg = pydantic_error(e)
        raise doc.error(msg, place + loc) from None


#: the longest host or tenant name
HOST_NAME_MAX = 32


def _name(doc: Document, name: Any, place: tuple[Any, ...], what: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > HOST_NAME_MAX:
        raise doc.error(f"expected a {what} name of {NAME_WORDS}, at most {HOST_NAME_MAX} "
                        "characters, "
                        f"got {name!r}", place)
    return name


def validate_hosts(doc: Document, raw: Any, underlay_raw: Any) -> tuple[dict[str, HostSpec],
                                                                        UnderlaySpec | None]:
    """The ``hosts`` and ``underlay`` sections (both None: a lab on this machine alone)."""
    if raw is None:
        if underlay_raw is not None:
            raise doc.error("'underlay' needs a 'hosts' section (it joins the hosts)",
                            ("underlay",))
        return {}, None
    if not isinstance(raw, dict) or not raw:
        raise doc.error("expected a mapping of host names to {cpus, memory, address}", ("hosts",))
    underlay = _located(doc, UnderlaySpec, underlay_raw or {}, ("underlay",))
    hosts: dict[str, HostSpec] = {}
    seen: dict[IPv4Address, str] = {}
    for name, h in raw.items():
        place = ("hosts", name)
        _name(doc, name, place, "host")
        spec = _located(doc, HostSpec, {} if h is None else h, place)
        if spec.ssh is not None:
            spec = _check_ssh(doc, spec, place)
        if spec.address is not None:
            a = spec.address
            if a not in underlay.subnet or a in (underlay.subnet.network_address,
                                                 underlay.subnet.broadcast_address):
                raise doc.error(f"expected a host address in the underlay subnet "
                                f"{underlay.subnet}, got {a}", place + ("address",))
            if a in seen:
                raise doc.error(f"address {a} is already host '{seen[a]}''s", place + ("address",))
            seen[a] = name
        hosts[name] = spec
    remote = [n for n, h in hosts.items() if h.ssh is not None]
    if remote and len(remote) != len(hosts):
        other = next(n for n, h in hosts.items() if h.ssh is None)
        raise doc.error("a lab's hosts are all emulated or all reached over SSH (an emulated "
                        f"host's underlay cannot reach a real one); host '{other}' has no "
                        "'ssh'", ("hosts", other))
    if len(hosts) > underlay.subnet.num_addresses - 2:
        raise doc.error(f"the underlay subnet {underlay.subnet} has too few addresses for "
                        f"{len(hosts)} hosts", ("underlay", "subnet"))
    return hosts, underlay


#: the largest private key file read (an RSA 16384-bit key in PEM is about 13 kB)
MAX_KEY_BYTES = 64 * 1024


def key_problem(f: Path) -> str | None:
    """Why ``f`` is not a private key file ssh can use (PEM or OpenSSH format), or None.  Only
    the head is read, and only a file of at most :data:`MAX_KEY_BYTES`."""
    size = f.stat().st_size
    if size > MAX_KEY_BYTES:
        return f"{size} bytes; a key file is at most {MAX_KEY_BYTES}"
    with f.open("rb") as fh:
        head = fh.read(MAX_KEY_BYTES)
    first = head.lstrip().split(b"\n", 1)[0].strip()
    if not (first.startswith(b"-----BEGIN ") and first.endswith(b"PRIVATE KEY-----")):
        return "its first line is not '-----BEGIN ... PRIVATE KEY-----'"
    return None


def _check_ssh(doc: Document, spec: HostSpec, place: tuple[Any, ...]) -> HostSpec:
    """A real host: it needs its underlay ``address``; its key must be a readable file (made
    absolute here, relative to the lab file's folder)."""
    assert spec.ssh is not None
    if spec.address is None:
        raise doc.error("a host reached over SSH needs its 'address' (on the underlay: sfclab "
                        "connects to it and tunnels end there)", place)
    files = {}
    for what, field in (("a private key file", "key"), ("a known-hosts file", "known_hosts")):
        given = getattr(spec.ssh, field)
        if given is None:
            continue
        f = Path(given).expanduser()
        if not f.is_absolute():
            src = Path(doc.source)
            f = (src.parent if src.is_file() else Path.cwd()) / f
        if not f.is_file():
            raise doc.error(f"expected {what}, got {given!r} ({f} is "
                            f"{'a folder' if f.is_dir() else 'missing'})", place + ("ssh", field))
        if not os.access(f, os.R_OK):
            raise doc.error(f"the file {f} cannot be read", place + ("ssh", field))
        if field == "key":
            problem = key_problem(f)
            if problem:
                raise doc.error(f"expected a private key file, got {given!r} ({problem})",
                                place + ("ssh", field))
        files[field] = str(f.resolve())
    ns = spec.ssh.netns
    if ns is not None and (not re.fullmatch(r"[A-Za-z0-9_:@-][A-Za-z0-9_:@.-]{0,254}", ns)):
        raise doc.error(f"expected a namespace name (letters, digits, _ : @ . -), got {ns!r}",
                        place + ("ssh", "netns"))
    return spec.model_copy(update={"ssh": spec.ssh.model_copy(update=files)})


def node_placement(doc: Document, hosts: dict[str, HostSpec],
                   nodes_raw: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """Each node's host (the first host when it names none; None in a lab without hosts)."""
    first = next(iter(hosts), None)
    out: dict[str, str | None] = {}
    for node, n in nodes_raw.items():
        h = n.get("host") if isinstance(n, dict) else None
        if h is None:
            out[node] = first
            continue
        if not hosts:
            raise doc.error("'host' needs a 'hosts' section naming the lab's hosts",
                            ("nodes", node, "host"))
        if not isinstance(h, str) or h not in hosts:
            raise doc.error(f"unknown host {h!r} (hosts are: {', '.join(hosts)})",
                            ("nodes", node, "host"))
        out[node] = h
    return out


def validate_tenants(doc: Document, raw: Any,
                     nodes_raw: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each node's tenants, in the order the tenants are named; () for a public node."""
    names: list[str] = []
    member: dict[str, list[str]] = {n: [] for n in nodes_raw}
    if raw is not None:
        if not isinstance(raw, dict) or not raw:
            raise doc.error("expected a mapping of tenant names to {nodes: [...]}", ("tenants",))
        for t, spec_raw in raw.items():
            place = ("tenants", t)
            _name(doc, t, place, "tenant")
            spec = _located(doc, TenantSpec, spec_raw, place)
            names.append(t)
            for i, node in enumerate(spec.nodes):
                if node not in nodes_raw:
                    raise doc.error(f"unknown node '{node}' (nodes are: "
                                    f"{', '.join(sorted(nodes_raw))})", place + ("nodes", i))
                if t in member[node]:
                    raise doc.error(f"node '{node}' is named twice", place + ("nodes", i))
                member[node].append(t)
    for node, n in nodes_raw.items():
        v = n.get("tenant") if isinstance(n, dict) else None
        if v is None:
            continue
        given = [v] if isinstance(v, str) else v
        if not isinstance(given, list) or not given or not all(isinstance(x, str) for x in given):
            raise doc.error("expected a tenant name or a list of tenant names",
                            ("nodes", node, "tenant"))
        for t in given:
            _name(doc, t, ("nodes", node, "tenant"), "tenant")
            if t not in names:
                names.append(t)
            if t not in member[node]:
                member[node].append(t)
    order = {t: i for i, t in enumerate(names)}
    return {n: tuple(sorted(ts, key=order.__getitem__)) for n, ts in member.items()}


def spaces(tenants: tuple[str, ...]) -> set[str | None]:
    """The address spaces a node is on: its tenants, and public (None) if it has no tenant or
    several (a shared function reaches the public side too)."""
    out: set[str | None] = set(tenants)
    if len(tenants) != 1:
        out.add(None)
    return out


def link_space(doc: Document, nodes: dict[str, NodeSpec], link: LinkSpec,
               place: tuple[Any, ...]) -> str | None:
    """The one space (tenant name, or None for public) a link belongs to."""
    a, b = (nodes[ep.node] for ep in link.endpoints)
    common = spaces(a.tenants) & spaces(b.tenants)
    if len(common) == 1:
        return next(iter(common))
    def words(n: NodeSpec) -> str:
        return f"tenant {', '.join(n.tenants)}" if n.tenants else "public"
    if not common:
        raise doc.error(f"this link joins '{a.name}' ({words(a)}) and '{b.name}' ({words(b)}): "
                        "nodes of one tenant cannot reach another's; share a node by listing "
                        "it in both tenants", place)
    raise doc.error(f"this link joins two nodes shared by the same tenants "
                    f"('{a.name}', '{b.name}'): say which tenant it carries by giving one of "
                    "them fewer tenants", place)


def check_hosted(doc: Document, hosts: dict[str, HostSpec], nodes: dict[str, NodeSpec],
                 links: list[LinkSpec], places: list[tuple[Any, ...]]) -> None:
    """What hosts add to a link's and a node's checks."""
    for lk, place in zip(links, places):
        for key in ("attach", "rate"):
            if getattr(lk, key) is not None and not hosts:
                raise doc.error(f"'{key}' needs a 'hosts' section: the link is joined and "
                                "shaped in a host's context", place + (key,))
        if lk.attach is not None or lk.rate is not None:
            for j, ep in enumerate(lk.endpoints):
                if nodes[ep.node].attachment == "ovs-bridge":
                    raise doc.error("an ovs-bridge node has no interface of its own for a host "
                                    "context to meet; use 'attach: ovs' on the link instead",
                                    place + ("endpoints", j))
    for n in nodes.values():
        if n.is_bridge and len(n.tenants) > 1:
            raise doc.error(f"a {n.kind} joins everything on it at layer 2: it cannot be shared "
                            f"by tenants ({', '.join(n.tenants)}); give each tenant its own",
                            ("nodes", n.name))
    if hosts:
        for n in nodes.values():
            if n.attachment == "ovs-bridge":
                raise doc.error("ovs-bridge nodes live in this machine's root namespace, which "
                                "labs with 'hosts' never use; link the nodes with 'attach: ovs' "
                                "(an OVS bridge in each host's context) instead",
                                ("nodes", n.name, "kind"))
