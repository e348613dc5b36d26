"""The bpf-firewall's maps as bytes: the layouts of ``include/sfc_fw.h``, packed and read.

The C header is the one definition; this module states the same layouts for Python (members in
order, each a ``struct`` format: ``<`` host order, ``>`` network order, ``x`` padding) and
:func:`sfclab.realize.contract.fw_drift` holds them against the compiled ``fw.bpf.o``'s BTF,
so a unit test fails when one side changes alone.

Every bpf-firewall of a lab shares the lab's maps, keyed by its node's ``node_id`` (its number
in the SFC data plane): ``sfc_fw_config[node]``, ``sfc_fw_rules[node * MAX_RULES + i]``,
``sfc_fw_counts[node * SLOTS + slot]`` (slot ``i`` for rule ``i``, :data:`POLICY`,
:data:`ESTABLISHED`).

Addresses are 128 bits for either family, as four network-order words (:func:`words`): an IPv4
address in the first word, the rest 0, as in the classifier's key (``struct sfc_class_key``).
A rule carries the family of its prefixes (:data:`FAMILIES`; 0 without prefixes: either), so
one list filters both families as the kernel firewall's ``inet`` table does.
"""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv4Network, IPv6Address
from typing import Any

#: C struct -> its members in order: (name, struct format)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_fw_rule": (("src", ">4I"), ("src_mask", ">4I"), ("dst", ">4I"), ("dst_mask", ">4I"),
                    ("sport_first", "<H"), ("sport_last", "<H"), ("dport_first", "<H"),
                    ("dport_last", "<H"), ("proto", "B"), ("action", "B"), ("family", "B"),
                    ("pad", "x")),
    "sfc_fw_config": (("nrules", "<I"), ("policy", "<I"), ("stateful", "<I")),
    "sfc_fw_count": (("packets", "<Q"), ("bytes", "<Q")),
}
#: enum sfc_fw_limit
MAX_RULES, SLOTS, POLICY, ESTABLISHED, MAX_CONNS = 64, 66, 64, 65, 65536
LIMITS = {"SFC_FW_MAX_RULES": MAX_RULES, "SFC_FW_SLOTS": SLOTS, "SFC_FW_POLICY": POLICY,
          "SFC_FW_ESTABLISHED": ESTABLISHED, "SFC_FW_MAX_CONNS": MAX_CONNS}
#: enum sfc_fw_verdict
VERDICTS = {"SFC_FW_DROP": 0, "SFC_FW_ACCEPT": 1}
#: map -> (key type, value type), as declared in include/sfc_fw.h
MAPS = {"sfc_fw_config": ("__u32", "sfc_fw_config"), "sfc_fw_rules": ("__u32", "sfc_fw_rule"),
        "sfc_fw_counts": ("__u32", "sfc_fw_count"), "sfc_fw_conns": ("sfc_tuple", "__u32")}
PROTOS = {"any": 0, "icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58}
#: an address family -> its value in the maps' ``family`` members (``SFC_FAMILY_IPV4`` and
#: ``SFC_FAMILY_IPV6`` of include/sfc.h); 0: either (a rule without prefixes)
FAMILIES = {4: 4, 6: 6}
ANY = IPv4Network("0.0.0.0/0")

Words = tuple[int, int, int, int]


def words(addr: IPv4Address | IPv6Address | None) -> Words:
    """An address as the maps hold it: four network-order words, an IPv4 one in the first
    (the rest 0); None: all 0."""
    if addr is None:
        return (0, 0, 0, 0)
    if addr.version == 4:
        return (int(addr), 0, 0, 0)
    return struct.unpack(">4I", addr.packed)


def address(w: Words | list[int], family: int) -> IPv4Address | IPv6Address:
    """The address of ``family`` that :func:`words` made ``w``."""
    if family == FAMILIES[6]:
        return IPv6Address(struct.pack(">4I", *w))
    return IPv4Address(w[0])


def pack(name: str, *values: Any) -> bytes:
    """C struct ``name`` (of :data:`LAYOUTS`) from its members' values in order."""
    return pack_layout(LAYOUTS[name], name, *values)


def pack_layout(layout: tuple[tuple[str, str], ...], name: str, *values: Any) -> bytes:
    """C struct ``name`` of members ``layout`` from their values in order (padding takes
    none; an array member, such as ``>4I``, takes a sequence)."""
    out, i = [], 0
    for _, fmt in layout:
        if fmt.endswith("x"):
            out.append(struct.pack(fmt))
            continue
        v = values[i]
        many = v if isinstance(v, (tuple, list)) else (v,)
        out.append(struct.pack(fmt if fmt[0] in "<>" else "<" + fmt, *many))
        i += 1
    if i != len(values):
        raise ValueError(f"struct {name} takes {i} values, not {len(values)}")
    return b"".join(out)


def rule_bytes(rule: Any) -> bytes:
    """A :class:`~sfclab.functions.rules.Rule` as ``struct sfc_fw_rule``: its prefixes as
    words (none: 0/0, any address), its family that of its prefixes (0 without)."""
    src, dst = rule.src or ANY, rule.dst or ANY
    sport, dport = rule.sport or (0, 65535), rule.dport or (0, 65535)
    family = FAMILIES[rule.family] if rule.family else 0
    return pack("sfc_fw_rule", words(src.network_address), words(src.netmask),
                words(dst.network_address), words(dst.netmask), sport[0], sport[1],
                dport[0], dport[1], PROTOS[rule.proto],
                VERDICTS[f"SFC_FW_{rule.action.upper()}"], family)


def config_bytes(nrules: int, policy: str, stateful: bool) -> bytes:
    return pack("sfc_fw_config", nrules, VERDICTS[f"SFC_FW_{policy.upper()}"], int(stateful))


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def count_sum(raw: bytes | None) -> dict[str, int]:
    """A per-CPU ``struct sfc_fw_count`` lookup (one 16-byte slot per CPU), summed."""
    packets = size = 0
    for p, b in struct.iter_unpack("<QQ", raw or b""):
        packets += p
        size += b
    return {"packets": packets, "bytes": size}
