"""The bpf-firewall's maps as bytes: the layouts of ``include/sfc_fw.h``, packed and read.

The C header is the one definition; this module states the same layouts for Python (members in
order, each a ``struct`` format: ``<`` host order, ``>`` network order, ``x`` padding) and
:func:`sfclab.realize.contract.fw_drift` holds them against the compiled ``fw.bpf.o``'s BTF,
so a unit test fails when one side changes alone.

Every bpf-firewall of a lab shares the lab's maps, keyed by its node's ``node_id`` (its number
in the SFC data plane): ``sfc_fw_config[node]``, ``sfc_fw_rules[node * MAX_RULES + i]``,
``sfc_fw_counts[node * SLOTS + slot]`` (slot ``i`` for rule ``i``, :data:`POLICY`,
:data:`ESTABLISHED`).
"""

from __future__ import annotations

import struct
from ipaddress import IPv4Network
from typing import Any

#: C struct -> its members in order: (name, struct format)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_fw_rule": (("src", ">I"), ("src_mask", ">I"), ("dst", ">I"), ("dst_mask", ">I"),
                    ("sport_first", "<H"), ("sport_last", "<H"), ("dport_first", "<H"),
                    ("dport_last", "<H"), ("proto", "B"), ("action", "B"), ("pad", "2x")),
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
PROTOS = {"any": 0, "icmp": 1, "tcp": 6, "udp": 17}
ANY = IPv4Network("0.0.0.0/0")


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


def rule_bytes(rule: Any) -> bytes:
    """A :class:`~sfclab.functions.rules.Rule` as ``struct sfc_fw_rule``."""
    src, dst = rule.src or ANY, rule.dst or ANY
    sport, dport = rule.sport or (0, 65535), rule.dport or (0, 65535)
    return pack("sfc_fw_rule", int(src.network_address), int(src.netmask),
                int(dst.network_address), int(dst.netmask), sport[0], sport[1], dport[0],
                dport[1], PROTOS[rule.proto], VERDICTS[f"SFC_FW_{rule.action.upper()}"])


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
