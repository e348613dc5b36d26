"""The bpf-nat's maps as bytes: the layouts of ``include/sfc_nat.h``, packed and read.

The C header is the one definition; this module states the same layouts for Python (members in
order, each a ``struct`` format: ``<`` host order, ``>`` network order, ``x`` padding) and
:func:`sfclab.realize.contract.nat_drift` holds them against the compiled ``nat.bpf.o``'s BTF,
so a unit test fails when one side changes alone.

Every bpf-nat of a lab shares the lab's maps, keyed by its node's ``node_id`` (its number in the
SFC data plane): ``sfc_nat_config[node]``, ``sfc_nat_forwards[node * MAX_FORWARDS + i]``,
``sfc_nat_counts[node * SLOTS + slot]`` (:data:`MASQUERADE`, :data:`NO_PORT`, :data:`OTHER`,
``FORWARD + i`` for forward ``i``) and the translations, ``sfc_nat_conns`` (two entries per
translated flow, one per direction, keyed by the node and the packet's 5-tuple).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from ipaddress import IPv4Address
from typing import Any

#: C struct -> its members in order: (name, struct format)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_nat_config": (("outside_ifindex", "<I"), ("outside_addr", ">I"), ("nforwards", "<I")),
    "sfc_nat_forward": (("to_addr", ">I"), ("port", "<H"), ("to_port", "<H"), ("proto", "B"),
                        ("pad", "3x")),
    "sfc_nat_flow": (("node", "<I"), ("src", ">I"), ("dst", ">I"), ("sport", ">H"),
                     ("dport", ">H"), ("proto", "B"), ("pad", "3x")),
    "sfc_nat_xlate": (("addr", ">I"), ("port", ">H"), ("side", "B"), ("slot", "B")),
    "sfc_nat_count": (("packets", "<Q"), ("bytes", "<Q"), ("new", "<Q")),
}
#: enum sfc_nat_limit
MAX_FORWARDS, SLOTS, MASQUERADE, NO_PORT, OTHER, FORWARD = 32, 35, 0, 1, 2, 3
PORT_FIRST, PORT_LAST, TRIES, MAX_CONNS = 32768, 65535, 16, 65536
LIMITS = {"SFC_NAT_MAX_FORWARDS": MAX_FORWARDS, "SFC_NAT_SLOTS": SLOTS,
          "SFC_NAT_MASQUERADE": MASQUERADE, "SFC_NAT_NO_PORT": NO_PORT, "SFC_NAT_OTHER": OTHER,
          "SFC_NAT_FORWARD": FORWARD, "SFC_NAT_PORT_FIRST": PORT_FIRST,
          "SFC_NAT_PORT_LAST": PORT_LAST, "SFC_NAT_TRIES": TRIES,
          "SFC_NAT_MAX_CONNS": MAX_CONNS}
#: enum sfc_nat_side: the end of a packet a translation rewrites
SIDES = {"SFC_NAT_SRC": 1, "SFC_NAT_DST": 2}
#: map -> (key type, value type), as declared in include/sfc_nat.h
MAPS = {"sfc_nat_config": ("__u32", "sfc_nat_config"),
        "sfc_nat_forwards": ("__u32", "sfc_nat_forward"),
        "sfc_nat_counts": ("__u32", "sfc_nat_count"),
        "sfc_nat_conns": ("sfc_nat_flow", "sfc_nat_xlate")}
PROTOS = {"icmp": 1, "tcp": 6, "udp": 17}
NAMES = {v: k for k, v in PROTOS.items()}


def pack(name: str, *values: Any) -> bytes:
    """C struct ``name`` from its members' values in order (padding takes none)."""
    out, i = [], 0
    for _, fmt in LAYOUTS[name]:
        if fmt.endswith("x"):
            out.append(struct.pack(fmt))
            continue
        out.append(struct.pack(fmt if fmt[0] in "<>" else "<" + fmt, values[i]))
        i += 1
    if i != len(values):
        raise ValueError(f"struct {name} takes {i} values, not {len(values)}")
    return b"".join(out)


def unpack(name: str, raw: bytes) -> dict[str, Any]:
    """C struct ``name`` read from ``raw``: member -> value (padding left out)."""
    out, offset = {}, 0
    for member, fmt in LAYOUTS[name]:
        f = fmt if fmt[0] in "<>" else "<" + fmt
        if not fmt.endswith("x"):
            out[member] = struct.unpack_from(f, raw, offset)[0]
        offset += struct.calcsize(f)
    return out


def config_bytes(ifindex: int, address: IPv4Address, nforwards: int) -> bytes:
    return pack("sfc_nat_config", ifindex, int(address), nforwards)


def forward_bytes(fw: Any) -> bytes:
    """A :class:`~sfclab.functions.nat.PortForward` as ``struct sfc_nat_forward``."""
    addr, sep, port = fw.to.rpartition(":")
    to, to_port = (addr, int(port)) if sep else (fw.to, 0)
    return pack("sfc_nat_forward", int(IPv4Address(to)), fw.port, to_port, PROTOS[fw.proto])


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def count_sum(raw: bytes | None) -> dict[str, int]:
    """A per-CPU ``struct sfc_nat_count`` lookup (one 24-byte slot per CPU), summed."""
    packets = size = new = 0
    for p, b, n in struct.iter_unpack("<QQQ", raw or b""):
        packets += p
        size += b
        new += n
    return {"packets": packets, "bytes": size, "new": new}


def translations(node_id: int, entries: Iterable[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """The live translations of node ``node_id`` from the connection map's (key, value) pairs:
    one per outbound half (the entry that rewrites the source), as ``{proto, inside, outside,
    peer, rule}``; the masquerade's inside is the original source, a forward's its target."""
    out = []
    for k, v in entries:
        key, x = unpack("sfc_nat_flow", k), unpack("sfc_nat_xlate", v)
        if key["node"] != node_id or x["side"] != SIDES["SFC_NAT_SRC"]:
            continue
        out.append({"proto": NAMES.get(key["proto"], str(key["proto"])),
                    "inside": f"{IPv4Address(key['src'])}:{key['sport']}",
                    "outside": f"{IPv4Address(x['addr'])}:{x['port']}",
                    "peer": f"{IPv4Address(key['dst'])}:{key['dport']}",
                    "rule": "masquerade" if x["slot"] == MASQUERADE
                    else f"forward {x['slot'] - FORWARD}"})
    return sorted(out, key=lambda t: (t["rule"], t["proto"], t["inside"], t["peer"]))
