"""Table entries of one chain on a running lab's data plane: written, switched, taken out.

Order matters for the chains that keep running: labels and paths are written first (no packet
can use them yet), then a direction's slot table, and only then its classifier entries, which
switch traffic on; removal runs backwards (classifier entries first, so no new packet is
classified; then, after in-flight packets drained, the slots, paths and labels).  A slot table
is one array element: a rewrite (migration) swaps it in one update, and a packet sees the old
table or the new one, each of whose paths is valid.  Failover changes it in place
(:func:`change_slots`): only the slots whose path changes take new values, so the flows of
healthy instances keep their path, and their NAT and firewall state, through it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import ip_network
from typing import Any

from ...errors import LabError, SpecError
from ...kernel import netns
from ...plan.chainpaths import NO_PATH
from ...plan import maglev
from ...plan.sfc import DirectionPlan, Hop, SteeringPlan, mask_key
from ...realize.dataplane import (DataPlane, Iface, decode_chain, encode_chain, encode_path,
                                 encode_tuple, match_chain, nsh_rows, path_base)

#: where struct sfc_chain's slot array starts (after nslots and symmetric, two __u32)
SLOT_OFFSET = 8


def interfaces(netns_of: dict[str, str], nodes: Iterable[str]) -> dict[tuple[str, str], Iface]:
    """(node, interface) -> index and MAC, read from the kernel for ``nodes``."""
    out: dict[tuple[str, str], Iface] = {}
    for node in dict.fromkeys(nodes):
        ipr = netns.iproute(netns_of[node])
        try:
            for link in ipr.get_links():
                mac = link.get_attr("IFLA_ADDRESS") or "00:00:00:00:00:00"
                out[(node, link.get_attr("IFLA_IFNAME"))] = Iface(
                    link["index"], bytes.fromhex(mac.replace(":", "")))
        finally:
            ipr.close()
    return out


def write_labels(dp: DataPlane, sp: SteeringPlan, hops: list[Hop],
                 ifaces: dict[tuple[str, str], Iface],
                 netns_of: Mapping[str, str] | None = None) -> None:
    """``hops`` into the label table, and their devices where ``netns_of`` names the owner's
    namespace (:meth:`DataPlane.write_hops`)."""
    dp.write_hops(sp, hops, ifaces, netns_of)


def delete_labels(dp: DataPlane, labels: Iterable[int]) -> None:
    dp.delete_hops(labels)


def write_paths(dp: DataPlane, d: DirectionPlan, base: int,
                ifaces: dict[tuple[str, str], Iface], sp: SteeringPlan | None = None,
                nodes: set[str] | None = None) -> None:
    """Direction ``d``'s paths from path-table index ``base``; for an NSH chain first its
    nodes' (SPI, SI) entries, from the labels of ``sp`` (``nodes``: only theirs, a host's
    share)."""
    if d.encap == "nsh":
        if sp is None:
            raise ValueError("an NSH direction's paths need the steering plan's labels")
        dp.write_nsh(sp, d, nodes)
    for p in d.paths:
        iface = ifaces[(d.ingress, p.ifname)]
        dmac = ifaces[(p.next, p.next_ifname)].mac
        dp.maps["sfc_paths"].update(struct.pack("<I", base + p.index),
                                    encode_path(p.stack, d.ttl, iface, dmac, p.pad, d.encap,
                                                base + p.index))


def clear_paths(dp: DataPlane, base: int, count: int) -> None:
    for i in range(base, base + count):
        dp.maps["sfc_paths"].update(struct.pack("<I", i), bytes(dp.maps["sfc_paths"].value_size))


def write_slots(dp: DataPlane, d: DirectionPlan, slot_paths: list[int]) -> None:
    """Direction ``d``'s slot table: slot -> path-table index (all :data:`NO_PATH`: drop)."""
    sym = (2 if d.reverse else 1) if d.symmetric else 0
    dp.maps["sfc_chains"].update(struct.pack("<I", d.index),
                                 encode_chain(len(slot_paths), sym, list(slot_paths)))


def change_slots(dp: DataPlane, d: DirectionPlan, slot_paths: list[int]) -> int:
    """Direction ``d``'s slot table changed to ``slot_paths`` in place (failover, an instance
    back): how many slots changed, 0 without a write.  The entry is read back and only the
    changed slots take new values; every other byte is written as it was, so a packet of a
    flow whose slot stays sees its path throughout (never an empty or half-written table).  A
    table of another size or symmetry, or none yet, is written whole (:func:`write_slots`)."""
    key = struct.pack("<I", d.index)
    raw = dp.maps["sfc_chains"].lookup(key)
    sym = (2 if d.reverse else 1) if d.symmetric else 0
    if raw is None:
        write_slots(dp, d, slot_paths)
        return len(slot_paths)
    nslots, was_sym, now = decode_chain(raw)
    if nslots != len(slot_paths) or was_sym != sym:
        write_slots(dp, d, slot_paths)
        return len(slot_paths)
    changed = [k for k, (a, b) in enumerate(zip(now, slot_paths)) if a != b]
    if changed:
        new = bytearray(raw)
        for k in changed:
            struct.pack_into("<I", new, SLOT_OFFSET + 4 * k, slot_paths[k])
        dp.maps["sfc_chains"].update(key, bytes(new))
    return len(changed)


def clear_slots(dp: DataPlane, index: int) -> None:
    dp.maps["sfc_chains"].update(struct.pack("<I", index), bytes(dp.maps["sfc_chains"].value_size))


def clear_direction(dp: DataPlane, d: DirectionPlan, sp: SteeringPlan,
                    nodes: set[str] | None = None) -> None:
    """Direction ``d`` off the data plane: its slot table emptied (its traffic dropped), then
    its path entries and, for an NSH chain, its nodes' (SPI, SI) entries (``nodes``: only
    theirs, a host's share; the labels' owners as ``sp`` has them)."""
    clear_slots(dp, d.index)
    if d.path_base is not None:
        clear_paths(dp, d.path_base, len(d.paths))
    dp.remove_nsh(k for k, _ in nsh_rows(sp, [d], nodes))


def clear_old_paths(dp: DataPlane, sp: SteeringPlan, olds: Iterable[DirectionPlan]) -> None:
    """A migration's old paths off the data plane: each direction of ``olds`` at its range in
    ``sp`` (the plan before the switch), path entries and NSH entries."""
    for d in olds:
        base = path_base(sp, d.index)
        clear_paths(dp, base, len(d.paths))
        dp.remove_nsh(k for k, _ in nsh_rows(sp, [d], base=base))


def slot_paths(sp: SteeringPlan, d: DirectionPlan, weights: list[int] | None = None
               ) -> list[int]:
    """The slot table of ``d`` with its plan's weights, or ``weights`` per path (0: out)."""
    w = weights if weights is not None else [p.weight for p in d.paths]
    return slots_over(d, path_base(sp, d.index), w)


def slots_over(d: DirectionPlan, base: int, weights: list[int]) -> list[int]:
    """Slots of ``d`` over the paths at ``base`` with ``weights`` (one per path, 0: out) by
    :func:`sfclab.plan.maglev.failover`: a slot of the planned table (``d.slots``, which a
    migration keeps) whose path is in keeps it, only the slots of paths that are out change;
    every slot :data:`NO_PATH` when no weight is left."""
    keys = [maglev.path_key(p.instances) for p in d.paths]
    planned = [p.weight for p in d.paths]
    full = d.slots if len(d.slots) == maglev.SIZE else None  # as written (kept by migration)
    picks = maglev.failover(keys, planned, weights, full=full)
    if picks is None:
        return [NO_PATH] * maglev.SIZE
    return [base + d.paths[k].index for k in picks]


def _keys(dp: DataPlane, sp: SteeringPlan, entries: Sequence[Mapping[str, Any]]) -> list[bytes]:
    masks = dp.masks()
    out = []
    for e in entries:
        mk = mask_key(e)
        if mk not in masks:
            continue  # a mask no entry uses yet: no such key can be in the table
        out.append(encode_tuple(sp.node_ids[e["ingress"]], masks.index(mk),
                                ip_network(e["src"]), ip_network(e["dst"]), e["sport"][0],
                                e["dport"][0], e["proto"], e.get("family", 4)))
    return out


def check_free(dp: DataPlane, sp: SteeringPlan, d: DirectionPlan, source: str) -> None:
    """Refuse a classifier whose exact entry another chain holds (one would shadow the other,
    and removing one chain would take the other's entry with it)."""
    ids = {n: i for n, i in sp.node_ids.items()}
    if d.ingress not in ids:
        return
    for c in d.classifiers:
        for k in _keys(dp, sp, c["entries"]):
            if dp.maps["sfc_classes"].lookup(k) is not None:
                raise SpecError("the same classifier entry belongs to another chain of the lab "
                                "(one would shadow the other): change it or its priority is "
                                "not enough", file=source, place=f"classifiers[{c['index']}]")


def check_room(dp: DataPlane, dirs: list[DirectionPlan], source: str) -> None:
    """Refuse, before anything is made, directions whose classifier entries would not fit
    the live maps: their masks with those in use past the mask table, or their entries with
    those in the classifier map past its size."""
    entries = [e for d in dirs for c in d.classifiers for e in c["entries"]]
    masks = set(dp.masks()) | {mask_key(e) for e in entries}
    room = dp.maps["sfc_masks"].max_entries
    if len(masks) > room:
        raise SpecError(f"the chain's classifiers need {len(masks)} distinct wildcard masks "
                        f"with those the lab uses; at most {room}", file=source,
                        place="classifiers")
    classes = dp.maps["sfc_classes"]
    held = len(classes.items())
    if held + len(entries) > classes.max_entries:
        raise SpecError(f"the lab's classifier map holds {held:,} entries; the chain's "
                        f"{len(entries):,} more would pass its size of "
                        f"{classes.max_entries:,}", file=source, place="classifiers")


def write_classifiers(dp: DataPlane, sp: SteeringPlan, d: DirectionPlan) -> int:
    n = 0
    for c in d.classifiers:
        n += dp.add_entries(sp.node_ids, d.index, c["entries"],
                            order=min(64 * d.index + c["index"], 4095))
    return n


def delete_classifiers(dp: DataPlane, sp: SteeringPlan, d: DirectionPlan,
                       extra: Sequence[Mapping[str, Any]] | None = None) -> int:
    entries: list[Mapping[str, Any]] = [e for c in d.classifiers for e in c["entries"]]
    entries += extra or []
    n = 0
    for k in _keys(dp, sp, entries):
        raw = dp.maps["sfc_classes"].lookup(k)
        if raw is not None and match_chain(raw) == d.index:
            n += dp.maps["sfc_classes"].delete(k)
    return n


def direction(sp: SteeringPlan, chain: str) -> list[DirectionPlan]:
    dirs = [d for d in sp.directions if d.chain == chain]
    if not dirs:
        raise LabError(f"no chain '{chain}'")
    return dirs
