"""The data-plane contract: the bytes Python writes into the SFC maps, held against the C.

The C header ``include/sfc.h`` defines the map keys and values (``struct sfc_*``), the limits
(``enum sfc_limit``), the counters (``enum sfc_counter``) and the hop actions
(``enum sfc_action``); the compiled objects (``native/build/sfc_*.bpf.o``) carry all of them in
their BTF.  This module is the Python side's one statement of the same layouts:

* :data:`LAYOUTS` -- per C struct, its members in order, each as a ``struct`` format (``<`` host
  order on this little-endian target, ``>`` for the ``__be*`` members, ``x`` for padding); the
  packers in :mod:`sfclab.realize.dataplane` and :mod:`sfclab.live` are built from these
  (:func:`packer`);
* :data:`LIMITS`, :data:`COUNTERS`, :data:`ACTIONS` -- the Python copies of the enums;
* :data:`MAPS` -- each lab-wide map's key and value type.

The bpf-firewall's own maps (``include/sfc_fw.h``) are stated by
:mod:`sfclab.functions.bpf_firewall_maps`, which writes them; :func:`fw_drift` checks them.
The bpf-balancer's (``include/sfc_lb.h``) likewise by :mod:`sfclab.functions.bpf_balancer_maps`,
checked by :func:`lb_drift`.
The SRv6 layout (``include/sfc_srv6.h``) by :mod:`sfclab.plan.srv6`, checked by :func:`srv6_drift`.
The bpf-nat's (``include/sfc_nat.h``): :mod:`sfclab.functions.bpf_nat_maps`, :func:`nat_drift`.

:func:`drift` compares all of it with an object's BTF (:mod:`sfclab.kernel.btf`) and returns
every difference, so a unit test fails when the header changes and the Python does not.
"""

from __future__ import annotations

import struct
from typing import Any

from ..functions import bpf_balancer_maps as lbm
from ..functions import bpf_firewall_maps as fwm
from ..functions import bpf_nat_maps as natm
from ..kernel.btf import Btf
from ..plan import srv6
from ..spec import limits

#: C struct -> its members, in order: (name, struct format of the member)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_class_key": (("node", "<I"), ("mask", "<I"), ("src", ">4I"), ("dst", ">4I"),
                      ("sport", ">H"), ("dport", ">H"), ("proto", "B"), ("family", "B"),
                      ("pad", "2x")),
    "sfc_mask": (("used", "<I"), ("src", ">4I"), ("dst", ">4I"), ("sport", ">H"),
                 ("dport", ">H"), ("proto", "B"), ("family", "B"), ("pad", "2x")),
    "sfc_match": (("priority", "<i"), ("chain", "<I")),
    "sfc_chain": (("nslots", "<I"), ("symmetric", "<I"), ("slot", f"<{limits.SLOTS}I")),
    "sfc_path": (("depth", "<I"), ("ifindex", "<I"), ("smac", "6s"), ("dmac", "6s"),
                 ("lse", f">{limits.MAX_LABELS}I"), ("encap", "<I")),
    "sfc_hop": (("node", "<I"), ("action", "<I"), ("ifindex", "<I"), ("smac", "6s"),
                ("dmac", "6s")),
    "sfc_stack": (("depth", "<I"), ("lse", f">{limits.MAX_LABELS}I")),
    # include/sfc_nsh.h (in the objects that forward NSH: NSH_OBJECTS)
    "sfc_nsh_key": (("node", "<I"), ("spi", "<I"), ("si", "<I")),
    "sfc_nsh_hop": (("label", "<I"), ("last", "<I")),
}
#: struct sfc_tuple of include/sfc.h: the IPv4 or IPv6 5-tuple the SFC-aware eBPF functions key
#: their connections by, laid out as ``sfc_class_key`` (checked with their objects:
#: :func:`fw_drift`, :func:`lb_drift`)
TUPLE_LAYOUT: dict[str, tuple[tuple[str, str], ...]] = {
    "sfc_tuple": (("node", "<I"), ("mask", "<I"), ("src", ">4I"), ("dst", ">4I"),
                  ("sport", ">H"), ("dport", ">H"), ("proto", "B"), ("family", "B"),
                  ("pad", "2x")),
}
#: the structs and maps of include/sfc_nsh.h, and the objects that include it
NSH_STRUCTS = ("sfc_nsh_key", "sfc_nsh_hop")
NSH_MAPS = {"sfc_nsh": ("sfc_nsh_key", "sfc_nsh_hop")}
NSH_OBJECTS = ("sfc_forward", "sfc_proxy_out", "sfc_classify")

#: enum sfc_limit -> the Python constant that must equal it
LIMITS: dict[str, int] = {
    "SFC_MAX_LABELS": limits.MAX_LABELS, "SFC_MAX_MASKS": limits.MAX_MASKS,
    "SFC_MAX_SLOTS": limits.SLOTS, "SFC_MAX_NODES": 256,
    "SFC_MAX_CHAINS": limits.MAX_DIRECTIONS, "SFC_MAX_PATHS": limits.MAX_PATHS,
    "SFC_MAX_STACKS": 65536, "SFC_MAX_CLASSES": limits.MAX_CLASSES,
    "SFC_MAX_HOPS": limits.MAX_HOPS, "SFC_MAX_FLOWS": 65536,
}

#: the per-node counters, in the order of enum sfc_counter (``SFC_C_<NAME>``)
COUNTERS = ("classified", "popped", "forwarded", "delivered", "ttl_expired", "unknown_label",
            "proxy_in", "proxy_out", "proxy_miss", "errors", "gso", "no_instance",
            "nsh_ttl_expired", "nsh_si_expired", "nsh_unknown")
#: counter slots per node (``SFC_NCOUNTERS``)
NCOUNTERS = 16
#: enum sfc_action: what the owner of a label does with it
ACTIONS = {"forward": 1, "proxy": 2, "unpad": 3}
#: enum sfc_encap: struct sfc_path's encap, a chain's ``encap``
ENCAPS = {"mpls": 0, "nsh": 1, "srv6": 2}

#: map -> (key type, value type), as declared in include/sfc.h
MAPS: dict[str, tuple[str, str]] = {
    "sfc_masks": ("__u32", "sfc_mask"), "sfc_classes": ("sfc_class_key", "sfc_match"),
    "sfc_chains": ("__u32", "sfc_chain"), "sfc_paths": ("__u32", "sfc_path"),
    "sfc_labels": ("__u32", "sfc_hop"), "sfc_stack_ids": ("sfc_stack", "__u32"),
    "sfc_stacks": ("__u32", "sfc_stack"), "sfc_next_stack": ("__u32", "__u32"),
    "sfc_flows": ("sfc_class_key", "__u32"), "sfc_counters": ("__u32", "__u64"),
    "sfc_path_counts": ("__u32", "__u64"), "sfc_ports": ("__u32", "__u32"),
}
#: maps of one object, private to each load of it (not pinned, never written from Python):
#: the forwarder's per-CPU memory of what it parked last (bpf/sfc_forward.bpf.c)
PRIVATE_MAPS: dict[str, tuple[str, str]] = {"sfc_last": ("__u32", "sfc_parked")}


class Packer:
    """Packs one C struct from its members' values in order (padding takes none); members of
    one byte order in a row (bytes and padding join either) share one ``struct.Struct`` of
    :attr:`parts`, so packing is one call per run."""

    def __init__(self, name: str) -> None:
        self.name = name
        runs: list[tuple[str, str]] = []  # (byte order, formats)
        for _, fmt in LAYOUTS[name]:
            order, body = (fmt[0], fmt[1:]) if fmt[0] in "<>" else ("", fmt)
            if runs and (runs[-1][0] == order or not order):  # bytes, padding: any order
                runs[-1] = (runs[-1][0], runs[-1][1] + body)
            elif not order:
                runs.append(("<", body))
            elif runs and runs[-1][0] == order:
                runs[-1] = (order, runs[-1][1] + body)
            else:
                runs.append((order, body))
        self.parts = [struct.Struct(order + body) for order, body in runs]
        self.counts = [len(s.unpack(bytes(s.size))) for s in self.parts]
        self.size = sum(s.size for s in self.parts)

    def pack(self, *values: object) -> bytes:
        out, i = [], 0
        for s, n in zip(self.parts, self.counts):
            out.append(s.pack(*values[i:i + n]))
            i += n
        if i != len(values):
            raise ValueError(f"struct {self.name} takes {i} values, not {len(values)}")
        return b"".join(out)

    def unpack(self, raw: bytes) -> tuple[Any, ...]:
        out: list[Any] = []
        offset = 0
        for s in self.parts:
            out += s.unpack_from(raw, offset)
            offset += s.size
        return tuple(out)


def packer(name: str) -> Packer:
    """The packer of C struct ``name`` (a key of :data:`LAYOUTS`)."""
    return Packer(name)


def drift(btf: Btf) -> list[str]:
    """Every way the Python side differs from the object whose BTF is ``btf``; empty if none."""
    enums = {"sfc_limit": LIMITS, "sfc_action": {f"SFC_A_{a.upper()}": v
                                                  for a, v in ACTIONS.items()},
             "sfc_encap": {f"SFC_ENCAP_{e.upper()}": v for e, v in ENCAPS.items()},
             "sfc_counter": {**{f"SFC_C_{c.upper()}": i for i, c in enumerate(COUNTERS)},
                             "SFC_NCOUNTERS": NCOUNTERS}}
    nsh = NSH_STRUCTS[0] in btf.structs  # an object that includes sfc_nsh.h
    layouts = {k: v for k, v in LAYOUTS.items() if nsh or k not in NSH_STRUCTS}
    return _drift(btf, layouts, enums, {**MAPS, **(NSH_MAPS if nsh else {})})


def srv6_drift(btf: Btf) -> list[str]:
    """The SRv6 layout (``enum sfc_srv6`` in include/sfc_srv6.h: the locator, the header sizes,
    the traffic class that marks an SRv6 path) against :data:`sfclab.plan.srv6.C_CONSTANTS`."""
    return _drift(btf, {}, {"sfc_srv6": srv6.C_CONSTANTS}, {})


def fw_drift(btf: Btf) -> list[str]:
    """The same for the bpf-firewall's own layouts (include/sfc_fw.h, stated in Python by
    :mod:`sfclab.functions.bpf_firewall_maps`) against ``fw.bpf.o``'s BTF."""
    enums = {"sfc_fw_limit": fwm.LIMITS, "sfc_fw_verdict": fwm.VERDICTS}
    return _drift(btf, {**TUPLE_LAYOUT, **fwm.LAYOUTS}, enums, fwm.MAPS)


def lb_drift(btf: Btf) -> list[str]:
    """The same for the bpf-balancer's layouts (include/sfc_lb.h, stated in Python by
    :mod:`sfclab.functions.bpf_balancer_maps`) against ``balancer.bpf.o``'s BTF."""
    enums = {"sfc_lb_limit": lbm.LIMITS, "sfc_lb_sticky": lbm.STICKY,
             "sfc_lb_direction": lbm.DIRECTIONS}
    return _drift(btf, {**TUPLE_LAYOUT, **lbm.LAYOUTS}, enums, lbm.MAPS)


def nat_drift(btf: Btf) -> list[str]:
    """The same for the bpf-nat's own layouts (include/sfc_nat.h, stated in Python by
    :mod:`sfclab.functions.bpf_nat_maps`) against ``nat.bpf.o``'s BTF."""
    enums = {"sfc_nat_limit": natm.LIMITS, "sfc_nat_side": natm.SIDES}
    return _drift(btf, natm.LAYOUTS, enums, natm.MAPS)


def _drift(btf: Btf, layouts: dict[str, tuple[tuple[str, str], ...]],
           enums: dict[str, dict[str, int]], maps: dict[str, tuple[str, str]]) -> list[str]:
    out: list[str] = []
    for name, fields in layouts.items():
        c = btf.structs.get(name)
        if c is None:
            out.append(f"struct {name}: not in the object")
            continue
        if [m.name for m in c.members] != [f for f, _ in fields]:
            out.append(f"struct {name}: members {[m.name for m in c.members]}, Python has "
                       f"{[f for f, _ in fields]}")
            continue
        offset = 0
        for m, (_, fmt) in zip(c.members, fields):
            size = struct.calcsize("<" + fmt.lstrip("<>"))
            if m.offset != offset or m.size != size:
                out.append(f"struct {name}.{m.name}: offset {m.offset} size {m.size} in C, "
                           f"{offset} and {size} in Python")
            big = fmt.startswith(">")
            if m.type_name.startswith("__be") != big and m.size // m.count > 1:
                out.append(f"struct {name}.{m.name}: {m.type_name} in C, "
                           f"{'network' if big else 'host'} order in Python")
            if m.type_name.startswith("__s") != fmt[-1].islower() and fmt[-1] not in "sx":
                out.append(f"struct {name}.{m.name}: {m.type_name} in C, {fmt} in Python")
            offset += size
        if c.size != offset:
            out.append(f"struct {name}: {c.size} bytes in C, {offset} in Python")
    for enum, want in enums.items():
        have = btf.enums.get(enum)
        if have != want:
            out.append(f"enum {enum}: {have} in C, {want} in Python")
    for mname, (key, value) in maps.items():
        d = btf.maps.get(mname)
        if d is None or (d.key, d.value) != (key, value):
            out.append(f"map {mname}: {d and (d.key, d.value)} in C, {(key, value)} in Python")
    return out
