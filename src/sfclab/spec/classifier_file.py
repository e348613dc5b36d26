"""A file of classifiers (``sfclab chain classify LAB CHAIN --from-file F``), read fast.

The file is a YAML or JSON list of classifiers in the lab file's form (or a mapping whose
``classifiers`` key holds the list)::

    - {ingress: src, proto: udp, src: 10.0.0.1/32, dport: 9999}
    - {ingress: src, proto: tcp, dport: 80-8080, priority: 10}

A file may hold 100,000 of them, so neither the reading nor the checking goes the lab file's
way (a position-keeping YAML tree and a pydantic model per entry: about a minute):

* **Reading.**  JSON by the ``json`` module.  YAML whose every line is a list item of plain
  scalars -- flow style (``- {k: v, ...}``) or block style (``- k: v`` then ``  k: v``), with
  comments and blank lines -- by a line reader that resolves each scalar with PyYAML's own
  implicit resolver (only strings and plain decimal integers are taken; anything else YAML would
  turn into a boolean, null, float, octal or date sends the file to the general reader).  Other
  YAML: libyaml (``CSafeLoader``), which keeps the last of duplicate keys where the other
  readers refuse them; YAML with aliases: the lab file's bounded reader.  Each item's line is
  known on the first two ways; on the others a bad entry is located by the lab file's reader.
* **Checking.**  :func:`fast_rule` accepts only the plain forms of :class:`ClassifierSpec`'s
  fields (a str ingress, no family but ipv4, a proto name, ``a.b.c.d[/n]`` prefixes without host
  bits, an int port or a ``lo-hi`` string, an int priority) and never anything the model
  refuses (IPv6 classifiers take the model's way); whatever it does
  not accept is validated by the model itself, so a bad entry gets exactly the lab file's message,
  with the file, the place (``[12].dport``) and the line (exit status 2).

A :class:`Rule` is a validated classifier in integers: prefixes as (address, length), port
ranges as (lo, hi).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

from ..errors import SpecError
from .sfc import ClassifierSpec
from .reading import decode, read_bytes, scan_json, scan_yaml, source_name
from .source import Document, format_place
from .wording import pydantic_error


class Rule(NamedTuple):
    """A validated classifier: what :class:`ClassifierSpec` holds, as integers."""

    ingress: str
    proto: str
    src: tuple[int, int] | None  # (address, prefix length)
    dst: tuple[int, int] | None
    sport: tuple[int, int] | None  # (lo, hi)
    dport: tuple[int, int] | None
    priority: int
    family: str = "ipv4"  # ipv4 | ipv6 | any; the addresses are 128-bit ones with ipv6

    @classmethod
    def of(cls, c: ClassifierSpec) -> Rule:
        def net(n: IPv4Network | IPv6Network | None) -> tuple[int, int] | None:
            return None if n is None else (int(n.network_address), n.prefixlen)

        return cls(c.ingress, c.proto, net(c.src), net(c.dst), c.sport, c.dport, c.priority,
                   c.family)

    def spec(self) -> ClassifierSpec:
        """The model form (for what needs one: a few entries, never the bulk path)."""
        def net(p: tuple[int, int] | None) -> IPv4Network | IPv6Network | None:
            if p is None:
                return None
            return IPv6Network(p) if self.family == "ipv6" else IPv4Network(p)

        return ClassifierSpec(ingress=self.ingress, proto=self.proto,  # type: ignore[arg-type]
                              family=self.family,  # type: ignore[arg-type]
                              src=net(self.src), dst=net(self.dst), sport=self.sport,
                              dport=self.dport, priority=self.priority)


# ------------------------------------------------------------------------------ checking
_FIELDS = frozenset(ClassifierSpec.model_fields)
_PROTOS = frozenset(("tcp", "udp", "icmp", "any"))
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_PREFIX = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}(?:/(3[0-2]|[12]?[0-9]))?")
_PORTS = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")


def _prefix(v: Any) -> tuple[int, int] | None | bool:
    """``a.b.c.d[/n]`` without host bits -> (address, n); False: not a plain form."""
    if type(v) is not str:
        return None if v is None else False
    m = _PREFIX.fullmatch(v)
    if m is None:
        return False
    a, b, c, d, n = m.groups()
    addr = (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d)
    plen = 32 if n is None else int(n)
    if addr & ((1 << (32 - plen)) - 1):
        return False  # host bits set: the model says so
    return addr, plen


def _ports(v: Any) -> tuple[int, int] | None | bool:
    if type(v) is int:
        return (v, v) if 0 <= v <= 65535 else False
    if type(v) is str:
        m = _PORTS.fullmatch(v)
        if m is None:
            return False
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else int(m.group(2))
        return (lo, hi) if lo <= hi <= 65535 else False
    return None if v is None else False


def fast_rule(d: Any) -> Rule | None:
    """``d`` as a :class:`Rule` when it is in the plain forms (see the module docstring); None
    when the model must decide (which may still accept it)."""
    if type(d) is not dict or not d.keys() <= _FIELDS:
        return None
    ingress = d.get("ingress")
    proto = d.get("proto", "any")
    priority = d.get("priority", 0)
    if type(ingress) is not str or type(proto) is not str or proto not in _PROTOS \
            or type(priority) is not int or not 0 <= priority <= 65535 \
            or d.get("family", "ipv4") != "ipv4":  # IPv6 and any: the model decides
        return None
    src, dst = _prefix(d.get("src")), _prefix(d.get("dst"))
    sport, dport = _ports(d.get("sport")), _ports(d.get("dport"))
    if src is False or dst is False or sport is False or dport is False:
        return None
    if (sport or dport) and proto not in ("tcp", "udp"):
        return None
    return Rule(ingress, proto, src, dst, sport, dport, priority)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- reading
class _Items(NamedTuple):
    items: list[Any]
    prefix: tuple[str, ...]  # ("classifiers",) when the list sits under that key
    #: (item index, key or None) -> 1-based line; None when unknown
    line_of: Callable[[int, str | None], int | None] | None


_SCALAR = r"[A-Za-z0-9][A-Za-z0-9._/-]*"
_ONE = rf"{_SCALAR}:[ \t]+{_SCALAR}"
_ITEM_FLOW = re.compile(rf"-[ \t]+\{{[ \t]*((?:{_ONE}(?:[ \t]*,[ \t]*{_ONE})*)?)[ \t]*\}}"
                        rf"[ \t]*(?:#.*)?")
_PAIR = re.compile(rf"({_SCALAR}):[ \t]+({_SCALAR})")
_ITEM_BLOCK = re.compile(rf"-([ \t]+)({_SCALAR}):[ \t]+({_SCALAR})[ \t]*(?:#.*)?")
_MORE_BLOCK = re.compile(rf"([ \t]+)({_SCALAR}):[ \t]+({_SCALAR})[ \t]*(?:#.*)?")
_BLANK = re.compile(r"[ \t]*(?:#.*)?")
_PLAIN_INT = re.compile(r"0|[1-9][0-9]*")


class _NotPlain(Exception):
    """The line reader cannot vouch for this file: the general YAML reader takes it."""


class _Duplicate(Exception):
    """A key given twice in one item (``args``: item index, key, line)."""


@lru_cache(maxsize=4096)
def _resolve(text: str) -> str | int:
    """A plain scalar as YAML reads it, for the two kinds the line reader takes."""
    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    if tag == "tag:yaml.org,2002:str":
        return text
    if tag == "tag:yaml.org,2002:int" and _PLAIN_INT.fullmatch(text):
        return int(text)
    raise _NotPlain(text)


def _scalar_reader() -> Callable[[str], str | int]:
    """A scalar reader with a cache of its own (keys and most values repeat)."""
    seen: dict[str, str | int] = {}

    def scalar(text: str) -> str | int:
        v = seen.get(text)
        if v is None:
            # no implicit YAML type (bool, null, int, float, date) admits '/': a string
            v = text if "/" in text else _resolve(text)
            if len(seen) < 65536:
                seen[text] = v
        return v
    return scalar


class _Lines(NamedTuple):
    """What the line reader read: the items, each item's line, and the line of each key of a
    block-style item (flow-style items are one line)."""

    items: list[dict[str, Any]]
    at: list[int]
    keys: list[dict[str, int] | None]

    def line_of(self, i: int, key: str | None) -> int:
        where = self.keys[i]
        return where.get(key, self.at[i]) if where and key else self.at[i]


def _read_lines(text: str) -> _Lines:
    """The line reader (see the module docstring); raises _NotPlain or _Duplicate."""
    out = _Lines([], [], [])
    items, at, keys = out
    scalar, findall = _scalar_reader(), _PAIR.findall
    blank, flow, block, more = (_BLANK.fullmatch, _ITEM_FLOW.fullmatch, _ITEM_BLOCK.fullmatch,
                                _MORE_BLOCK.fullmatch)
    indent = -1
    for n, line in enumerate(text.split("\n"), 1):
        m = flow(line)
        if m is not None:
            body: dict[Any, Any] = {}
            for key, value in findall(m.group(1)):
                k = scalar(key)
                if k in body:
                    raise _Duplicate(len(items), k, n)
                body[k] = scalar(value)
            if not all(type(k) is str for k in body):
                raise _NotPlain(line)
            items.append(body)
            at.append(n)
            keys.append(None)
            indent = -1
            continue
        if blank(line):
            continue
        m = block(line)
        if m is not None:
            indent = 1 + len(m.group(1))
            items.append({})
            at.append(n)
            keys.append({})
        else:
            m = more(line)
            if m is None or indent < 0 or len(m.group(1)) != indent:
                raise _NotPlain(line)
        if "\t" in m.group(1):
            raise _NotPlain(line)
        k = scalar(m.group(2))
        if type(k) is not str:
            raise _NotPlain(line)
        if k in items[-1]:
            raise _Duplicate(len(items) - 1, k, n)
        items[-1][k] = scalar(m.group(3))
        keys[-1][k] = n  # type: ignore[index]
    if not items:
        raise _NotPlain("no items")
    return out


def _json_line_of(text: str) -> Callable[[int, str | None], int | None]:
    """Where item i (and its key) of a JSON list starts, found on demand (errors only)."""
    def line_of(i: int, key: str | None) -> int | None:
        dec = json.JSONDecoder()
        pos = text.index("[") + 1
        for k in range(i + 1):
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            try:
                _, end = dec.raw_decode(text, pos)
            except ValueError:
                return None
            if k < i:
                pos = end
        at = pos
        if key is not None:
            m = re.compile(r'"' + re.escape(key) + r'"\s*:').search(text, pos, end)
            at = m.start() if m else pos
        return text.count("\n", 0, at) + 1
    return line_of


def _unwrap(data: Any) -> tuple[Any, tuple[str, ...]]:
    if isinstance(data, dict) and "classifiers" in data:
        return data["classifiers"], ("classifiers",)
    return data, ()


def _read(text: str, path: str) -> _Items | None:
    """The fast readers; None: the file needs the careful reader (positions, every check)."""
    if text.lstrip()[:1] in ("[", "{"):  # JSON (also YAML)
        scan_json(text, path)  # json recurses in C: its depth is bounded first
        try:
            data, prefix = _unwrap(json.loads(text))
        except ValueError:
            data = None
        if isinstance(data, list):
            return _Items(data, prefix, _json_line_of(text) if not prefix else None)
    try:
        read = _read_lines(text)
        return _Items(read.items, (), read.line_of)
    except _NotPlain:
        pass
    except _Duplicate as e:
        i, key, line = e.args
        raise SpecError(f"duplicate key '{key}'", file=path, place=format_place((i, key)),
                        line=line) from None
    if "&" in text or "*" in text:  # aliases: the careful (bounded) reader
        return None
    scan_yaml(text, path)  # libyaml's loader recurses in C: depth and keys bounded first
    try:
        data, prefix = _unwrap(yaml.load(text, Loader=getattr(yaml, "CSafeLoader",  # noqa: S506
                                                              yaml.SafeLoader)))
    except yaml.YAMLError:
        return None
    return _Items(data, prefix, None) if isinstance(data, list) else None


def read(path: str) -> list[Rule]:
    """Every classifier of the file at ``path`` (``-``: stdin), read once and bounded
    (:func:`.reading.read_bytes`), validated; a located :class:`~sfclab.errors.SpecError`
    (file, place, line) for the first bad one."""
    return parse(read_bytes(path), source_name(path))


def parse(data: bytes, path: str) -> list[Rule]:
    """:func:`read` of bytes already read; ``path`` names them in messages."""
    text = decode(data, path)
    got = _read(text, path)
    if got is None:
        return _careful(text, path)
    out: list[Rule] = []
    append = out.append
    for i, c in enumerate(got.items):
        r = fast_rule(c)
        if r is None:
            try:
                r = Rule.of(ClassifierSpec.model_validate(c))
            except ValidationError as e:
                loc, msg = pydantic_error(e)
                if got.line_of is None:
                    return _careful(text, path)
                key = loc[0] if loc and isinstance(loc[0], str) else None
                raise SpecError(msg, file=path, place=format_place((*got.prefix, i, *loc)),
                                line=got.line_of(i, key)) from None
        append(r)
    return out


def _careful(text: str, path: str) -> list[Rule]:
    """The lab file's way: a YAML tree with positions (duplicate keys, aliases, nesting
    bounded), a model per entry."""
    doc = Document(text, path)
    data, prefix = _unwrap(doc.data)
    if not isinstance(data, list):
        raise doc.error("expected a list of classifiers (or a mapping with 'classifiers')",
                        prefix)
    out = []
    for i, c in enumerate(data):
        try:
            out.append(Rule.of(ClassifierSpec.model_validate(c)))
        except ValidationError as e:
            loc, msg = pydantic_error(e)
            raise doc.error(msg, (*prefix, i, *loc)) from None
    return out
