"""The bpf-balancer's maps as bytes: the layouts of ``include/sfc_lb.h``, packed and read.

The C header is the one definition; this module states the same layouts for Python (members in
order, each a ``struct`` format: ``<`` host order, ``>`` network order, ``x`` padding) and
:func:`sfclab.realize.contract.lb_drift` holds them against the compiled ``balancer.bpf.o``'s
BTF, so a unit test fails when one side changes alone.

Every bpf-balancer of a lab shares the lab's maps, keyed by its node's ``node_id``:
``sfc_lb_config[node]``, ``sfc_lb_backends[node * MAX_BACKENDS + i]``, ``sfc_lb_tables[node]``
(the Maglev table, :func:`table`), ``sfc_lb_counts[node * SLOTS + slot]`` (slot ``i`` for
backend ``i``, :data:`REPLIES`, :data:`OTHER`), ``sfc_lb_conns`` (connections, LRU).

The VIP and the backends are of one family, the configuration's ``family``; addresses are 128
bits, four network-order words (:func:`~.bpf_firewall_maps.words`: an IPv4 one in the first).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv6Address

from ..plan import maglev
from .bpf_firewall_maps import FAMILIES, words
from .bpf_firewall_maps import count_sum, u32  # noqa: F401 - the same per-CPU counter pair

#: C struct -> its members in order: (name, struct format)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_lb_config": (("vip", ">4I"), ("port_first", "<H"), ("port_last", "<H"),
                      ("proto", "B"), ("family", "B"), ("pad", "2x"), ("nbackends", "<I"),
                      ("sticky", "<I")),
    "sfc_lb_backend": (("addr", ">4I"),),
    "sfc_lb_table": (("slot", "<1024I"),),
    "sfc_lb_conn": (("backend", "<I"), ("addr", ">4I")),
    "sfc_lb_count": (("packets", "<Q"), ("bytes", "<Q")),
}
#: enum sfc_lb_limit
MAX_BACKENDS, TABLE_SLOTS, TABLE_SIZE, SLOTS, REPLIES, OTHER, MAX_CONNS = \
    16, 1024, 1021, 18, 16, 17, 65536
LIMITS = {"SFC_LB_MAX_BACKENDS": MAX_BACKENDS, "SFC_LB_TABLE_SLOTS": TABLE_SLOTS,
          "SFC_LB_TABLE_SIZE": TABLE_SIZE, "SFC_LB_SLOTS": SLOTS, "SFC_LB_REPLIES": REPLIES,
          "SFC_LB_OTHER": OTHER, "SFC_LB_MAX_CONNS": MAX_CONNS}
#: enum sfc_lb_sticky: what a flow's slot is a hash of
STICKY = {"SFC_LB_BY_TUPLE": 0, "SFC_LB_BY_SOURCE": 1}
#: enum sfc_lb_direction: the ``mask`` of a connection entry's tuple
DIRECTIONS = {"SFC_LB_FORWARD": 1, "SFC_LB_REPLY": 2}
#: map -> (key type, value type), as declared in include/sfc_lb.h
MAPS = {"sfc_lb_config": ("__u32", "sfc_lb_config"),
        "sfc_lb_backends": ("__u32", "sfc_lb_backend"),
        "sfc_lb_tables": ("__u32", "sfc_lb_table"), "sfc_lb_counts": ("__u32", "sfc_lb_count"),
        "sfc_lb_conns": ("sfc_tuple", "sfc_lb_conn")}
PROTOS = {"any": 0, "tcp": 6, "udp": 17}


def config_bytes(vip: IPv4Address | IPv6Address, ports: tuple[int, int], proto: str,
                 nbackends: int, sticky: str) -> bytes:
    return struct.pack(">4I", *words(vip)) + struct.pack(
        "<HHBB2xII", ports[0], ports[1], PROTOS[proto], FAMILIES[vip.version], nbackends,
        STICKY[f"SFC_LB_BY_{sticky.upper()}"])


def backend_bytes(addr: IPv4Address | IPv6Address | None) -> bytes:
    """A backend's entry; None: out (all 0)."""
    return struct.pack(">4I", *words(addr))


def table(addresses: Sequence[str], weights: Sequence[int],
          live: Sequence[bool] | None = None) -> list[int]:
    """The Maglev table (slot -> backend index, :data:`TABLE_SIZE` slots) of backends named by
    their addresses with ``weights``.  ``live``: which are in (default all); the slots of the
    backends in keep them, only the slots of those out are shared among the rest
    (:func:`sfclab.plan.maglev.failover`), so taking a backend out moves only its flows."""
    if live is None or all(live):
        return maglev.table(addresses, weights, TABLE_SIZE)
    now = [w if ok else 0 for w, ok in zip(weights, live, strict=True)]
    got = maglev.failover(addresses, weights, now, TABLE_SIZE)
    if got is None:
        raise ValueError("no backend left in")
    return got


def table_bytes(slots: Sequence[int]) -> bytes:
    """``struct sfc_lb_table``: the slots, then zero up to its room."""
    return struct.pack(f"<{TABLE_SLOTS}I", *slots, *([0] * (TABLE_SLOTS - len(slots))))
