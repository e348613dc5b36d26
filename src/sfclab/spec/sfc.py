"""Service function chains and groups in the lab file (the ``chains:`` and ``groups:`` sections).

Model (networking-sfc's flow classifier, port pair group and port chain, in a lab's words)::

    chains:
      web:                                   # a chain name (the name rule of nodes)
        classifiers:                         # one or more; the best priority wins
          - {ingress: src, proto: udp, src: 198.18.0.0/16, dport: 7000-7100, priority: 10}
          - {ingress: src, proto: tcp, dst: 198.18.4.0/24}   # omitted fields match anything
        functions: [fw, fwpool, dpi]         # function nodes or groups, in the order visited
        egress: dst                          # where the chain delivers (unlabelled)
        symmetric: true                      # the reverse flow visits the same instances back
        ttl: 64                              # the label stack's TTL at the ingress
        encap: mpls                          # mpls (default), nsh or srv6: the on-wire encoding
    groups:
      fwpool: {instances: [fw1, fw2], weights: [1, 3]}   # flows spread by weight, sticky

``ingress`` is the node where the label stack is pushed: a host classifies what it sends, a
forwarding node what it receives.  ``family`` is ipv4, ipv6 or any: the packets it matches
(default: the family of ``src``/``dst``, else ipv4); a flow of the other family never matches,
and ``any`` takes no prefix; a family the lab's links do not carry is refused
(:func:`family_problem`).  ``proto`` is tcp, udp, icmp (IPv4), icmpv6 (IPv6) or any (for
IPv6 the upper-layer header, up to four extension headers walked); ``src``/``dst`` are IPv4 or IPv6
prefixes; ``sport``/``dport`` a port or a range ``lo-hi`` (tcp and udp only); ``priority`` an
integer from 0 to 65535 (default 0; higher wins, equal priorities: the earlier classifier).
Unmatched traffic is untouched and follows routes.  ``encap`` is how the planned path is written
on the wire between hops: ``mpls`` (an RFC 3032 label stack, the default), ``nsh`` (an RFC 8300
header; its TTL field has 6 bits, so ``ttl`` is at most 63 and 63 by default) or ``srv6``; what
each needs is in :mod:`sfclab.plan.encap`.  What a chain needs of the topology (a path
of direct links between its stops) is checked by the planner (:mod:`sfclab.plan.sfc`).
"""

from __future__ import annotations

import math
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Any, Literal, TypeVar

from pydantic import (Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from .limits import (LABELS_PER_FUNCTION, MAX_CHAIN_PATHS, MAX_CLASSES, MAX_FUNCTIONS,
                     MAX_GROUP_INSTANCES, MAX_LABELS, MAX_MASKS)
from .names import NAME_WORDS, node_name_ok
from .ports import port_prefixes  # noqa: F401 - one copy (light, for the agent)
from .source import Document
from .strict import Strict
from .wording import pydantic_error

M = TypeVar("M", bound=Strict)


def port_range(v: Any) -> tuple[int, int]:
    """``80`` or ``"7000-7100"`` -> (lo, hi), 0 <= lo <= hi <= 65535."""
    if isinstance(v, bool):
        raise ValueError("a port or a range lo-hi")
    if isinstance(v, int):
        lo = hi = v
    elif isinstance(v, str):
        a, sep, b = v.partition("-")
        if not a.strip().isdigit() or (sep and not b.strip().isdigit()):
            raise ValueError("a port or a range lo-hi")
        lo, hi = int(a), int(b) if sep else int(a)
    elif isinstance(v, (list, tuple)) and len(v) == 2 and \
            all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        lo, hi = v
    else:
        raise ValueError("a port or a range lo-hi")
    if not 0 <= lo <= hi <= 65535:
        raise ValueError("ports from 0 to 65535, the lower first")
    return lo, hi


#: prefix lengths of source, destination, ports; whether proto and family are matched
Mask = tuple[int, int, int, int, bool, bool]
Family = Literal["ipv4", "ipv6", "any"]
#: a chain's on-wire encoding of its planned path (what each needs: sfclab.plan.encap)
Encap = Literal["mpls", "srv6", "nsh"]
#: the largest TTL of an NSH chain (RFC 8300's TTL field has 6 bits), also its default
NSH_MAX_TTL = 63


def encap_ttl_default(d: Any) -> Any:
    """A chain's keys with ``ttl`` filled in for an NSH chain that gives none (63, the largest
    its header holds; other encodings keep the model's default, 64)."""
    if isinstance(d, dict) and d.get("encap") == "nsh" and "ttl" not in d:
        return {**d, "ttl": NSH_MAX_TTL}
    return d


def encap_ttl_check(ttl: int, encap: Any) -> int:
    """``ttl`` of a chain of ``encap``: an NSH chain's fits its 6-bit field."""
    if encap == "nsh" and ttl > NSH_MAX_TTL:
        raise ValueError(f"a TTL of at most {NSH_MAX_TTL} for an NSH chain (RFC 8300's TTL "
                         f"field has 6 bits), got {ttl}")
    return ttl


#: the family whose packets each protocol name matches, where it is one family's
PROTO_FAMILY = {"icmp": "ipv4", "icmpv6": "ipv6"}


class ClassifierSpec(Strict):
    ingress: str
    family: Family = "ipv4"
    proto: Literal["tcp", "udp", "icmp", "icmpv6", "any"] = "any"
    src: IPv4Network | IPv6Network | None = None
    dst: IPv4Network | IPv6Network | None = None
    sport: tuple[int, int] | None = None
    dport: tuple[int, int] | None = None
    priority: int = Field(default=0, ge=0, le=65535)

    @field_validator("sport", "dport", mode="before")
    @classmethod
    def _ports(cls, v: Any) -> Any:
        return None if v is None else port_range(v)

    @field_validator("src", "dst", mode="before")
    @classmethod
    def _prefix_written(cls, v: Any) -> Any:
        """A prefix is written as one (a number or true would be taken as an address)."""
        if v is not None and not isinstance(v, (str, IPv4Network, IPv6Network)):
            raise ValueError("an IPv4 or IPv6 prefix such as '198.18.0.0/16' or "
                             "'2001:2::/48'")
        if isinstance(v, str):  # one message, not one per family the union tries
            try:
                return ip_network(v.strip())
            except ValueError as e:
                raise ValueError(f"an IPv4 or IPv6 prefix without host bits ({e})") from None
        return v

    @model_validator(mode="before")
    @classmethod
    def _family_of_prefixes(cls, d: Any) -> Any:
        """Without ``family``: that of the prefixes (one written with ':' is IPv6), else ipv4."""
        if not isinstance(d, dict) or "family" in d:
            return d
        written = [d.get(k) for k in ("src", "dst") if d.get(k) is not None]
        if any(isinstance(p, IPv6Network) or (isinstance(p, str) and ":" in p)
               for p in written):
            return {**d, "family": "ipv6"}
        return d

    @model_validator(mode="after")
    def _one_family(self) -> ClassifierSpec:
        for k in ("src", "dst"):
            p = getattr(self, k)
            if p is None:
                continue
            if self.family == "any":
                raise ValueError(f"no {k} prefix with family any (a prefix is of one family: "
                                 "ipv4 or ipv6)")
            if f"ipv{p.version}" != self.family:
                raise ValueError(f"{k} {p} is an IPv{p.version} prefix; family is "
                                 f"{self.family}")
        want = PROTO_FAMILY.get(self.proto)
        if want is not None and want != self.family:
            raise ValueError(f"proto {self.proto} matches {want} packets only; family is "
                             f"{self.family}")
        return self

    @model_validator(mode="after")
    def _ports_need_tcp_udp(self) -> ClassifierSpec:
        if (self.sport or self.dport) and self.proto not in ("tcp", "udp"):
            raise ValueError("ports only with proto tcp or udp")
        return self

    def entry_count(self) -> int:
        """Data-plane entries of this classifier (one per combination of port prefixes),
        counted without making them."""
        return len(self._lengths(self.sport)) * len(self._lengths(self.dport))

    def masks(self, *, reverse: bool = False) -> set[Mask]:
        """The wildcard masks of its entries (as ``plan.sfc.mask_key``), without making them;
        ``reverse``: those of the reverse direction of a symmetric chain (ends swapped)."""
        sl = self.src.prefixlen if self.src else 0
        dl = self.dst.prefixlen if self.dst else 0
        sps, dps = set(self._lengths(self.sport)), set(self._lengths(self.dport))
        if reverse:
            sl, dl, sps, dps = dl, sl, dps, sps
        return {(sl, dl, a, b, self.proto != "any", self.family != "any")
                for a in sps for b in dps}

    @staticmethod
    def _lengths(r: tuple[int, int] | None) -> list[int]:
        return [0] if r is None else [n for _, n in port_prefixes(*r)]

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ingress": self.ingress, "proto": self.proto}
        if self.family != "ipv4":
            d["family"] = self.family
        for k in ("src", "dst"):
            if getattr(self, k) is not None:
                d[k] = str(getattr(self, k))
        for k in ("sport", "dport"):
            r = getattr(self, k)
            if r is not None:
                d[k] = r[0] if r[0] == r[1] else f"{r[0]}-{r[1]}"
        d["priority"] = self.priority
        return d


class GroupSpec(Strict):
    instances: list[str] = Field(min_length=1, max_length=MAX_GROUP_INSTANCES)
    weights: list[int] | None = None

    @model_validator(mode="after")
    def _weights(self) -> GroupSpec:
        if self.weights is not None:
            if len(self.weights) != len(self.instances):
                raise ValueError(f"{len(self.instances)} weights, one per instance")
            if any(w < 1 or w > 1000 for w in self.weights):
                raise ValueError("weights from 1 to 1000")
        if len(set(self.instances)) != len(self.instances):
            raise ValueError("each instance once")
        return self

    def weight_list(self) -> list[int]:
        return list(self.weights) if self.weights else [1] * len(self.instances)


class SfcChainSpec(Strict):
    classifiers: list[ClassifierSpec] = Field(min_length=1)
    functions: list[str] = Field(min_length=1, max_length=MAX_FUNCTIONS)
    egress: str
    symmetric: bool = False
    #: before ``ttl``: its check reads it
    encap: Encap = "mpls"
    ttl: int = Field(default=64, ge=1, le=255)
    #: padding entries pushed below each path's labels (the stack depth without more hops;
    #: bounded here by the stack, by the path's own labels in sfclab.plan.sfc)
    pad_labels: int = Field(default=0, ge=0, le=MAX_LABELS - LABELS_PER_FUNCTION)

    _ttl_default = model_validator(mode="before")(encap_ttl_default)

    @field_validator("ttl")
    @classmethod
    def _ttl_fits(cls, v: int, info: ValidationInfo) -> int:
        return encap_ttl_check(v, info.data.get("encap"))

    def as_dict(self) -> dict[str, Any]:
        d = {"classifiers": [c.as_dict() for c in self.classifiers],
             "functions": list(self.functions), "egress": self.egress,
             "symmetric": self.symmetric, "ttl": self.ttl}
        if self.encap != "mpls":
            d["encap"] = self.encap
        if self.pad_labels:
            d["pad_labels"] = self.pad_labels
        return d


def family_problem(family: str, carried: tuple[int, ...]) -> str | None:
    """Why a classifier of ``family`` (ipv4, ipv6, any) can match nothing in a lab whose links
    carry the families ``carried`` (``ip: 6`` carries no IPv4: a classifier of family ipv4,
    the default without an IPv6 prefix, would never match), or None."""
    if family == "any" or int(family[-1]) in carried:
        return None
    return (f"a classifier of family {family} in a lab without IPv{family[-1]} (ip: "
            f"{'6' if carried == (6,) else '4'}) matches nothing: give it family "
            f"ipv{carried[0]} or any (without family, a classifier is of its prefixes' family, "
            "else ipv4)")


def _section(doc: Document, section: str, raw: Any, model: type[M]) -> dict[str, M]:
    """One named section (``chains`` or ``groups``): each entry validated by ``model``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise doc.error(f"expected a mapping of {section[:-1]} names", (section,))
    out: dict[str, M] = {}
    for name, body in raw.items():
        place: tuple[Any, ...] = (section, name)
        if not node_name_ok(str(name)):
            raise doc.error(f"expected a {section[:-1]} name of {NAME_WORDS}, got {name!r}",
                            place)
        if not isinstance(body, dict):
            raise doc.error("expected a mapping", place)
        try:
            out[str(name)] = model.model_validate(body)
        except ValidationError as e:
            loc, msg = pydantic_error(e)
            raise doc.error(msg, place + loc) from None
    return out


def validate(doc: Document, chains: Any, groups: Any, nodes: dict[str, Any],
             carried: tuple[int, ...] = (4,)
             ) -> tuple[dict[str, SfcChainSpec], dict[str, GroupSpec]]:
    """The ``chains`` and ``groups`` sections against the lab's ``nodes`` (name -> NodeSpec)
    and the families its links carry (``carried``: 4, 6; :func:`family_problem`).
    Raises a located :class:`~sfclab.errors.SpecError`."""
    out_groups = _section(doc, "groups", groups, GroupSpec)
    out_chains = _section(doc, "chains", chains, SfcChainSpec)

    def is_function(n: str) -> bool:
        return n in nodes and nodes[n].forwards and not nodes[n].is_bridge

    for g, group in out_groups.items():
        if g in nodes:
            raise doc.error(f"group '{g}' has the name of a node", ("groups", g))
        for i, inst in enumerate(group.instances):
            if not is_function(inst):
                raise doc.error(f"expected a function node, got {inst!r}",
                                ("groups", g, "instances", i))
    for c, spec in out_chains.items():
        for i, cl in enumerate(spec.classifiers):
            problem = family_problem(cl.family, carried)
            if problem:
                raise doc.error(problem, ("chains", c, "classifiers", i, "family"))
            n = nodes.get(cl.ingress)
            if n is None or n.is_bridge:
                raise doc.error(f"expected a host or function node, got {cl.ingress!r}",
                                ("chains", c, "classifiers", i, "ingress"))
            if cl.ingress == spec.egress:
                raise doc.error(f"'{cl.ingress}' is the chain's egress too; a chain leads from "
                                "its ingress to another node",
                                ("chains", c, "classifiers", i, "ingress"))
        for i, f in enumerate(spec.functions):
            if f in out_groups:
                continue
            if not is_function(f):
                what = "a node that does not forward" if f in nodes else "no such node or group"
                raise doc.error(f"expected a function node or a group, got {f!r} ({what})",
                                ("chains", c, "functions", i))
            if any(f == cl.ingress for cl in spec.classifiers):
                raise doc.error(f"'{f}' is the chain's ingress; a chain's functions follow it",
                                ("chains", c, "functions", i))
        eg = nodes.get(spec.egress)
        if eg is None or eg.is_bridge:
            raise doc.error(f"expected a host or function node, got {spec.egress!r}",
                            ("chains", c, "egress"))
        if spec.egress in spec.functions:
            raise doc.error(f"'{spec.egress}' is one of the chain's functions, not its egress",
                            ("chains", c, "egress"))
    _check_growth(doc, out_chains, out_groups)
    return out_chains, out_groups


def growth_problem(stops: list[int]) -> str | None:
    """What is wrong with a chain whose stops have ``stops`` instances each (1: a function,
    n: a group of n), counted before the planner makes a single path: labels per stack (each
    stop takes a proxy and a forward label) and paths (the product of the counts)."""
    if LABELS_PER_FUNCTION * len(stops) > MAX_LABELS:
        return (f"expected at most {MAX_LABELS // LABELS_PER_FUNCTION} functions: each takes at "
                f"least {LABELS_PER_FUNCTION} labels and a stack holds at most {MAX_LABELS}, "
                f"got {len(stops)}")
    paths = math.prod(stops)
    if paths > MAX_CHAIN_PATHS:
        return (f"the groups make {paths:,} paths (the product of their instance counts); at "
                f"most {MAX_CHAIN_PATHS} per chain")
    return None


def _check_growth(doc: Document, chains: dict[str, SfcChainSpec],
                  groups: dict[str, GroupSpec]) -> None:
    for c, spec in chains.items():
        problem = growth_problem([len(groups[f].instances) if f in groups else 1
                                  for f in spec.functions])
        if problem:
            raise doc.error(problem, ("chains", c, "functions"))
    counter = EntryCounter()
    for c, spec in chains.items():
        for i, cl in enumerate(spec.classifiers):
            problem = counter.add(cl, spec.symmetric)
            if problem:
                raise doc.error(problem, ("chains", c, "classifiers", i))


class EntryCounter:
    """Classifier entries and wildcard masks counted, classifier by classifier, against the
    data plane's map sizes before any entry is made (port ranges make one entry per prefix,
    in each direction of a symmetric chain)."""

    def __init__(self, masks: set[Mask] | None = None, entries: int = 0):
        self.masks: set[Mask] = set(masks or ())
        self.entries = entries

    def add(self, c: ClassifierSpec, symmetric: bool) -> str | None:
        """Count ``c``; what is wrong once it is counted (None: it fits)."""
        self.entries += c.entry_count() * (2 if symmetric else 1)
        if self.entries > MAX_CLASSES:
            return (f"the classifiers up to here make {self.entries:,} entries (port ranges "
                    f"make one per prefix, in each direction); the lab's classifier map holds "
                    f"at most {MAX_CLASSES:,}")
        self.masks |= c.masks()
        if symmetric:
            self.masks |= c.masks(reverse=True)
        if len(self.masks) > MAX_MASKS:
            return (f"the classifiers up to here need {len(self.masks)} distinct wildcard masks "
                    f"(port ranges need one per prefix length); at most {MAX_MASKS}")
        return None
