"""The one bounded reader of every input file, and the checks that run before a parser does.

Every loader -- lab, chain, classifier and experiment files, a pipe or ``-`` (stdin) -- reads
through :func:`read_bytes`: at most :data:`~.limits.MAX_BYTES`, in one pass, so a pipe is read
once and a file such as ``/dev/zero`` is refused after 16 MiB instead of filling memory.

Parsers that recurse (PyYAML's composer and libyaml's loader in C, where a deep document
overflows the C stack and kills the process; ``json`` in C, which raises RecursionError) only
ever see a document that passed a scan without recursion:

* :func:`scan_yaml` walks libyaml's *event* stream (an iterative parser) keeping a depth
  counter: nesting deeper than :data:`~.limits.MAX_DEPTH` is refused at its line, and so is a
  mapping key that is not a scalar (``? [a, b]``, ``{[1, 2]: x}``, an alias), which no part of
  sfclab can use as a name.
* :func:`scan_json` counts brackets outside strings.
"""

from __future__ import annotations

import re
import sys
from itertools import accumulate, repeat

import yaml

from ..errors import SpecError
from .limits import MAX_BYTES, MAX_DEPTH

#: the name that reads standard input
STDIN = "-"


def source_name(path: str) -> str:
    """How a message names ``path`` (stdin: ``<stdin>``)."""
    return "<stdin>" if path == STDIN else path


def read_bytes(path: str) -> bytes:
    """The bytes of file ``path`` (or of stdin for ``-``; a FIFO or ``/dev/fd/N`` is read the
    same way), at most :data:`MAX_BYTES`: one more byte and it is refused with the limit named,
    before anything parses it."""
    try:
        if path == STDIN:
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror}", file=source_name(path)) from None
    if len(data) > MAX_BYTES:
        raise SpecError(f"expected at most {MAX_BYTES // (1024 * 1024)} MiB "
                        f"({MAX_BYTES:,} bytes), got more", file=source_name(path))
    return data


def decode(data: bytes, source: str) -> str:
    """UTF-8 text, or a located error: binary and UTF-16 files are refused by name."""
    if b"\x00" in data:
        line = data[:data.index(b"\x00")].count(b"\n") + 1
        raise SpecError("expected UTF-8 text, got a NUL byte (a binary or UTF-16 file)",
                        file=source, line=line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SpecError(f"expected UTF-8 text, got byte 0x{data[e.start]:02x}", file=source,
                        line=line) from None


def read_text(path: str) -> str:
    """:func:`read_bytes`, decoded (:func:`decode`)."""
    return decode(read_bytes(path), source_name(path))


_DEPTH_WORDS = f"expected at most {MAX_DEPTH} levels of nesting"
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def scan_yaml(text: str, source: str) -> None:
    """Refuse YAML nested deeper than :data:`MAX_DEPTH` or with a non-scalar mapping key, by
    its line and place, without building anything (libyaml's event parser does not recurse).
    Syntax errors are left to the parser that follows, which words them."""
    frames: list[_Frame] = []  # the open collections, outermost first
    try:
        for ev in yaml.parse(text, Loader=_LOADER):
            if isinstance(ev, _CLOSE):
                frames.pop()
                _node_ended(frames)
                continue
            if not isinstance(ev, (*_OPEN, yaml.ScalarEvent, yaml.AliasEvent)):
                continue  # stream and document events
            top = frames[-1] if frames else None
            if top is not None and top.mapping and top.at_key:
                if not isinstance(ev, yaml.ScalarEvent):
                    what = "an alias" if isinstance(ev, yaml.AliasEvent) else \
                        "a mapping" if isinstance(ev, yaml.MappingStartEvent) else "a list"
                    raise _at(ev, f"expected a plain key, got {what} as a key (complex keys "
                              "are not used by sfclab)", source, _place(frames[:-1]))
                top.where = ev.value
            if isinstance(ev, _OPEN):
                if len(frames) >= MAX_DEPTH:
                    raise _at(ev, _DEPTH_WORDS, source, _place(frames[:1]))
                frames.append(_Frame(isinstance(ev, yaml.MappingStartEvent)))
            else:
                _node_ended(frames)
    except yaml.YAMLError:
        return  # the parser that follows words it, with its line


class _Frame:
    """An open mapping or list of :func:`scan_yaml`: whether its next node is a key, and the
    key or index of the node being read (for the place of an error)."""

    __slots__ = ("mapping", "at_key", "where")

    def __init__(self, mapping: bool):
        self.mapping = mapping
        self.at_key = mapping
        self.where: str | int = "" if mapping else 0


def _node_ended(frames: list[_Frame]) -> None:
    """A node ended inside the innermost collection: a mapping now expects the other of key
    and value, a list its next item."""
    if frames:
        top = frames[-1]
        if top.mapping:
            top.at_key = not top.at_key
        else:
            top.where = int(top.where) + 1


def _place(frames: list[_Frame]) -> str | None:
    out = ""
    for f in frames:
        if isinstance(f.where, int):
            out += f"[{f.where}]"
        elif f.where:
            out += ("." if out else "") + f.where
    return out or None


def _at(ev: yaml.Event, message: str, source: str, place: str | None) -> SpecError:
    m = ev.start_mark
    return SpecError(message, file=source, place=place, line=m.line + 1 if m else None,
                     column=m.column + 1 if m else None)


#: ASCII that is neither a bracket nor a quote, deleted by str.translate
_NOT_STRUCTURE = {c: None for c in range(128) if chr(c) not in '[]{}"'}
_PLAIN_STRING = re.compile(r'"[^"]*"')
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_BRACKET_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def scan_json(text: str, source: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH`, by its line (brackets counted outside
    strings, no recursion)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    # escaped backslashes and quotes out, then all but brackets and quotes, then the strings
    # (now plain "..."; what is left of them outside ASCII goes with them): C speed throughout
    plain = text.replace("\\\\", "").replace('\\"', "").translate(_NOT_STRUCTURE)
    brackets = _PLAIN_STRING.sub("", plain)
    if max(accumulate(map(_STEP.get, brackets, repeat(0))), default=0) <= MAX_DEPTH:
        return
    depth = 0
    for m in _BRACKET_OR_STRING.finditer(text):  # the error's place: stops at the culprit
        if m.group()[0] == '"':
            continue
        depth += _STEP[m.group()]
        if depth > MAX_DEPTH:
            raise SpecError(_DEPTH_WORDS, file=source, line=text.count("\n", 0, m.start()) + 1,
                            column=m.start() - text.rfind("\n", 0, m.start()))
