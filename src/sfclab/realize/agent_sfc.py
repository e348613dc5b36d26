"""The agent's verbs for a host's share of a lab's SFC data plane (:mod:`sfclab.plan.sfc_hosts`).

Run on a host driven over SSH, like every agent verb (:mod:`sfclab.realize.agent`), against
the share that host's ``up`` built (its maps in its sub-directory of the lab's bpffs
directory):

- ``sfc-read`` ``{"lab": L}``: the counters of the chain nodes placed here and the packet
  counts of the paths whose ingress is here (by the lab's path index).
- ``sfc-classify`` ``{"lab": L, "rows": {DIRECTION: [ROW, ...]}, "order": N}``: classifier
  entries (:mod:`sfclab.plan.classifier_rows` rows) added for ingress nodes placed here.
- ``sfc-probe`` ``{"lab": L, "index": I, "stack": [...], "ttl": K, "restore": T, "node": N,
  "packet": HEX, "dst": A, "wait": S, "pad": P}``: one step of ``chain trace``: path ``I``'s
  stack (and its ``P`` padding entries) given TTL ``K``, the probe sent from ingress node
  ``N``, then after ``S`` seconds the TTL put back.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from ..errors import LabError
from ..kernel import netns
from ..plan.model import Plan
from ..plan.sfc import SteeringPlan
from ..plan.sfc_hosts import remote_host
from .dataplane import DataPlane, Undo, decode_path, encode_path, path_base, share_dir
from .state import LabState


def _share(lab: str) -> tuple[Plan, SteeringPlan, set[str], DataPlane]:
    d = LabState(lab).plan()
    if d is None:
        raise LabError(f"lab '{lab}' has no part on this host")
    plan = Plan.from_dict(d)
    host = remote_host(plan)
    sp = plan.steering
    if host is None or sp is None:
        raise LabError(f"lab '{lab}' has no share of a chain data plane on this host")
    local = {n for n in sp.node_ids if n in set(host.nodes)}
    return plan, sp, local, DataPlane(lab, share_dir(lab, host.name))


def read(req: dict[str, Any]) -> dict[str, Any]:
    _plan, sp, local, dp = _share(str(req["lab"]))
    with dp:
        counters = {n: dp.counters(i) for n, i in sp.node_ids.items() if n in local}
        paths = {}
        for d in sp.directions:
            if d.ingress in local:
                base = path_base(sp, d.index)
                for p in d.paths:
                    paths[str(base + p.index)] = dp.path_count(base + p.index)
    return {"counters": counters, "paths": paths}


def classify(req: dict[str, Any]) -> dict[str, Any]:
    _plan, sp, local, dp = _share(str(req["lab"]))
    written = 0
    todo = {int(d): [tuple(r) for r in rows] for d, rows in dict(req["rows"]).items()}
    if any(r[0] not in local for rows in todo.values() for r in rows):
        raise LabError("a classifier entry for an ingress node not placed on this host")
    undo = Undo()  # this host's share all or nothing
    with dp:
        try:
            for direction, here in todo.items():
                written += dp.add_rows(sp.node_ids, direction, here,
                                       int(req["order"]), undo=undo)
        except BaseException:
            dp.undo(undo)
            raise
    return {"entries": written}


def probe(req: dict[str, Any]) -> dict[str, Any]:
    plan, _sp, local, dp = _share(str(req["lab"]))
    node = str(req["node"])
    if node not in local:
        raise LabError(f"node {node} is not placed on this host")
    key = struct.pack("<I", int(req["index"]))
    stack = [int(x) for x in req["stack"]]
    pad = int(req.get("pad", 0))  # the path's padding entries, kept as the path has them
    encap = str(req.get("encap", "mpls"))  # how the path is written (an NSH chain's header)
    with dp:
        raw = dp.maps["sfc_paths"].lookup(key)
        if raw is None:
            raise LabError(f"path {req['index']} is not in this host's share")
        first, dmac = decode_path(raw)
        try:
            dp.maps["sfc_paths"].update(key, encode_path(stack, int(req["ttl"]), first, dmac,
                                                         pad, encap, int(req["index"])))
            with netns.entered(plan.netns_of(node)):
                s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            try:
                s.sendto(bytes.fromhex(str(req["packet"])), (str(req["dst"]), 0))
            finally:
                s.close()
            time.sleep(float(req.get("wait", 0.05)))
        finally:
            dp.maps["sfc_paths"].update(key, encode_path(stack, int(req["restore"]), first,
                                                         dmac, pad, encap, int(req["index"])))
    return {}


VERBS = {"sfc-read": read, "sfc-classify": classify, "sfc-probe": probe}
