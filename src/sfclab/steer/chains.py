"""Chains on a running lab: list them, inspect their data plane, add classifier entries, trace.

Everything here works from the lab's saved plan (``plan.steering``) and its pinned maps, so it
needs neither the lab file nor the process that built the lab.

``trace`` is a label traceroute of every path (or one, ``path``) of each of a symmetric chain's
two directions (of another chain's first; or of one, ``direction``):
for each path it picks a probe matching the classifier whose flow hash lands on one of that
path's slots (the ports are searched inside the classifier's ranges with the data plane's own
hash, :mod:`sfclab.plan.flowhash`, against the live slot table); then for k = 1, 2, ... it gives
that path's stack a TTL of k, sends the probe from the ingress, and reads which node counted a
TTL expiry -- the node that processed the k-th label.  The hops it prints are therefore the hops
the data plane really took, in order; the last probe runs with the chain's own TTL and must be
delivered.  It briefly lowers that path's TTL, so run it on a quiet lab.
"""

from __future__ import annotations

import socket
import struct
import time
from ipaddress import IPv4Address
from typing import Any

from ..errors import LabError
from ..kernel import netns
from ..plan import flowhash
from ..plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ..realize import lifecycle, remote_sfc
from ..realize.dataplane import DataPlane, decode_chain, decode_path, encode_path, path_base
from ..realize.state import LabState
from ..spec import classifier_file
from ..spec.sfc import ClassifierSpec


def _steering(lab: str) -> tuple[Any, SteeringPlan]:
    _, plan = lifecycle.load_plan(lab)
    if plan.steering is None:
        raise LabError(f"lab '{lab}' has no chains")
    return plan, plan.steering


def _chain_dirs(sp: SteeringPlan, lab: str, chain: str) -> list[DirectionPlan]:
    dirs = [d for d in sp.directions if d.chain == chain]
    if not dirs:
        known = ", ".join(sorted({d.chain for d in sp.directions}))
        raise LabError(f"lab '{lab}' has no chain '{chain}' (chains: {known})")
    return dirs


def listing(lab: str) -> list[dict[str, Any]]:
    """One row per chain: its functions, ends, paths, classifier entries."""
    _, sp = _steering(lab)
    rows: dict[str, dict[str, Any]] = {}
    for d in sp.directions:
        r = rows.setdefault(d.chain, {"chain": d.chain, "directions": [], "paths": 0,
                                      "entries": 0, "symmetric": d.symmetric})
        r["directions"].append(f"{d.ingress} -> {d.egress}")
        r["paths"] += len(d.paths)
        r["entries"] += sum(len(c["entries"]) for c in d.classifiers)
        if not d.reverse:  # each stop: its instance, or a group's instances joined by '|'
            r["functions"] = ["|".join(sorted({p.instances[k] for p in d.paths}))
                              for k in range(len(d.paths[0].instances))]
    return list(rows.values())


def inspect(lab: str, chain: str | None = None) -> dict[str, Any]:
    """Classifiers, paths (nodes, label stacks, packets classified onto each), the labels with
    their owners, and per-node counters with each instance's share of the chain's flows."""
    _, sp = _steering(lab)
    names = [chain] if chain else sorted({d.chain for d in sp.directions})
    hops = {h.label: h for h in sp.hops}
    out: dict[str, Any] = {"lab": lab, "chains": {}}
    with _dataplane(lab, sp) as dp:
        counters = {n: dp.counters(i) for n, i in sp.node_ids.items()}
        for name in names:
            dirs = _chain_dirs(sp, lab, name)
            c: dict[str, Any] = {"directions": []}
            nodes: set[str] = set()
            for d in dirs:
                base = path_base(sp, d.index)
                paths: list[dict[str, Any]] = []
                for p in d.paths:
                    nodes.update(p.nodes)
                    paths.append({"index": p.index, "nodes": p.nodes, "instances": p.instances,
                                  "weight": p.weight, "stack": p.stack,
                                  "labels": [{"label": lbl, "node": hops[lbl].node,
                                              "action": hops[lbl].action,
                                              "next": hops[lbl].next} for lbl in p.stack],
                                  "classified": dp.path_count(base + p.index)})
                total = sum(x["classified"] for x in paths) or 1
                for x in paths:
                    x["share"] = round(x["classified"] / total, 4)
                c["directions"].append({"ingress": d.ingress, "egress": d.egress,
                                        "reverse": d.reverse, "ttl": d.ttl,
                                        "classifiers": [{k: v for k, v in x.items()
                                                         if k != "entries"} |
                                                        {"entries": len(x["entries"])}
                                                        for x in d.classifiers],
                                        "paths": paths})
            inst = {i for d in dirs for p in d.paths for i in p.instances}
            seen = sum(counters[i]["proxy_in"] for i in inst) or 1
            c["instances"] = {i: {"proxy_in": counters[i]["proxy_in"],
                                  "share": round(counters[i]["proxy_in"] / seen, 4)}
                              for i in sorted(inst)}
            c["nodes"] = {n: counters[n] for n in sorted(nodes, key=list(sp.node_ids).index)}
            c.update(_added_and_health(lab, name, inst))
            out["chains"][name] = c
    return out


def _dataplane(lab: str, sp: SteeringPlan) -> DataPlane | remote_sfc.Snapshot:
    """The lab's maps here, or (hosts driven over SSH) every host's share read through its
    agent."""
    state = LabState(lab)
    return remote_sfc.Snapshot(state, sp.node_ids) if remote_sfc.is_remote(state) \
        else DataPlane(lab)


def _added_and_health(lab: str, chain: str, instances: set[str]) -> dict[str, Any]:
    """What ``chain add``, ``chain classify`` and the watcher know of ``chain``."""
    from . import health, record  # light start-up: only inspect reads them

    state = LabState(lab)
    got = record.load_addition(state, chain)
    saved = record.saved_classifiers(state, chain)
    return {"added": ({"attach": got[0].attach, "status": got[1],
                       "instances": {n.node: {"function": n.function, "kind": n.kind,
                                              "host": n.host, "cpu": n.cpu,
                                              "memory": n.memory} for n in got[0].nodes}}
                      if got else None),
            "classified_later": [{"source": s["source"], "classifiers": s["classifiers"],
                                  "entries": s["entries"]} for s in saved],
            # a lab-file chain's functions ``chain migrate`` moved: node -> the clone there now
            "moved": record.moves(state).get(chain, (None, {}))[1],
            "health": health.status(lab, chain, instances)}


# ------------------------------------------------------------------------------ classify
def read_classifiers(path: str) -> list[ClassifierSpec]:
    """A YAML or JSON file holding a list of classifiers (the lab file's form), validated
    (:mod:`sfclab.spec.classifier_file`; bad input: a located SpecError)."""
    return [r.spec() for r in classifier_file.read(path)]


# --------------------------------------------------------------------------------- trace
def _probe(c: ClassifierSpec, src: IPv4Address, dst: IPv4Address, sport: int | None = None,
           dport: int | None = None) -> tuple[bytes, int]:
    """An IPv4 packet matching ``c`` (header included), and its IP protocol; ``sport``,
    ``dport``: the ports, else the classifier's first ones."""
    proto = {"tcp": 6, "udp": 17, "icmp": 1, "any": 17}[c.proto]
    sport = sport if sport is not None else c.sport[0] if c.sport else 40000
    dport = dport if dport is not None else c.dport[0] if c.dport else 33434
    payload = b"sfclab chain trace"
    if proto == 17:
        l4 = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    elif proto == 6:
        l4 = struct.pack(">HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 1024, 0, 0)
    else:
        l4 = struct.pack(">BBHHH", 8, 0, 0, 0x5fc, 1) + payload
        l4 = l4[:2] + struct.pack(">H", _csum(l4)) + l4[4:]
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0x5fc1, 0, 64, proto, 0,
                      src.packed, dst.packed)
    hdr = hdr[:10] + struct.pack(">H", _csum(hdr)) + hdr[12:]
    if proto in (6, 17):
        pseudo = src.packed + dst.packed + struct.pack(">BBH", 0, proto, len(l4))
        at = 16 if proto == 6 else 6
        l4 = l4[:at] + struct.pack(">H", _csum(pseudo + l4) or 0xffff) + l4[at + 2:]
    return hdr + l4, proto


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def _send(netns_name: str, packet: bytes, dst: IPv4Address) -> None:
    with netns.entered(netns_name):
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        s.sendto(packet, (str(dst), 0))
    finally:
        s.close()


def trace(lab: str, chain: str, path: int | None = None, wait: float = 0.05,
          direction: int | None = None) -> dict[str, Any]:
    """Trace every path (or only ``path``) of each direction of the chain -- a symmetric
    chain's forward and reverse, else its first -- or only of ``direction`` (numbered from 0
    as ``chain inspect`` lists them): one probe per path, its ports chosen so the direction's
    classifier hash lands on a slot of that path (:func:`probe_ports`), then the label
    traceroute of the module's docstring.  Every path in ``paths`` names its ``direction``;
    ``directions`` sums each one up."""
    plan, sp = _steering(lab)
    dirs = _chain_dirs(sp, lab, chain)
    if direction is not None and not 0 <= direction < len(dirs):
        raise LabError(f"chain '{chain}' has directions 0 to {len(dirs) - 1}, no direction "
                       f"{direction}")
    picked = [direction] if direction is not None else \
        list(range(len(dirs))) if dirs[0].symmetric else [0]
    done = [(k, dirs[k], _trace_direction(lab, plan, sp, chain, dirs[k], path, wait))
            for k in picked]
    paths = [p | {"direction": k, "reverse": d.reverse} for k, d, t in done
             for p in t["paths"]]
    return {"lab": lab, "chain": chain, "ingress": dirs[picked[0]].ingress,
            "egress": dirs[picked[0]].egress,
            "directions": [{"direction": k, "reverse": d.reverse, "ingress": d.ingress,
                            "egress": d.egress, "delivered": t["delivered"],
                            "in_order": t["in_order"]} for k, d, t in done],
            "paths": paths, "delivered": all(t["delivered"] for _, _, t in done),
            "in_order": all(t["in_order"] for _, _, t in done)}


def _trace_direction(lab: str, plan: Any, sp: SteeringPlan, chain: str, d: DirectionPlan,
                     path: int | None, wait: float) -> dict[str, Any]:
    """:func:`trace` of one direction ``d``."""
    cl = d.classifiers[0] if d.classifiers else None
    if cl is None:
        raise LabError(f"chain '{chain}' has no classifier at {d.ingress} to trace with")
    if path is not None and not 0 <= path < len(d.paths):
        raise LabError(f"chain '{chain}' has paths 0 to {len(d.paths) - 1}, no path {path}")
    spec = ClassifierSpec.model_validate({k: v for k, v in cl.items()
                                          if k not in ("index", "entries")})
    src = spec.src.network_address + (1 if spec.src.num_addresses > 1 else 0) if spec.src \
        else plan.address_of(d.ingress)
    dst = spec.dst.network_address + (1 if spec.dst.num_addresses > 1 else 0) if spec.dst \
        else plan.address_of(d.egress)
    wanted = [d.paths[path]] if path is not None else list(d.paths)
    base = path_base(sp, d.index)
    state = LabState(lab)
    if remote_sfc.is_remote(state):  # hosts driven over SSH: each path's default probe
        return _trace_remote_paths(state, plan, sp, d, wanted, base, spec, IPv4Address(src),
                                   IPv4Address(dst), wait)
    with DataPlane(lab) as dp:
        raw = dp.maps["sfc_chains"].lookup(struct.pack("<I", d.index))
        assert raw is not None
        _, sym, slots = decode_chain(raw)
        ports = probe_ports(spec, IPv4Address(src), IPv4Address(dst), sym,
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
            packet, _ = _probe(spec, IPv4Address(src), IPv4Address(dst), *got)
            out.append(_trace_path(dp, plan, sp, d, p, base + p.index, packet,
                                   IPv4Address(dst), wait) |
                       {"probe": {"sport": got[0], "dport": got[1]}})
    traced = [x for x in out if x["probe"] is not None]
    return {"lab": lab, "chain": chain, "ingress": d.ingress, "egress": d.egress,
            "paths": out, "delivered": bool(traced) and all(x["delivered"] for x in traced),
            "in_order": bool(traced) and all(x["in_order"] and x["took_path"]
                                             for x in traced)}


def probe_ports(spec: ClassifierSpec, src: IPv4Address, dst: IPv4Address, sym: int,
                slots: list[int], wanted: set[int], limit: int = 1 << 18
                ) -> dict[int, tuple[int, int]]:
    """Path-table index -> (source port, destination port) of a probe matching ``spec``
    whose flow hash (:mod:`sfclab.plan.flowhash`) picks a slot holding that path, for each
    of ``wanted`` found within ``limit`` tries (ports inside the classifier's ranges)."""
    proto = {"tcp": 6, "udp": 17, "icmp": 1, "any": 17}[spec.proto]
    s_lo, s_hi = spec.sport if spec.sport else (40000, 65535)
    d_lo, d_hi = spec.dport if spec.dport else (33434, 33434)
    found: dict[int, tuple[int, int]] = {}
    tries = 0
    for dport in range(d_lo, d_hi + 1):
        for sport in range(s_lo, s_hi + 1):
            hs, hd = (sport, dport) if proto != 1 else (0, 0)
            pi = slots[flowhash.slot_of(len(slots), flowhash.flow_hash(src, dst, hs, hd, proto,
                                                                       sym))] if slots else -1
            if pi in wanted and pi not in found:
                found[pi] = (sport, dport)
                if len(found) == len(wanted):
                    return found
            tries += 1
            if tries >= limit or proto == 1:
                return found
    return found


def _trace_path(dp: DataPlane, plan: Any, sp: SteeringPlan, d: DirectionPlan, path: PathPlan,
                index: int, packet: bytes, dst: IPv4Address, wait: float) -> dict[str, Any]:
    """Label traceroute of one path with a probe that hashes onto it."""
    ns = plan.netns_of(d.ingress)
    hops_by_label = {h.label: h for h in sp.hops}
    hops: list[dict[str, Any]] = []
    raw = dp.maps["sfc_paths"].lookup(struct.pack("<I", index))
    assert raw is not None
    first, dmac = decode_path(raw)
    try:
        for k in range(1, len(path.stack) + 1):
            dp.maps["sfc_paths"].update(struct.pack("<I", index),
                                        encode_path(path.stack, k, first, dmac))
            before = {n: dp.counters(i)["ttl_expired"] for n, i in sp.node_ids.items()}
            _send(ns, packet, dst)
            time.sleep(wait)
            after = {n: dp.counters(i)["ttl_expired"] for n, i in sp.node_ids.items()}
            seen = [n for n in sp.node_ids if after[n] > before[n]]
            h = hops_by_label[path.stack[k - 1]]
            hops.append({"hop": k, "label": h.label, "action": h.action,
                         "expected": h.node, "seen_at": seen[0] if seen else None})
    finally:
        dp.maps["sfc_paths"].update(struct.pack("<I", index),
                                    encode_path(path.stack, d.ttl, first, dmac))
    last = hops_by_label[path.stack[-1]].node
    before_d = dp.counters(sp.node_ids[last])["delivered"]
    before_p = dp.path_count(index)
    _send(ns, packet, dst)
    time.sleep(wait)
    delivered = dp.counters(sp.node_ids[last])["delivered"] > before_d
    return {"path": path.index, "nodes": path.nodes, "instances": path.instances,
            "hops": hops, "delivered": delivered,
            "took_path": dp.path_count(index) > before_p,
            "instances_seen": [h["seen_at"] for h in hops if h["action"] == "proxy"],
            "in_order": all(h["seen_at"] == h["expected"] for h in hops)}


PROBE_TRIES = 3  # over SSH: tries of a step whose probe no host counted


def _trace_remote(state: LabState, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                  path: PathPlan, index: int, packet: bytes, dst: IPv4Address, wait: float
                  ) -> tuple[list[dict[str, Any]], bool]:
    """``trace`` on hosts driven over SSH: each step's probe sent by the ingress's host's
    agent (which sets and puts back the path's TTL), the TTL expiries read on every host."""
    hops_by_label = {h.label: h for h in sp.hops}

    def expired() -> dict[str, int]:
        snap = remote_sfc.Snapshot(state, sp.node_ids)
        return {n: snap.counters(i)["ttl_expired"] for n, i in sp.node_ids.items()}

    def step(ttl: int) -> None:
        remote_sfc.probe(state, plan, {"index": index, "stack": path.stack, "ttl": ttl,
                                       "restore": d.ttl, "node": d.ingress,
                                       "packet": packet.hex(), "dst": str(dst),
                                       "wait": wait})

    hops: list[dict[str, Any]] = []
    before = expired()
    for k in range(1, len(path.stack) + 1):
        for _ in range(PROBE_TRIES):  # a probe lost on a loaded host is sent again
            step(k)
            after = expired()
            seen = [n for n in sp.node_ids if after[n] > before[n]]
            if seen:
                break
        h = hops_by_label[path.stack[k - 1]]
        hops.append({"hop": k, "label": h.label, "action": h.action, "expected": h.node,
                     "seen_at": seen[0] if seen else None})
        before = after
    last = hops_by_label[path.stack[-1]].node
    snap = remote_sfc.Snapshot(state, sp.node_ids)
    was = snap.counters(sp.node_ids[last])["delivered"]
    step(d.ttl)
    snap = remote_sfc.Snapshot(state, sp.node_ids)
    return hops, snap.counters(sp.node_ids[last])["delivered"] > was


def _trace_remote_paths(state: LabState, plan: Any, sp: SteeringPlan, d: DirectionPlan,
                        wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                        src: IPv4Address, dst: IPv4Address, wait: float) -> dict[str, Any]:
    """``trace`` over SSH: the slot table lives on the ingress's host, so probes are not
    hashed onto paths; each wanted path is traced by the label traceroute with the default
    probe (its TTL steps set in that path's own entry), which shows the path's hops."""
    packet, _ = _probe(spec, src, dst)
    probe = {"sport": spec.sport[0] if spec.sport else 40000,
             "dport": spec.dport[0] if spec.dport else 33434}
    out = []
    for p in wanted:
        hops, delivered = _trace_remote(state, plan, sp, d, p, base + p.index, packet, dst,
                                        wait)
        out.append({"path": p.index, "nodes": p.nodes, "instances": p.instances,
                    "probe": probe, "hops": hops, "delivered": delivered,
                    "took_path": None,  # not read over SSH: the path's entry was set directly
                    "instances_seen": [h["seen_at"] for h in hops if h["action"] == "proxy"],
                    "in_order": all(h["seen_at"] == h["expected"] for h in hops)})
    return {"lab": state.name, "chain": d.chain, "ingress": d.ingress, "egress": d.egress,
            "paths": out, "delivered": bool(out) and all(x["delivered"] for x in out),
            "in_order": bool(out) and all(x["in_order"] for x in out)}
