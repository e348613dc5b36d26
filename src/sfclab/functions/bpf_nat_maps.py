"""The bpf-nat's maps as bytes: the layouts of ``include/sfc_nat.h``, packed and read.

The C header is the one definition; this module states the same layouts for Python (members in
order, each a ``struct`` format: ``<`` host order, ``>`` network order, ``x`` padding) and
:func:`sfclab.realize.contract.nat_drift` holds them against the compiled ``nat.bpf.o``'s BTF,
so a unit test fails when one side changes alone.

Every bpf-nat of a lab shares the lab's maps, keyed by its node's ``node_id`` (its number in the
SFC data plane): ``sfc_nat_config[node]``, ``sfc_nat_forwards[node * MAX_FORWARDS + i]``,
``sfc_nat_counts[node * SLOTS + slot]`` (:data:`MASQUERADE`, :data:`MASQUERADE6`,
:data:`NO_PORT`, :data:`OTHER`, ``FORWARD + i`` for forward ``i``) and the translations,
``sfc_nat_conns`` (two entries per translated flow, one per direction, keyed by the node and
the packet's 5-tuple and family).

Addresses of flows, translations and forwards are 128 bits for either family, four
network-order words (:func:`~.bpf_firewall_maps.words`: an IPv4 one in the first word); the
configuration holds the outside interface's IPv4 address and its IPv6 one apart (0: none).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv6Address
from typing import Any

from .bpf_firewall_maps import FAMILIES, address, pack_layout, words

#: C struct -> its members in order: (name, struct format)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_nat_config": (("outside_ifindex", "<I"), ("outside_addr", ">I"), ("nforwards", "<I"),
                       ("outside_addr6", ">4I")),
    "sfc_nat_forward": (("to_addr", ">4I"), ("port", "<H"), ("to_port", "<H"), ("proto", "B"),
                        ("family", "B"), ("pad", "2x")),
    "sfc_nat_flow": (("node", "<I"), ("src", ">4I"), ("dst", ">4I"), ("sport", ">H"),
                     ("dport", ">H"), ("proto", "B"), ("family", "B"), ("pad", "2x")),
    "sfc_nat_xlate": (("addr", ">4I"), ("port", ">H"), ("side", "B"), ("slot", "B")),
    "sfc_nat_count": (("packets", "<Q"), ("bytes", "<Q"), ("new", "<Q")),
}
#: enum sfc_nat_limit
MAX_FORWARDS, SLOTS, MASQUERADE, NO_PORT, OTHER, FORWARD = 32, 36, 0, 1, 2, 3
MASQUERADE6 = 35
PORT_FIRST, PORT_LAST, TRIES, MAX_CONNS = 32768, 65535, 16, 65536
LIMITS = {"SFC_NAT_MAX_FORWARDS": MAX_FORWARDS, "SFC_NAT_SLOTS": SLOTS,
          "SFC_NAT_MASQUERADE": MASQUERADE, "SFC_NAT_NO_PORT": NO_PORT, "SFC_NAT_OTHER": OTHER,
          "SFC_NAT_FORWARD": FORWARD, "SFC_NAT_MASQUERADE6": MASQUERADE6,
          "SFC_NAT_PORT_FIRST": PORT_FIRST,
          "SFC_NAT_PORT_LAST": PORT_LAST, "SFC_NAT_TRIES": TRIES,
          "SFC_NAT_MAX_CONNS": MAX_CONNS}
#: enum sfc_nat_side: the end of a packet a translation rewrites
SIDES = {"SFC_NAT_SRC": 1, "SFC_NAT_DST": 2}
#: map -> (key type, value type), as declared in include/sfc_nat.h
MAPS = {"sfc_nat_config": ("__u32", "sfc_nat_config"),
        "sfc_nat_forwards": ("__u32", "sfc_nat_forward"),
        "sfc_nat_counts": ("__u32", "sfc_nat_count"),
        "sfc_nat_conns": ("sfc_nat_flow", "sfc_nat_xlate")}
PROTOS = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58}
NAMES = {v: k for k, v in PROTOS.items()}


def pack(name: str, *values: Any) -> bytes:
    """C struct ``name`` (of :data:`LAYOUTS`) from its members' values in order."""
    return pack_layout(LAYOUTS[name], name, *values)


def unpack(name: str, raw: bytes) -> dict[str, Any]:
    """C struct ``name`` read from ``raw``: member -> value (an array member: a tuple; padding
    left out)."""
    out, offset = {}, 0
    for member, fmt in LAYOUTS[name]:
        f = fmt if fmt[0] in "<>" else "<" + fmt
        if not fmt.endswith("x"):
            got = struct.unpack_from(f, raw, offset)
            out[member] = got if len(got) > 1 else got[0]
        offset += struct.calcsize(f)
    return out


def config_bytes(ifindex: int, address4: IPv4Address | None, address6: IPv6Address | None,
                 nforwards: int) -> bytes:
    """The outside interface and its address of each family (None: the lab has none)."""
    return pack("sfc_nat_config", ifindex, int(address4) if address4 else 0, nforwards,
                words(address6))


def forward_bytes(fw: Any) -> bytes:
    """A :class:`~sfclab.functions.nat.PortForward` as ``struct sfc_nat_forward``: its target
    of either family (``198.18.3.2:80``, ``[2001:2:0:3::2]:80``), 0 as the port to keep it."""
    addr, to_port = fw.target()
    return pack("sfc_nat_forward", words(addr), fw.port, to_port, PROTOS[fw.proto],
                FAMILIES[addr.version])


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
        fam = key["family"]
        out.append({"proto": NAMES.get(key["proto"], str(key["proto"])),
                    "inside": endpoint(key["src"], key["sport"], fam),
                    "outside": endpoint(x["addr"], x["port"], fam),
                    "peer": endpoint(key["dst"], key["dport"], fam),
                    "rule": "masquerade" if x["slot"] in (MASQUERADE, MASQUERADE6)
                    else f"forward {x['slot'] - FORWARD}"})
    return sorted(out, key=lambda t: (t["rule"], t["proto"], t["inside"], t["peer"]))


def endpoint(w: tuple[int, int, int, int], port: int, family: int) -> str:
    """An address and port as written in a forward's ``to``: ``A.B.C.D:P``, ``[V6]:P``."""
    a = address(w, family)
    return f"[{a}]:{port}" if a.version == 6 else f"{a}:{port}"
