"""The types a compiled eBPF object declares, read from its BTF.

A :class:`Btf` holds what user space needs to agree with the C side on a map's bytes: each
named struct's size and members (name, byte offset, byte size, and the member's type name as
written, such as ``__be32``, which says its byte order), each named enum's constants, and each
map of the object's ``.maps`` section with its key and value types and its ``max_entries``.
It is read with ``bpftool btf dump file OBJ format raw -j``; nothing is loaded into the kernel.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from ..errors import RealizeError, ToolError

#: types that only qualify or rename another: their size is the other's
_THROUGH = ("TYPEDEF", "CONST", "VOLATILE", "RESTRICT", "TYPE_TAG")


@dataclass(frozen=True)
class Member:
    name: str
    offset: int  # bytes from the start of the struct
    size: int  # bytes
    type_name: str  # as written in the header (``__be32``, ``__u8``, ...); arrays: their element's
    count: int  # elements: 1 unless the member is an array


@dataclass(frozen=True)
class Struct:
    name: str
    size: int
    members: tuple[Member, ...]


@dataclass(frozen=True)
class MapDef:
    name: str
    key: str  # the key's type name (a struct's name, or ``__u32``)
    key_size: int
    value: str
    value_size: int
    max_entries: int


@dataclass(frozen=True)
class Btf:
    structs: dict[str, Struct]
    enums: dict[str, dict[str, int]]  # enum name -> constant -> value
    maps: dict[str, MapDef]


def read(path: str) -> Btf:
    """The BTF of the object at ``path`` (bpftool's failure is a :class:`ToolError`)."""
    argv = ["bpftool", "btf", "dump", "file", path, "format", "raw", "-j"]
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise RealizeError(f"cannot run bpftool: {e}", obj=path) from e
    if cp.returncode != 0:
        raise ToolError(argv, cp.returncode, cp.stderr)
    return parse(json.loads(cp.stdout))


def parse(doc: dict[str, Any]) -> Btf:
    """A :class:`Btf` from bpftool's JSON dump."""
    types = {t["id"]: t for t in doc["types"]}

    def strip(tid: int) -> dict[str, Any]:
        t = types[tid]
        while t["kind"] in _THROUGH:
            t = types[t["type_id"]]
        return t

    def size(tid: int) -> int:
        t = strip(tid)
        if t["kind"] == "ARRAY":
            return int(t["nr_elems"]) * size(t["type_id"])
        if t["kind"] == "PTR":
            return 8
        return int(t["size"])

    def name(tid: int) -> str:
        t = types[tid]
        while t["kind"] in ("CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):
            t = types[t["type_id"]]
        return str(t["name"])

    def member(m: dict[str, Any]) -> Member:
        t, count = strip(m["type_id"]), 1
        elem = m["type_id"]
        if t["kind"] == "ARRAY":
            count, elem = int(t["nr_elems"]), t["type_id"]
        return Member(m["name"], m["bits_offset"] // 8, size(m["type_id"]), name(elem), count)

    structs, enums = {}, {}
    for t in doc["types"]:
        if t["kind"] == "STRUCT" and t["name"] != "(anon)":
            structs[t["name"]] = Struct(t["name"], t["size"],
                                        tuple(member(m) for m in t["members"]))
        elif t["kind"] in ("ENUM", "ENUM64") and t["name"] != "(anon)":
            enums[t["name"]] = {v["name"]: int(v["val"]) for v in t["values"]}

    maps = {}
    for t in doc["types"]:
        if t["kind"] != "DATASEC" or t["name"] != ".maps":
            continue
        for v in t["vars"]:
            var = types[v["type_id"]]
            fields = {m["name"]: m["type_id"] for m in strip(var["type_id"])["members"]}
            key, value = strip(fields["key"])["type_id"], strip(fields["value"])["type_id"]
            max_entries = strip(strip(fields["max_entries"])["type_id"])["nr_elems"]
            maps[var["name"]] = MapDef(var["name"], name(key), size(key), name(value),
                                       size(value), int(max_entries))
    return Btf(structs, enums, maps)
