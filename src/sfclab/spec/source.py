"""YAML documents with positions: load a file, refuse duplicate keys, and find the line of a
place such as ``links[3].endpoints[1]`` so errors can point at it."""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import SpecError


def format_place(loc: tuple[Any, ...] | list[Any]) -> str:
    """``('links', 3, 'endpoints', 1)`` -> ``links[3].endpoints[1]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class Document:
    """A parsed YAML document that remembers where each value came from."""

    def __init__(self, text: str, source: str):
        self.source = source
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise SpecError(f"not valid YAML: {getattr(e, 'problem', None) or e}", file=source,
                            line=mark.line + 1 if mark else None,
                            column=mark.column + 1 if mark else None) from None
        self._check_duplicates(self.root, ())
        try:
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:  # pragma: no cover - compose already parsed it
            raise SpecError(f"not valid YAML: {e}", file=source) from None

    @classmethod
    def from_file(cls, path: str) -> "Document":
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise SpecError(f"cannot read: {e.strerror}", file=path) from None
        return cls(text, path)

    def _check_duplicates(self, node: yaml.Node | None, loc: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                key = k.value
                if key in seen:
                    raise SpecError(f"duplicate key '{key}'", file=self.source,
                                    place=format_place(loc + (key,)) or None,
                                    line=k.start_mark.line + 1, column=k.start_mark.column + 1)
                seen.add(key)
                self._check_duplicates(v, loc + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._check_duplicates(v, loc + (i,))

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
