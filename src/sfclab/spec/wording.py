"""One wording for every bad value, from files and the command line alike:
``PLACE: expected WHAT, got VALUE``.

Validators raise ``ValueError(WHAT)`` with WHAT a noun phrase ("a port or port range such as 80
or '1000-2000'"); a sentence that is not a noun phrase ("ceil is an htb setting") is shown as it
is.  The validation library's own messages are translated here, so its wording never reaches
the user.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

#: WHAT starts with one of these: it is a noun phrase, said after "expected"
_NOUN_STARTS = ("a ", "an ", "the ", "one ", "at ", "exactly ", "ports ", "letters", "a\n")


def got(value: Any) -> str:
    """How a bad value is shown: scalars as written, collections by their kind."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if value is None:
        return "nothing"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def expected(what: str, value: Any = ..., *, scalar_only: bool = True) -> str:
    """``expected WHAT, got VALUE`` (or the sentence as it is, see the module docstring)."""
    if not what.startswith(_NOUN_STARTS):
        return what
    out = f"expected {what}"
    if value is not ... and not (scalar_only and isinstance(value, (dict, list, tuple))):
        out += f", got {got(value)}"
    return out


_TYPES = {
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list", "string_type": "a string",
    "int_type": "a whole number", "int_parsing": "a whole number",
    "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "ip_v4_network": "an IPv4 network such as 198.18.0.0/15",
    "ip_v4_interface": "an IPv4 address with its prefix such as 198.18.0.1/24",
    "ip_v4_address": "an IPv4 address such as 198.18.0.1",
    "finite_number": "a finite number",
}


def pydantic_error(e: ValidationError) -> tuple[tuple[Any, ...], str]:
    """The first error of ``e``: its place (a tuple) and the message in sfclab's wording."""
    err = e.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        return loc, f"unknown key '{loc[-1]}'"
    if kind == "missing":
        return loc, f"missing key '{loc[-1]}'"
    if kind in ("value_error", "assertion_error"):
        what = str(ctx.get("error", err["msg"]))
        return loc, expected(what, value)
    if kind in ("too_short", "too_long"):
        n = ctx.get("min_length" if kind == "too_short" else "max_length")
        word = "at least" if kind == "too_short" else "at most"
        return loc, f"expected {word} {n} items, got {ctx.get('actual_length', len(value or []))}"
    if kind in ("literal_error", "enum"):
        return loc, f"expected one of {ctx.get('expected', '')}, got {got(value)}"
    bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
              "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
    if kind in bounds:
        word, key = bounds[kind]
        return loc, f"expected a number {word} {ctx.get(key)}, got {got(value)}"
    if kind in ("string_too_long", "string_too_short"):
        word, key = (("at most", "max_length") if kind == "string_too_long"
                     else ("at least", "min_length"))
        return loc, f"expected {word} {ctx.get(key)} characters, got {got(value)}"
    if kind in _TYPES:
        return loc, f"expected {_TYPES[kind]}, got {got(value)}"
    msg = str(err["msg"])  # a kind not translated yet: said plainly, with the value
    return loc, f"expected {msg[0].lower() + msg[1:]}, got {got(value)}"
