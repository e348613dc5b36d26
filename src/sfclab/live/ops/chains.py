"""Chains on a running lab: list them, inspect their data plane, add classifier entries, trace.

Everything here works from the lab's saved plan (``plan.steering``) and its pinned maps, so it
needs neither the lab file nor the process that built the lab.

``trace`` is a label traceroute of every path (or one, ``path``) of each of a symmetric chain's
two directions (of another chain's first; or of one, ``direction``):
for each path it picks a probe matching the classifier whose flow hash lands on one of that
path's slots (the ports are searched inside the classifier's ranges with the data plane's own
hash, :mod:`sfclab.plan.flowhash`, against the live slot table); then for k = 1, 2, ... it gives
that path's stack a TTL of k, sends the probe from the ingress, and reads which node counted a
TTL expiry -- the node that processed the k-th label (SRv6: the k-th SID, by its hop limit;
NSH: the k-th node, whose forwarder lowers the header's TTL once, and the NSH counter
``nsh_ttl_expired``: :func:`sfclab.plan.encap.trace_steps`).  The hops it prints are therefore
the hops the data plane really took, in order; the last probe runs with the chain's own TTL and
must be delivered.  It briefly lowers that path's TTL, so run it on a quiet lab.
"""

from __future__ import annotations

from ipaddress import ip_address
from typing import TYPE_CHECKING, Any

from ...errors import LabError
from ...plan.sfc import DirectionPlan, SteeringPlan
from ...realize import lifecycle
from ...realize.dataplane import path_base
from ...realize.runtime import runtime_for
from ...realize.runtime.base import Counters
from ...realize.state import LabState
from ..runtime.table import live_for

if TYPE_CHECKING:  # light start-up: chain ls and inspect load no file models
    from ...spec.sfc import ClassifierSpec


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
            c: dict[str, Any] = {"encap": dirs[0].encap if dirs else "mpls", "directions": []}
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
                                        "encap": d.encap,
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
            sfc_functions = _sfc_functions(lab, inst)
            if sfc_functions:
                c["functions"] = sfc_functions
            out["chains"][name] = c
    return out


def _sfc_functions(lab: str, instances: set[str]) -> dict[str, Any]:
    """Each of ``instances`` whose kind is an SFC-aware eBPF function (``bpf-firewall``): its
    own ``inspect`` (rules with their counters, policy, connection map).  Kernel functions
    are left out: their counters are ``sfclab inspect``'s."""
    from ... import functions
    from ...realize.functions import instantiate

    state, plan = lifecycle.load_plan(lab)
    return {node: instantiate(state, plan, node).inspect() for node in sorted(instances)
            if node in plan.functions and functions.get(plan.functions[node].kind).sfc_program}


def _dataplane(lab: str, sp: SteeringPlan) -> Counters:
    """The lab's maps here, or (hosts driven over SSH) every host's share read through its
    agent."""
    return runtime_for(LabState(lab)).data_plane(sp.node_ids)


def _added_and_health(lab: str, chain: str, instances: set[str]) -> dict[str, Any]:
    """What ``chain add``, ``chain classify`` and the watcher know of ``chain``."""
    from . import health
    from .. import record  # light start-up: only inspect reads them

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
    from ...spec import classifier_file

    return [r.spec() for r in classifier_file.read(path)]


# --------------------------------------------------------------------------------- trace
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
    from ...spec.sfc import ClassifierSpec  # light start-up (see the imports)

    spec = ClassifierSpec.model_validate({k: v for k, v in cl.items()
                                          if k not in ("index", "entries")})
    # the probe's family: the classifier's (IPv6 for ipv6; any and ipv4 probe with IPv4)
    fam = 6 if spec.family == "ipv6" else 4
    src = spec.src.network_address + (1 if spec.src.num_addresses > 1 else 0) if spec.src \
        else plan.address_of(d.ingress, fam)
    dst = spec.dst.network_address + (1 if spec.dst.num_addresses > 1 else 0) if spec.dst \
        else plan.address_of(d.egress, fam)
    wanted = [d.paths[path]] if path is not None else list(d.paths)
    base = path_base(sp, d.index)
    return live_for(LabState(lab)).trace_paths(plan, sp, d, wanted, base, spec,
                                               ip_address(src), ip_address(dst), wait)


