"""``chain trace``'s probes and label traceroutes (the model: :mod:`sfclab.live.ops.chains`): the
probe packets (:func:`probe_packet`, :func:`probe_ports`) and the traceroute in this machine's
kernel (:func:`trace_here`, the ``local`` runtime's ``trace_paths``; over SSH:
:mod:`sfclab.live.runtime.agents_trace`).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, Any, TypeVar

from ...kernel import netns
from ...plan import flowhash
from ...plan.encap import encap_of, trace_steps
from ...plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ...realize.dataplane import DataPlane, decode_chain, decode_path, encode_path

if TYPE_CHECKING:  # light start-up: the agents load no chain-file models
    from ...spec.sfc import ClassifierSpec

T = TypeVar("T")
#: a probe's address: IPv4, or IPv6 for a classifier of family ipv6
Address = IPv4Address | IPv6Address


def probe_packet(c: ClassifierSpec, src: Address, dst: Address,
                 sport: int | None = None, dport: int | None = None) -> tuple[bytes, int]:
    """An IP packet matching ``c`` (header included; IPv6 when ``dst`` is), and its IP
    protocol (IPv6: its next header); ``sport``, ``dport``: the ports, else the
    classifier's first ones."""
    proto = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "any": 17}[c.proto]
    sport = sport if sport is not None else c.sport[0] if c.sport else 40000
    dport = dport if dport is not None else c.dport[0] if c.dport else 33434
    payload = b"sfclab chain trace"
    if proto == 17:
        l4 = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    elif proto == 6:
        l4 = struct.pack(">HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 1024, 0, 0)
    elif proto == 58:  # an ICMPv6 echo request, its checksum over the pseudo-header
        l4 = struct.pack(">BBHHH", 128, 0, 0, 0x5fc, 1) + payload
        pseudo = src.packed + dst.packed + struct.pack(">IxxxB", len(l4), proto)
        return _ipv6(src, dst, proto, l4[:2] + struct.pack(">H", _csum(pseudo + l4)) + l4[4:]), \
            proto
    else:
        l4 = struct.pack(">BBHHH", 8, 0, 0, 0x5fc, 1) + payload
        l4 = l4[:2] + struct.pack(">H", _csum(l4)) + l4[4:]
    if dst.version == 6:
        pseudo = src.packed + dst.packed + struct.pack(">IxxxB", len(l4), proto)
        at = 16 if proto == 6 else 6
        l4 = l4[:at] + struct.pack(">H", _csum(pseudo + l4) or 0xffff) + l4[at + 2:]
        return _ipv6(src, dst, proto, l4), proto
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0x5fc1, 0, 64, proto, 0,
                      src.packed, dst.packed)
    hdr = hdr[:10] + struct.pack(">H", _csum(hdr)) + hdr[12:]
    if proto in (6, 17):
        pseudo = src.packed + dst.packed + struct.pack(">BBH", 0, proto, len(l4))
        at = 16 if proto == 6 else 6
        l4 = l4[:at] + struct.pack(">H", _csum(pseudo + l4) or 0xffff) + l4[at + 2:]
    return hdr + l4, proto


def _ipv6(src: Address, dst: Address, proto: int, l4: bytes) -> bytes:
    """``l4`` behind an IPv6 header (hop limit 64, no flow label)."""
    return struct.pack(">IHBB16s16s", 6 << 28, len(l4), proto, 64, src.packed, dst.packed) + l4


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def _send(netns_name: str, packet: bytes, dst: Address) -> None:
    with netns.entered(netns_name):
        s = socket.socket(socket.AF_INET6 if dst.version == 6 else socket.AF_INET,
                          socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        s.sendto(packet, (str(dst), 0))
    finally:
        s.close()


def trace_here(lab: str, plan: Any, sp: SteeringPlan, d: DirectionPlan,
               wanted: list[PathPlan], base: int, spec: ClassifierSpec, src: Address,
               dst: Address, wait: float) -> dict[str, Any]:
    """``trace`` of direction ``d``'s ``wanted`` paths in this machine's kernel: a probe
    hashed onto each path (:func:`probe_ports` against the live slot table), then the label
    traceroute of :mod:`sfclab.live.ops.chains`."""
    with DataPlane(lab) as dp:
        raw = dp.maps["sfc_chains"].lookup(struct.pack("<I", d.index))
        assert raw is not None
        _, sym, slots = decode_chain(raw)
        ports = probe_ports(spec, src, dst, sym,
                            slots, {base + p.index for p in wanted})
        out = []
        for p in wanted:
            got = ports.get(base + p.index)
            if got is None:
                out.append({"path": p.index, "nodes": p.nodes, "instances": p.instances,
                            "probe": None, "hops": [], "delivered": False, "in_order": False,
                            "took_path": False, "instances_seen": [],
                            "note": "no probe matching the classifier hashes onto this path "
                                    "(it holds no slot now, or the classifier fixes every "
                                    "hashed field)"})
                continue
            packet, _ = probe_packet(spec, src, dst, *got)
            out.append(_trace_path(dp, plan, sp, d, p, base + p.index, packet,
                                   dst, wait) |
                       {"probe": {"sport": got[0], "dport": got[1]}})
    traced = [x for x in out if x["probe"] is not None]
    return {"lab": lab, "chain": d.chain, "ingress": d.ingress, "egress": d.egress,
            "paths": out, "delivered": bool(traced) and all(x["delivered"] for x in traced),
            "in_order": bool(traced) and all(x["in_order"] and x["took_path"]
                                             for x in traced)}


def probe_ports(spec: ClassifierSpec, src: Address, dst: Address, sym: int,
                slots: list[int], wanted: set[int], limit: int = 1 << 18
                ) -> dict[int, tuple[int, int]]:
    """Path-table index -> (source port, destination port) of a probe matching ``spec``
    whose flow hash (:mod:`sfclab.plan.flowhash`) picks a slot holding that path, for each
    of ``wanted`` found within ``limit`` tries (ports inside the classifier's ranges)."""
    proto = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "any": 17}[spec.proto]
    s_lo, s_hi = spec.sport if spec.sport else (40000, 65535)
    d_lo, d_hi = spec.dport if spec.dport else (33434, 33434)
    found: dict[int, tuple[int, int]] = {}
    tries = 0
    for dport in range(d_lo, d_hi + 1):
        for sport in range(s_lo, s_hi + 1):
            hs, hd = (sport, dport) if proto not in (1, 58) else (0, 0)
            pi = slots[flowhash.slot_of(len(slots), flowhash.flow_hash(src, dst, hs, hd, proto,
                                                                       sym))] if slots else -1
            if pi in wanted and pi not in found:
                found[pi] = (sport, dport)
                if len(found) == len(wanted):
                    return found
            tries += 1
            if tries >= limit or proto in (1, 58):
                return found
    return found


def _until(wait: float, look: Callable[[], T]) -> T:
    """``look()`` as soon as it is true, else its last value after ``wait`` seconds: a probe
    is answered at once on an idle machine and may take a while on a loaded one."""
    deadline = time.monotonic() + wait
    while True:
        got = look()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(0.002)


def hop_row(ttl: int, h: Any, seen: list[str]) -> dict[str, Any]:
    """One step of a traceroute: the TTL ``ttl`` given, the hop ``h`` (a
    :class:`~sfclab.plan.sfc.Hop`) where it should expire, the nodes that counted it."""
    return {"hop": ttl, "label": h.label, "action": h.action, "expected": h.node,
            "seen_at": seen[0] if seen else None}


def _trace_path(dp: DataPlane, plan: Any, sp: SteeringPlan, d: DirectionPlan, path: PathPlan,
                index: int, packet: bytes, dst: Address, wait: float) -> dict[str, Any]:
    """Label traceroute of one path with a probe that hashes onto it."""
    ns = plan.netns_of(d.ingress)
    hops_by_label = {h.label: h for h in sp.hops}
    counter = encap_of(d.encap).ttl_counter
    hops: list[dict[str, Any]] = []
    raw = dp.maps["sfc_paths"].lookup(struct.pack("<I", index))
    assert raw is not None
    first, dmac = decode_path(raw)
    try:
        for ttl, at in trace_steps(d.encap, path.stack,
                                   {lbl: hops_by_label[lbl].node for lbl in path.stack}):
            dp.maps["sfc_paths"].update(struct.pack("<I", index),
                                        encode_path(path.stack, ttl, first, dmac, path.pad,
                                                    d.encap, index))
            before = {n: dp.counters(i)[counter] for n, i in sp.node_ids.items()}
            _send(ns, packet, dst)
            seen = _until(wait, lambda: [n for n, i in sp.node_ids.items()
                                         if dp.counters(i)[counter] > before[n]])
            hops.append(hop_row(ttl, hops_by_label[path.stack[at]], seen))
    finally:
        dp.maps["sfc_paths"].update(struct.pack("<I", index),
                                    encode_path(path.stack, d.ttl, first, dmac, path.pad,
                                                d.encap, index))
    last = hops_by_label[path.stack[-1]].node
    before_d = dp.counters(sp.node_ids[last])["delivered"]
    before_p = dp.path_count(index)
    _send(ns, packet, dst)
    delivered = bool(_until(wait, lambda: dp.counters(sp.node_ids[last])["delivered"] > before_d))
    return {"path": path.index, "nodes": path.nodes, "instances": path.instances,
            "hops": hops, "delivered": delivered,
            "took_path": dp.path_count(index) > before_p,
            "instances_seen": [h["seen_at"] for h in hops if h["action"] == "proxy"],
            "in_order": all(h["seen_at"] == h["expected"] for h in hops)}


