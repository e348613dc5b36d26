"""The SFC data plane of a running lab: its bpffs directory, its maps, their entries.

Layout (one directory per lab, its path journaled before anything is pinned)::

    /sys/fs/bpf/sfclab/<lab>/maps/sfc_*          the lab-wide maps (include/sfc.h)

(The programs are attached to interfaces inside the lab's namespaces and go with them: this
kernel refuses to pin BPF links.)

The encodings here are the C structures of ``include/sfc.h``, byte for byte, packed by the
data-plane contract (:mod:`sfclab.realize.contract`, checked against the objects' BTF).  :class:`DataPlane`
writes a plan's tables (classifier masks and entries, chains, paths, labels) and reads the
counters back; ``sfclab chain classify`` adds entries through it on a running lab.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any, Self

from ..errors import RealizeError
from ..kernel import bpf, netns
from ..plan import srv6
from ..plan.classifier_rows import Mask, Row, mask_of
from ..plan.encap import NSH_FIRST_SI, nsh_entries
from ..plan.labels import PAD_LABEL, lse
from ..plan.sfc_hosts import foreign_sid_labels
from ..plan.steering import DirectionPlan, Hop, SteeringPlan
from ..spec.limits import MAX_LABELS, MAX_MASKS, SLOTS
from .contract import ACTIONS, COUNTERS, ENCAPS, NCOUNTERS, packer

BPFFS = Path("/sys/fs/bpf")
__all__ = ["ACTIONS", "COUNTERS", "NCOUNTERS", "DataPlane", "Iface", "Undo"]
_TUPLE, _MASK, _MATCH = packer("sfc_class_key"), packer("sfc_mask"), packer("sfc_match")
_CHAIN, _PATH, _HOP = packer("sfc_chain"), packer("sfc_path"), packer("sfc_hop")
_NSH_KEY, _NSH_HOP = packer("sfc_nsh_key"), packer("sfc_nsh_hop")
#: the classifier's effective priority: the lab file's priority, then the earlier classifier
ORDER_BITS = 12


def lab_dir(lab: str) -> Path:
    """The lab's bpffs directory (``lab`` has passed the name rule: it is never a path)."""
    if not lab or "/" in lab or lab in (".", ".."):
        raise RealizeError(f"not a lab name: {lab!r}")
    return BPFFS / "sfclab" / lab


def ensure_bpffs() -> None:
    """bpffs mounted at /sys/fs/bpf (where systemd and bpftool put it), mounted if absent."""
    with open("/proc/self/mounts") as f:
        if any(line.split()[1:3] == [str(BPFFS), "bpf"] for line in f):
            return
    bpf.mount_bpffs(str(BPFFS))


@dataclass(frozen=True)
class Iface:
    index: int
    mac: bytes


def _mask_bytes(plen: int, bits: int) -> int:
    return ((1 << bits) - 1) ^ ((1 << (bits - plen)) - 1) if plen else 0


def words(addr: int, family: int) -> tuple[int, int, int, int]:
    """An address as the key's four 32-bit words: IPv6 all of them, IPv4 (and the address 0
    of a family-less entry) the first."""
    if family == 6:
        return (addr >> 96, (addr >> 64) & 0xffffffff, (addr >> 32) & 0xffffffff,
                addr & 0xffffffff)
    return (addr, 0, 0, 0)


def _prefix_words(plen: int) -> tuple[int, int, int, int]:
    """A prefix length as a 128-bit mask in four words (a /n of IPv4 is the same first n
    bits: IPv4 addresses sit in the first word)."""
    return words(_mask_bytes(plen, 128), 6)


def encode_mask(src_plen: int, dst_plen: int, sport_plen: int, dport_plen: int,
                proto: bool, family: bool) -> bytes:
    return _MASK.pack(1, *_prefix_words(src_plen), *_prefix_words(dst_plen),
                      _mask_bytes(sport_plen, 16), _mask_bytes(dport_plen, 16),
                      0xff if proto else 0, 0xff if family else 0)


def _mask_len(w: tuple[int, ...]) -> int:
    return sum(bin(x).count("1") for x in w)


# struct sfc_class_key in its two runs: node, mask index (host order); src, dst, sport, dport,
# proto, family (network order) -- one call each in the bulk path
_KEY_HEAD, _KEY_TAIL = _TUPLE.parts


def _key_tail(row: Row) -> bytes:
    fam = row[11]
    return _KEY_TAIL.pack(*words(row[1], fam), *words(row[3], fam), row[5], row[7], row[9], fam)


def encode_tuple(node: int, mask: int, src: IPv4Network | IPv6Network,
                 dst: IPv4Network | IPv6Network, sport: int, dport: int, proto: int,
                 family: int = 4) -> bytes:
    """One classifier key (the layout of :meth:`DataPlane.add_rows`), e.g. to delete it."""
    return _TUPLE.pack(node, mask, *words(int(src.network_address), family),
                       *words(int(dst.network_address), family), sport, dport, proto, family)


def encode_path(stack: list[int], ttl: int, iface: Iface, dmac: bytes, pad: int = 0,
                encap: str = "mpls", spi: int = 0) -> bytes:
    """struct sfc_path: ``stack`` (top first) and ``pad`` padding entries below it (label
    :data:`~sfclab.plan.sfc.PAD_LABEL`, owned by no node), the bottom one marked; for an NSH
    chain (``encap``) the path's NSH header instead, of service path ``spi``
    (:func:`nsh_header`).  A path of an SRv6 chain has every entry marked
    :data:`~sfclab.plan.srv6.LSE_SRV6` (the classifier writes its labels as SIDs and the proxy
    parks them so marked, ``include/sfc_srv6.h``)."""
    if encap == "nsh":
        entries = list(nsh_header(ttl, spi))
    else:
        labels = [*stack, *[PAD_LABEL] * pad]
        mark = srv6.LSE_SRV6 if encap == "srv6" else 0
        entries = [lse(lbl, ttl, i == len(labels) - 1) | mark for i, lbl in enumerate(labels)]
    depth = len(entries)
    entries += [0] * (MAX_LABELS - len(entries))
    return _PATH.pack(depth, iface.index, iface.mac, dmac, *entries, ENCAPS[encap])


def nsh_header(ttl: int, spi: int, si: int = NSH_FIRST_SI) -> tuple[int, int]:
    """The two words of an NSH header as the classifier pushes it (include/sfc_nsh.h): version
    0, TTL ``ttl``, length 2, MD type 2, next protocol 0 (the classifier sets it by the
    packet's family); SPI ``spi``, SI ``si``."""
    return (ttl & 0x3f) << 22 | 2 << 16 | 2 << 8, (spi & 0xffffff) << 8 | si


def nsh_rows(sp: SteeringPlan, dirs: Iterable[DirectionPlan], nodes: set[str] | None = None,
             base: int | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) of every ``sfc_nsh`` entry of the NSH directions among ``dirs``: each
    node's hop on each path at each service index (:func:`sfclab.plan.encap.nsh_entries`,
    labels owned as ``sp`` says), the SPI being the path's index in the path table: ``base``
    when given, else the direction's own range when it has one (a migration's new paths, whose
    direction in ``sp`` still has the old range), else its range in ``sp``; ``nodes``: only
    theirs (a host's share)."""
    owner = {h.label: (h.node, h.action) for h in sp.hops}
    out = []
    for d in dirs:
        if d.encap != "nsh":
            continue
        first = base if base is not None else (
            d.path_base if d.path_base is not None else path_base(sp, d.index))
        for p in d.paths:
            for node, spi, si, label, last in nsh_entries(first + p.index, p.stack, owner):
                if nodes is None or node in nodes:
                    out.append((nsh_key(sp.node_ids[node], spi, si), nsh_value(label, last)))
    return out


def nsh_key(node: int, spi: int, si: int) -> bytes:
    """A key of ``sfc_nsh`` (struct sfc_nsh_key)."""
    return _NSH_KEY.pack(node, spi, si)


def nsh_value(label: int, last: bool) -> bytes:
    """A value of ``sfc_nsh`` (struct sfc_nsh_hop)."""
    return _NSH_HOP.pack(label, int(last))


def decode_path(raw: bytes) -> tuple[Iface, bytes]:
    """The ingress interface (index, MAC) and the first hop's MAC of an encoded struct sfc_path
    (what :func:`encode_path` needs to rewrite its stack or TTL)."""
    _, ifindex, smac, dmac, *_ = _PATH.unpack(raw)
    return Iface(int(ifindex), bytes(smac)), bytes(dmac)


def encode_chain(nslots: int, symmetric: int, slots: list[int]) -> bytes:
    """A chain direction's slot table (struct sfc_chain); ``slots`` padded with path 0."""
    return _CHAIN.pack(nslots, symmetric, *slots, *[0] * (SLOTS - len(slots)))


def decode_chain(raw: bytes) -> tuple[int, int, list[int]]:
    """(slots in use, symmetric, the slots in use) of an encoded struct sfc_chain."""
    nslots, sym, *slots = _CHAIN.unpack(raw)
    return int(nslots), int(sym), [int(s) for s in slots[:nslots]]


def match_chain(raw: bytes) -> int:
    """The chain direction of an encoded classifier value (struct sfc_match)."""
    return int(_MATCH.unpack(raw)[1])


def encode_hop(node: int, action: str, iface: Iface | None, dmac: bytes | None) -> bytes:
    return _HOP.pack(node, ACTIONS[action], iface.index if iface else 0,
                     iface.mac if iface else b"\0" * 6, dmac or b"\0" * 6)


@dataclass
class Undo:
    """What :meth:`DataPlane.add_rows` wrote, to take it out again: classifier keys it added,
    (key, old value) of keys it replaced, and indices of masks it added."""

    keys: list[bytes] = field(default_factory=list)
    old: list[tuple[bytes, bytes]] = field(default_factory=list)
    masks: list[int] = field(default_factory=list)
    #: the classifier map before the first write (read once, :meth:`bpf.PinnedMap.items`)
    before: dict[bytes, bytes] | None = None
    seen: set[bytes] = field(default_factory=set)


class DataPlane:
    """The pinned maps of a lab's data plane; a context manager (closes them)."""

    NAMES = ("sfc_masks", "sfc_classes", "sfc_chains", "sfc_paths", "sfc_labels",
             "sfc_counters", "sfc_path_counts")

    def __init__(self, lab: str, top: Path | None = None):
        """``top``: the directory holding ``maps`` (default: the lab's; a host's share on a
        host driven over SSH: :func:`share_dir`)."""
        self.dir = (top or lab_dir(lab)) / "maps"
        self.maps: dict[str, bpf.PinnedMap] = {}
        try:
            for n in self.NAMES:
                self.maps[n] = bpf.PinnedMap(str(self.dir / n))
        except RealizeError:
            self.close()
            raise

    def close(self) -> None:
        for m in self.maps.values():
            m.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- classifier -----------------------------------------------------------------------
    def masks(self) -> list[Mask]:
        """The masks in use, by index (their order in the map)."""
        out = []
        m = self.maps["sfc_masks"]
        for i in range(MAX_MASKS):
            raw = m.lookup(struct.pack("<I", i))
            v = _MASK.unpack(raw) if raw is not None else (0,) * 14
            if v[0] == 0:
                break
            sp, dp, proto, fam = v[9:13]
            out.append((_mask_len(v[1:5]), _mask_len(v[5:9]), bin(sp).count("1"),
                        bin(dp).count("1"), proto != 0, fam != 0))
        return out

    def add_entries(self, node_ids: dict[str, int], direction: int,
                    entries: Iterable[Mapping[str, Any]], order: int) -> int:
        """Write classifier entries (``plan.sfc`` Entry dicts) for chain direction
        ``direction``; ``order`` breaks priority ties (lower: earlier).  New masks are added
        after the ones in use.  Returns the number of entries written."""
        rows = []
        for e in entries:
            src, dst = ip_network(e["src"]), ip_network(e["dst"])
            rows.append((e["ingress"], int(src.network_address), src.prefixlen,
                         int(dst.network_address), dst.prefixlen, *e["sport"], *e["dport"],
                         e["proto"], e["priority"], e.get("family", 4)))
        return self.add_rows(node_ids, direction, rows, order)

    def holders(self, node_ids: dict[str, int], rows: Iterable[Row],
                table: dict[bytes, bytes] | None = None) -> list[int | None]:
        """For each row, the chain direction whose classifier entry has the row's key now
        (None: no entry; a mask no entry uses yet cannot have one).  ``table``: the classifier
        map as just read, else it is read here."""
        index = {mk: i for i, mk in enumerate(self.masks())}
        # the whole table in a few batched calls: one lookup per row would take seconds for
        # the 100,000 rows of a large ``chain classify`` file
        held = self.maps["sfc_classes"].items() if table is None else table
        out: list[int | None] = []
        for row in rows:
            mi = index.get(mask_of(row))
            raw = None if mi is None else held.get(
                _KEY_HEAD.pack(node_ids[row[0]], mi) + _key_tail(row))
            out.append(None if raw is None else match_chain(raw))
        return out

    def add_rows(self, node_ids: dict[str, int], direction: int, rows: Iterable[Row],
                 order: int, undo: Undo | None = None) -> int:
        """:meth:`add_entries` for entries in integers (``plan.classifier_rows``), in batched
        map updates: the bulk path of ``chain classify``.  All or nothing: what it wrote is
        kept in ``undo`` (new masks, new keys, the old values of keys it replaced); on a
        failure it is taken out again before the error is raised -- by the caller when it
        passed ``undo`` (several calls undone together), else here."""
        own = Undo() if undo is None else undo
        try:
            return self._add_rows(node_ids, direction, rows, order, own)
        except BaseException:
            if undo is None:
                self.undo(own)
            raise

    def _add_rows(self, node_ids: dict[str, int], direction: int, rows: Iterable[Row],
                  order: int, undo: Undo) -> int:
        masks = self.masks()
        index = {mk: i for i, mk in enumerate(masks)}
        tie = (1 << ORDER_BITS) - 1 - min(order, 4095)
        items: dict[bytes, int] = {}
        le = _KEY_HEAD.pack
        room = self.maps["sfc_masks"].max_entries
        for row in rows:
            mk = mask_of(row)
            mi = index.get(mk)
            if mi is None:
                if len(masks) >= room:
                    raise RealizeError(f"more than {room} distinct wildcard masks",
                                       obj=str(self.dir / "sfc_masks"))
                undo.masks.append(len(masks))
                self.maps["sfc_masks"].update(struct.pack("<I", len(masks)), encode_mask(*mk))
                mi = index[mk] = len(masks)
                masks.append(mk)
            key = le(node_ids[row[0]], mi) + _key_tail(row)
            prio = (row[10] << ORDER_BITS) | tie
            if items.get(key, -1) < prio:
                items[key] = prio
        values: dict[int, bytes] = {}
        pairs = [(k, values.get(p) or values.setdefault(p, _MATCH.pack(p, direction)))
                 for k, p in items.items()]
        classes = self.maps["sfc_classes"]
        before = undo.before if undo.before is not None else classes.items()
        undo.before = before
        try:
            classes.update_batch(pairs)
            done = len(pairs)
        except bpf.BatchError as e:
            done = e.done
            raise
        finally:  # what was written: a new key goes again, a replaced one gets its value back
            for k, _ in pairs[:done]:
                if k in undo.seen:
                    continue
                undo.seen.add(k)
                if k in before:
                    undo.old.append((k, before[k]))
                else:
                    undo.keys.append(k)
        return len(items)

    def undo(self, undo: Undo) -> list[str]:
        """Take out what :meth:`add_rows` recorded in ``undo``, newest first: keys it added
        deleted, keys it replaced given their old values back, masks it added cleared.
        Returns what could not be undone (empty: all of it)."""
        errors: list[str] = []
        classes = self.maps["sfc_classes"]
        for k, old in reversed(undo.old):
            try:
                classes.update(k, old)
            except RealizeError as e:
                errors.append(str(e))
        for k in reversed(undo.keys):
            try:
                classes.delete(k)
            except RealizeError as e:
                errors.append(str(e))
        zero = bytes(self.maps["sfc_masks"].value_size)
        for i in reversed(undo.masks):
            try:
                self.maps["sfc_masks"].update(struct.pack("<I", i), zero)
            except RealizeError as e:
                errors.append(str(e))
        undo.keys.clear()
        undo.old.clear()
        undo.masks.clear()
        undo.seen.clear()
        return errors

    # --- the whole plan -------------------------------------------------------------------
    def load(self, sp: SteeringPlan, ifaces: dict[tuple[str, str], Iface],
             nodes: set[str] | None = None, netns_of: Mapping[str, str] | None = None) -> None:
        """Write every table of ``sp``; ``ifaces``: (node, interface) -> index and MAC.
        ``nodes``: only the entries these nodes use (a host's share, :mod:`..plan.sfc_hosts`):
        the directions whose ingress is one of them, the labels they own.  ``netns_of``:
        node -> namespace, for the devices of ``sfc_ports`` (:meth:`write_hops`)."""
        ids = sp.node_ids
        first_path = 0
        order = 0
        for d in sp.directions:
            if nodes is not None and d.ingress not in nodes:
                first_path += len(d.paths)
                order += 64
                continue
            for p in d.paths:
                iface = ifaces[(d.ingress, p.ifname)]
                dmac = ifaces[(p.next, p.next_ifname)].mac
                self.maps["sfc_paths"].update(struct.pack("<I", first_path + p.index),
                                              encode_path(p.stack, d.ttl, iface, dmac,
                                                          p.pad, d.encap, first_path + p.index))
            self.maps["sfc_chains"].update(struct.pack("<I", d.index), encode_chain(
                len(d.slots), (2 if d.reverse else 1) if d.symmetric else 0,
                [first_path + s for s in d.slots]))
            for c in d.classifiers:
                self.add_entries(ids, d.index, c["entries"], order + c["index"])
            first_path += len(d.paths)
            order += 64
        self.write_nsh(sp, None, nodes)
        self.write_hops(sp, [h for h in sp.hops if nodes is None or h.node in nodes], ifaces,
                        netns_of)
        if nodes is not None:
            self.write_sid_owners(sp, foreign_sid_labels(sp, nodes))

    def write_hops(self, sp: SteeringPlan, hops: Iterable[Hop],
                   ifaces: dict[tuple[str, str], Iface],
                   netns_of: Mapping[str, str] | None = None) -> None:
        """Each of ``hops`` into ``sfc_labels``, and a forward (or unpad) hop's device into
        ``sfc_ports`` under its label, written from inside its owner's namespace
        (``netns_of``: node -> namespace; without it, or for a node it does not name, the
        label's entry there is cleared and the programs redirect by interface index)."""
        ports = self.ports_map()
        for h in hops:
            out = ifaces[(h.node, h.ifname)] if h.ifname else None
            nmac = ifaces[(h.next, h.next_ifname)].mac if h.next and h.next_ifname else None
            key = struct.pack("<I", h.label)
            self.maps["sfc_labels"].update(key, encode_hop(sp.node_ids[h.node], h.action, out,
                                                           nmac))
            if ports is None:
                continue
            ns = (netns_of or {}).get(h.node)
            if out is None or not out.index or ns is None:
                ports.delete(key)
                continue
            with netns.entered(ns):  # the kernel finds the device in the writer's namespace
                ports.update(key, struct.pack("<I", out.index))

    def delete_hops(self, labels: Iterable[int]) -> None:
        """Labels no longer owned: their ``sfc_labels`` entries emptied (node 0: no node's;
        an array keeps every index) and their ``sfc_ports`` entries cleared."""
        ports = self.ports_map()
        for lbl in labels:
            key = struct.pack("<I", lbl)
            self.maps["sfc_labels"].update(key, bytes(_HOP.size))
            if ports is not None:
                ports.delete(key)

    def ports_map(self) -> bpf.PinnedMap | None:
        """``sfc_ports``, opened when first needed; None for a lab whose programs were loaded
        before it existed (they redirect by interface index)."""
        if "sfc_ports" not in self.maps:
            if not (self.dir / "sfc_ports").exists():
                return None
            self.maps["sfc_ports"] = bpf.PinnedMap(str(self.dir / "sfc_ports"))
        return self.maps["sfc_ports"]

    def write_sid_owners(self, sp: SteeringPlan, hops: list[Hop]) -> None:
        """Labels of other hosts' nodes, with their owner and action only, for the SIDs of
        SRv6 paths through this host's share (:func:`sfclab.plan.sfc_hosts.foreign_sid_labels`)."""
        for h in hops:
            self.maps["sfc_labels"].update(struct.pack("<I", h.label),
                                           encode_hop(sp.node_ids[h.node], h.action, None, None))

    def write_nsh(self, sp: SteeringPlan, only: DirectionPlan | None = None,
                  nodes: set[str] | None = None) -> int:
        """The ``sfc_nsh`` entries of ``sp``'s NSH directions (or of ``only``): each node's
        hop on each path at each service index (:func:`sfclab.plan.encap.nsh_entries`), the
        SPI being the path's index in the path table -- ``only``'s own range when it has one
        (a migration's new paths, whose direction in ``sp`` still has the old range);
        ``nodes``: only theirs.  Returns how many were written (none, and the map is not
        opened, without an NSH direction)."""
        rows = nsh_rows(sp, [only] if only else sp.directions, nodes)
        if not rows:
            return 0
        m = self.nsh_map()
        for key, value in rows:
            m.update(key, value)
        return len(rows)

    def remove_nsh(self, keys: Iterable[bytes]) -> int:
        """``keys`` of ``sfc_nsh`` deleted (a removed chain's, or a migration's old paths'; see
        :func:`nsh_rows`); how many were there.  The map is not opened for no key."""
        keys = list(keys)
        if not keys:
            return 0
        m = self.nsh_map()
        return sum(m.delete(k) for k in keys)

    def nsh_map(self) -> bpf.PinnedMap:
        """``sfc_nsh``, opened when first needed (only NSH chains use it)."""
        if "sfc_nsh" not in self.maps:
            self.maps["sfc_nsh"] = bpf.PinnedMap(str(self.dir / "sfc_nsh"))
        return self.maps["sfc_nsh"]

    # --- counters -------------------------------------------------------------------------
    def counters(self, node_id: int) -> dict[str, int]:
        m = self.maps["sfc_counters"]
        return {name: m.percpu_sum_u64(struct.pack("<I", node_id * NCOUNTERS + i))
                for i, name in enumerate(COUNTERS)}

    def path_count(self, index: int) -> int:
        return self.maps["sfc_path_counts"].percpu_sum_u64(struct.pack("<I", index))


def path_base(sp: SteeringPlan, direction: int) -> int:
    """The index in ``sfc_paths`` of the first path of chain direction ``direction`` (its
    own ``path_base`` for a chain added to a running lab)."""
    d = next((x for x in sp.directions if x.index == direction), None)
    if d is not None and d.path_base is not None:
        return d.path_base
    return sum(len(d.paths) for d in sp.directions[:direction])


def share_dir(lab: str, host: str) -> Path:
    """The bpffs directory of host ``host``'s share of the lab's data plane (on that host)."""
    from ..plan.sfc_hosts import share_dir_name

    return lab_dir(lab) / share_dir_name(host)


def mac_text(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def make_dir(lab: str) -> Path:
    """The lab's maps directory, made (with sfclab's shared parent if absent); bpffs mounted
    first.  A parent removed meanwhile by another lab's ``down`` is made again."""
    ensure_bpffs()
    maps = lab_dir(lab) / "maps"
    for _ in range(3):
        try:
            maps.mkdir(parents=True, exist_ok=True)
            return maps
        except FileNotFoundError:
            continue
    maps.mkdir(parents=True, exist_ok=True)
    return maps


def remove_dir(path: Path) -> int:
    """Unpin everything under the lab's bpffs directory ``path`` and remove it, then sfclab's
    shared parent if no other lab has a directory there; the number of pins removed.  (bpffs
    holds only pins and directories sfclab made there.)"""
    n = 0
    if not path.is_dir():
        return 0
    for root, dirs, files in os.walk(path, topdown=False):
        for f in files:
            os.unlink(os.path.join(root, f))
            n += 1
        for d in dirs:
            os.rmdir(os.path.join(root, d))
    os.rmdir(path)
    remove_if_empty(path.parent)  # another lab's directory keeps it
    return n


def remove_if_empty(d: Path) -> None:
    """Remove directory ``d`` (one sfclab made in bpffs) if it is empty; one already gone, or
    that another lab or host's share still holds, is left.  One rmdir and no check before it:
    the hosts of a lab end their shares at once, and a check races the others' removals."""
    try:
        d.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
