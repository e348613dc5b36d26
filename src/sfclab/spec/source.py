"""YAML documents with positions: load a file, refuse duplicate keys, and find the line of a
place such as ``links[3].endpoints[1]`` so errors can point at it."""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import SpecError
from .limits import MAX_BYTES, MAX_DEPTH, MAX_VALUES  # noqa: F401 - read here by others
from .reading import decode, read_bytes, scan_yaml, source_name  # noqa: F401 - decode: ditto


def format_place(loc: tuple[Any, ...] | list[Any]) -> str:
    """``('links', 3, 'endpoints', 1)`` -> ``links[3].endpoints[1]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def parse_place(place: str) -> tuple[Any, ...]:
    """``links[3].endpoints[1]`` -> ``('links', 3, 'endpoints', 1)`` (:func:`format_place` back)."""
    out: list[Any] = []
    for part in place.split(".") if place else []:
        name, *indexes = part.split("[")
        if name:
            out.append(name)
        out += [int(i.rstrip("]")) for i in indexes if i.rstrip("]").isdigit()]
    return tuple(out)


class Document:
    """A parsed YAML document that remembers where each value came from.

    Reading is bounded: at most :data:`MAX_BYTES` (:func:`.reading.read_bytes`), UTF-8 only
    (the place of a bad byte is named), nesting at most :data:`MAX_DEPTH` and keys plain
    scalars (both checked before PyYAML recurses: :func:`.reading.scan_yaml`), aliases at most
    :data:`MAX_VALUES` values once expanded and never recursive; duplicate keys are refused.
    """

    def __init__(self, text: str, source: str):
        self.source = source
        scan_yaml(text, source)
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise SpecError(f"not valid YAML: {getattr(e, 'problem', None) or e}", file=source,
                            line=mark.line + 1 if mark else None,
                            column=mark.column + 1 if mark else None) from None
        except RecursionError:
            raise SpecError(f"expected at most {MAX_DEPTH} levels of nesting", file=source) \
                from None
        self._check(self.root)
        try:
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:  # composed, but not made into values: a tag it refuses
            mark = getattr(e, "problem_mark", None)
            raise SpecError(f"not valid YAML: {getattr(e, 'problem', None) or e}", file=source,
                            line=mark.line + 1 if mark else None,
                            column=mark.column + 1 if mark else None) from None

    @classmethod
    def from_file(cls, path: str) -> Document:
        """The document in file ``path`` (``-``: stdin), read once and bounded."""
        return cls(decode(read_bytes(path), source_name(path)), source_name(path))

    def _check(self, root: yaml.Node | None) -> None:
        """Duplicate keys, depth, recursive aliases and the expanded size, in one walk that
        visits each distinct node once (aliases share nodes, so this is linear in the file)."""
        sizes: dict[int, tuple[int, int]] = {}  # node -> (values, levels below it)
        open_nodes: set[int] = set()

        def walk(node: yaml.Node, loc: tuple[Any, ...]) -> tuple[int, int]:
            key = id(node)
            if key in sizes:  # an alias: the same node again, maybe deeper than before
                if len(loc) + sizes[key][1] > MAX_DEPTH:
                    raise self._at(node, f"expected at most {MAX_DEPTH} levels of nesting "
                                   "once YAML aliases are expanded", loc[:1])
                return sizes[key]
            if key in open_nodes:
                raise self._at(node, "a YAML alias refers to a value that contains it", loc)
            if len(loc) > MAX_DEPTH:
                raise self._at(node, f"expected at most {MAX_DEPTH} levels of nesting", loc[:1])
            open_nodes.add(key)
            size, below = 1, 0
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for k, v in node.value:
                    if not isinstance(k, yaml.ScalarNode):  # scan_yaml refused it already
                        raise self._at(k, "expected a plain key", loc)
                    if k.value in seen:
                        raise SpecError(f"duplicate key '{k.value}'", file=self.source,
                                        place=format_place(loc + (k.value,)) or None,
                                        line=k.start_mark.line + 1,
                                        column=k.start_mark.column + 1)
                    seen.add(k.value)
                    n, b = walk(v, loc + (k.value,))
                    size, below = size + n, max(below, b + 1)
            elif isinstance(node, yaml.SequenceNode):
                for i, v in enumerate(node.value):
                    n, b = walk(v, loc + (i,))
                    size, below = size + n, max(below, b + 1)
            open_nodes.discard(key)
            if size > MAX_VALUES:
                raise self._at(node, f"expected at most {MAX_VALUES:,} values once YAML aliases "
                               "are expanded", loc)
            sizes[key] = (size, below)
            return size, below

        if root is not None:
            walk(root, ())

    def _at(self, node: yaml.Node, message: str, loc: tuple[Any, ...]) -> SpecError:
        return SpecError(message, file=self.source, place=format_place(loc) or None,
                         line=node.start_mark.line + 1, column=node.start_mark.column + 1)

    def line_of(self, loc: tuple[Any, ...] | list[Any]) -> int | None:
        """The 1-based line of the deepest node along ``loc`` that exists in the document."""
        node = self.root
        best = node.start_mark.line + 1 if node is not None else None
        for part in loc:
            nxt = None
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if k.value == str(part):
                        nxt = v
                        best = k.start_mark.line + 1
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if 0 <= part < len(node.value):
                    nxt = node.value[part]
                    best = nxt.start_mark.line + 1
            if nxt is None:
                break
            node = nxt
        return best

    def error(self, message: str, loc: tuple[Any, ...] | list[Any]) -> SpecError:
        return SpecError(message, file=self.source, place=format_place(loc) or None,
                         line=self.line_of(loc))
