"""The controller of labs on Kubernetes (the ``sfclab-controller`` Deployment of
``deploy/kubernetes/50-deployment-controller.yaml``): it allocates each lab written to the
cluster and keeps what the cluster says of each lab true, whoever wrote it and whatever stopped
half-way.

``up --kube`` writes a lab as the Lab (the lab file's lab-wide keys), then one part per host
(that host's share of the lab file), nothing allocated; the controller allocates it; the
Nodes' agents build the parts; ``down --kube`` sets the parts ``Removing``, waits for their
agents, then deletes the parts and the Lab.  Either command may be killed at any point
(``kill -9``), and a Lab may be deleted by hand (``kubectl delete``); the controller holds no
state of its own (it reads everything from the API server, following the Labs, parts, requests
and Leases: :func:`.kubernetes_watch.follow`), so it may be killed and started again at any
point too.  Each pass (on every change, and every :data:`TICK_SECONDS`) decides from what it
reads (:func:`decide`, pure) and acts:

- **a whole Lab not allocated yet** (as many parts as its ``hostCount``, no ``placement`` in
  its status) is allocated (:meth:`Controller.allocate`, :func:`allocation`, pure): its hosts
  placed on the schedulable Nodes (:func:`place_lab`: sfclab's first fit, largest first, each
  Node's ``status.allocatable`` less what every lab's placed parts reserve), the lab planned as
  ``up`` plans it with each host at its Node's ``InternalIP`` (:func:`part_plans`: VNIs, tunnel
  ends and addresses chosen once) and split per host; then each part's Node and plan written,
  one update of the part each (only where it differs), and the Lab's status last (each host's
  Node and address, each tunnel's VNI, the CPUs planned with, phase ``Pending``).  A lab that
  does not fit, or cannot be planned, is set ``Failed`` with the reason, nothing else written
  (``up --kube`` reports it and removes the lab).  A pass killed half-way is safe: the next one
  finds the Lab whole and not allocated, keeps the Nodes of the parts placed already and plans
  again; the plan is a function of the lab's objects, the placement, the Nodes' addresses and
  the CPUs, so it is the same one and the parts written already are left as they are (were
  anything different, a part would be written again: a new generation, which its agent
  rebuilds).  Labs begun by a pass that stopped go first, then the oldest;
- **a Lab whose writer stopped before it was whole** (fewer parts than its ``hostCount``
  :data:`GRACE_SECONDS` after it was created: ``up --kube`` killed between its first write and
  its last) is removed: its phase ``Removing`` with the reason, its parts ``Removing`` (their
  agents remove what they built of them), and once every part is ``Removed`` (or has no Node,
  or no Node that is there any more), the parts and the Lab deleted;
- **a Lab set ``Removing``** goes on being removed the same way (a controller killed meanwhile
  picks it up where it was);
- **every other allocated Lab's phase** is its parts' (:func:`lab_phase`): ``Failed`` when a
  part failed, ``Removing`` while ``down`` removes it, ``Degraded`` when the agent of a part's
  Node holds no live Lease, ``Up`` when every part is up at its generation, else ``Pending``;
- **a part whose Lab is gone** (deleted by hand, or the Lab of that name is another one: its
  owner reference names another uid) is removed the same way: ``Removing``, then deleted once
  ``Removed``;
- **requests left behind** (:mod:`.kubernetes_requests`: their caller died before it deleted
  them) are deleted: answered ones after :data:`ANSWERED_KEEP_SECONDS`, unanswered ones after
  :data:`UNANSWERED_KEEP_SECONDS`, and any whose lab is gone.

Every object it changes carries sfclab's labels (the writers' mark) and, for a part, its owner
reference; it deletes only parts so marked, and requests labelled with a lab.  It runs as
``python -m sfclab.realize.runtime.kubernetes_controller [--kubeconfig F] [--context C |
--in-cluster] [--grace S]`` with the controller's ServiceAccount (``21-rbac-controller.yaml``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from ipaddress import IPv4Address, IPv4Network
from threading import Event
from typing import TYPE_CHECKING, Any

from ...errors import ClusterRefused, ClusterUnreachable, SfclabError, SpecError
from ...plan.model import Plan
from ...plan.placement import Host, Need, NoRoom, fmt_bytes, place
from ...plan.split import SplitError, split
from .kubernetes import (IMPLICIT_HOST, LAB_LABEL, MANAGED, MAX_OBJECT, NAMESPACE, NODE_LABEL,
                         lab_file, labs_path, needs, parts_path, quantity)
from .kubernetes_api import Conflict, KubeApi, NotFound, resource_path
from .kubernetes_lease import lease_path
from .kubernetes_parts import phase as part_phase
from .kubernetes_requests import ANSWERED, requests_path
from .kubernetes_watch import Liveness, follow

#: how long a Lab may be without a phase before its writer is taken for dead (seconds)
GRACE_SECONDS = 30.0
#: how often a pass runs when nothing changes (seconds)
TICK_SECONDS = 2.0
#: how long an answered request is kept for its caller to read (seconds)
ANSWERED_KEEP_SECONDS = 60.0
#: how long an unanswered request is kept (seconds): beyond any call's time
UNANSWERED_KEEP_SECONDS = 900.0

if TYPE_CHECKING:
    from ...spec.lab import Lab


# --- allocation: placement, addresses, VNIs, each part's plan (pure) -------------------------
def node_addresses(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """Each Node's ``InternalIP`` (IPv4), where it has one: the VXLAN tunnels' ends."""
    out = {}
    for n in nodes:
        for a in (n.get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP" and ":" not in str(a.get("address", "")):
                out[n["metadata"]["name"]] = str(a["address"])
                break
    return out


def schedulable_nodes(nodes: list[dict[str, Any]], parts: list[dict[str, Any]]) -> list[Host]:
    """The cluster's schedulable Nodes as placement hosts: allocatable capacity, less what the
    parts already placed on each (``spec.node``) reserve."""
    hosts: dict[str, Host] = {}
    for n in nodes:
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        name = n["metadata"]["name"]
        alloc = (n.get("status") or {}).get("allocatable") or {}
        hosts[name] = Host(name, quantity(alloc.get("cpu", "0"), f"Node {name} cpu"),
                           int(quantity(alloc.get("memory", "0"), f"Node {name} memory")),
                           labels=dict(n["metadata"].get("labels") or {}))
    for p in parts:
        spec = p.get("spec") or {}
        h = hosts.get(spec.get("node") or "")
        if h is not None:
            h.used_cpu += float(spec.get("cpu") or 0)
            h.used_memory += int(spec.get("memory") or 0)
            h.functions.append(str(spec.get("lab")))
    return list(hosts.values())


def selected(lab: Lab, need: Need, nodes: list[Host]) -> Need:
    """``need`` (host ``need.instance`` of ``lab``) allowed only the Nodes whose labels match
    its ``node_selector`` (every key with its value), if it has one; :class:`SpecError` at the
    host's ``node_selector`` when no schedulable Node matches."""
    spec = lab.hosts.get(need.instance)
    want = spec.node_selector if spec is not None else None
    if not want:
        return need
    allowed = frozenset(n.name for n in nodes
                        if all(n.labels.get(k) == v for k, v in want.items()))
    if not allowed:
        words = ", ".join(f"{k}={v}" for k, v in want.items())
        raise lab.error_at(SpecError(f"no schedulable Kubernetes Node carries the labels {words}"
                                     f" ({len(nodes)} schedulable Nodes)"),
                           ("hosts", need.instance, "node_selector"))
    return replace(need, allowed=allowed)


def place_lab(lab: Lab, nodes: list[Host], pinned: dict[str, str] | None = None
              ) -> dict[str, str]:
    """Each host of ``lab`` -> its Node (first fit, largest first: :func:`place`), a Node
    each (a host's address is its Node's); the hosts in ``pinned`` keep the Node they have
    (their reservation is in ``nodes`` already).  :class:`SpecError` naming the host, its needs
    and the largest free Node when it does not fit, or the hosts that would share a Node."""
    pinned = pinned or {}
    want = [selected(lab, n, nodes) for n in needs(lab) if n.instance not in pinned]
    if want and not nodes:
        raise SpecError("no schedulable Kubernetes Node to place the lab on", file=lab.source)
    try:  # not beside a host of the lab placed already
        placement = place(want, [n for n in nodes if n.name not in pinned.values()])
    except NoRoom as e:
        big = e.largest
        among = " its node_selector allows" if e.need.allowed is not None else ""
        where = (f"the largest free Node{among} is {big.name} with {big.free_cpu:g} CPU and "
                 f"{fmt_bytes(big.free_memory)}") if big else f"no other Node{among} is free"
        raise SpecError(f"the lab does not fit the cluster's Nodes: host {e.need.instance} "
                        f"needs {e.need.cpu:g} CPU and {fmt_bytes(e.need.memory)}; {where}",
                        file=lab.source) from e
    out = {n.instance: pinned.get(n.instance) or placement[n.instance] for n in needs(lab)}
    by_node: dict[str, list[str]] = {}
    for h, node in out.items():
        by_node.setdefault(node, []).append(h)
    shared = next((hs for hs in by_node.values() if len(hs) > 1), None)
    if shared:  # a host's underlay address is its Node's: two hosts cannot share one
        raise SpecError(f"the lab does not fit the cluster's Nodes: hosts {' and '.join(shared)} "
                        f"would share Node {out[shared[0]]}, and each host needs a Node of its "
                        f"own (its address is the Node's); {len(out)} hosts, "
                        f"{len(nodes)} schedulable Nodes", file=lab.source)
    return out


def covering(addresses: list[IPv4Address]) -> IPv4Network:
    """The smallest subnet holding every one of ``addresses`` as a host, at most a /29 (the
    smallest underlay subnet a lab file takes)."""
    for prefix in range(29, 7, -1):
        net = IPv4Network(f"{addresses[0]}/{prefix}", strict=False)
        if all(a in net and a not in (net.network_address, net.broadcast_address)
               for a in addresses):
            return net
    raise SpecError(f"the Nodes' addresses {', '.join(map(str, addresses))} share no subnet")


def placed(lab: Lab, placement: dict[str, str], ips: dict[str, str]) -> Lab:
    """``lab`` with each host at its Node's address (a lab that names no host: one host,
    :data:`IMPLICIT_HOST`); its underlay subnet kept when it holds them all."""
    from ..kinds import load_lab_dict  # light start-up: only allocation plans

    raw = json.loads(json.dumps(lab.raw))
    hosts = raw.get("hosts") or {IMPLICIT_HOST: {}}
    for h, node in placement.items():
        if node not in ips:
            raise SpecError(f"Kubernetes Node {node} (host {h}'s) has no InternalIP address "
                            "to end the lab's tunnels at", file=lab.source)
        hosts[h] = {**(hosts.get(h) or {}), "address": ips[node]}
    raw["hosts"] = hosts
    addrs = [IPv4Address(ips[n]) for n in placement.values()]
    underlay = dict(raw.get("underlay") or {})
    subnet = underlay.get("subnet")
    if subnet is None or not all(a in IPv4Network(str(subnet), strict=False) for a in addrs):
        underlay["subnet"] = str(covering(addrs))
    raw["underlay"] = underlay
    return load_lab_dict(raw, lab.source)


def part_plans(lab: Lab, placement: dict[str, str], ips: dict[str, str],
               cpus: list[int] | None = None
               ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Plan]:
    """Each host's part of the lab's plan (as JSON), what was allocated lab-wide (the Lab's
    status: underlay addresses, tunnels' VNIs, the CPUs planned with), and the whole plan, its
    hosts the Nodes (none of them this machine's: not emulated).  A function of its arguments
    alone: planned again from the same ones, the same plan."""
    from ...kernel.cpus import online  # light start-up: only allocation plans
    from ...plan.build import build_plan

    cpus = list(cpus) if cpus else online()
    plan = build_plan(placed(lab, placement, ips), ovs_datapath="netdev", cpus=cpus)
    for h in plan.hosts:
        h.emulated = False
    try:
        parts = split(plan)
    except SplitError as e:
        raise SpecError(f"the lab cannot be split over Kubernetes Nodes: {e}",
                        file=lab.source) from e
    status = {"underlay": {"subnet": plan.underlay.subnet if plan.underlay else None,
                           "hosts": {h.name: h.address for h in plan.hosts}},
              "tunnels": [{"link": f"link{hl.link}", "vni": hl.vni} for hl in plan.host_links
                          if hl.vni is not None],
              "planCpus": cpus}
    return {h: p.to_dict() for h, p in parts.items()}, status, plan


def lab_of(lab_obj: dict[str, Any], parts: list[dict[str, Any]]) -> Lab:
    """The lab as its objects hold it (:func:`.kubernetes.lab_file`), validated as ``sfclab
    validate`` does; :class:`SpecError` when it is not a valid lab."""
    from ..kinds import load_lab_dict  # light start-up: only allocation plans

    return load_lab_dict(lab_file(lab_obj, parts), f"Lab {NAMESPACE}/{lab_obj['metadata']['name']}")


@dataclass
class Allocation:
    """What the controller allocates to a lab: each host's Node, each part's plan (JSON), the
    Lab's status (underlay addresses, VNIs), and the whole plan."""

    placement: dict[str, str]
    plans: dict[str, dict[str, Any]]
    status: dict[str, Any]
    plan: Plan


def allocation(lab_obj: dict[str, Any], mine: list[dict[str, Any]], nodes: list[dict[str, Any]],
               parts: list[dict[str, Any]], cpus: list[int] | None = None) -> Allocation:
    """The allocation of the lab of ``lab_obj`` and its parts ``mine`` (pure): its hosts placed
    on ``nodes`` less what ``parts`` (every lab's) reserve, those of its parts placed already
    (a pass killed half-way) kept where they are; planned and split.  :class:`SpecError` when
    it does not fit, cannot be planned or an object would be too large."""
    lab = lab_of(lab_obj, mine)
    pinned = {str(p["spec"]["host"]): str(p["spec"]["node"]) for p in mine
              if (p.get("spec") or {}).get("node")}
    placement = place_lab(lab, schedulable_nodes(nodes, parts), pinned)
    plans, status, plan = part_plans(lab, placement, node_addresses(nodes), cpus)
    for p in mine:
        size = len(json.dumps({**p, "spec": {**p["spec"], "plan": plans.get(p["spec"]["host"])}}))
        if size > MAX_OBJECT:
            raise SpecError(f"LabPart {p['metadata']['name']} with its plan would be {size} "
                            f"bytes, more than the {MAX_OBJECT} an object may have (etcd): "
                            f"spread the lab's nodes over more hosts", file=lab.source)
    if len(json.dumps(status)) > MAX_OBJECT:
        raise SpecError(f"Lab {lab.name}'s status (its tunnels' VNIs) would be more than the "
                        f"{MAX_OBJECT} bytes an object may have (etcd)", file=lab.source)
    return Allocation(placement, plans, status, plan)


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` alike as JSON the API server gave back (nulls in mappings dropped)."""
    def norm(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items() if v is not None}
        if isinstance(x, list):
            return [norm(v) for v in x]
        return x
    return bool(norm(json.loads(json.dumps(a))) == norm(json.loads(json.dumps(b))))


def allocated(lab: dict[str, Any]) -> bool:
    """Whether the controller allocated ``lab`` (its status says where its hosts went)."""
    return bool((lab.get("status") or {}).get("placement"))


def created(obj: dict[str, Any]) -> float:
    """When ``obj`` was created (seconds since the epoch; now if it does not say)."""
    text = (obj.get("metadata") or {}).get("creationTimestamp")
    if not text:
        return time.time()
    return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def managed(obj: dict[str, Any], lab: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LAB_LABEL) == lab and all(labels.get(k) == v for k, v in MANAGED.items())


def owner_uid(part: dict[str, Any]) -> str | None:
    refs = (part.get("metadata") or {}).get("ownerReferences") or []
    return next((r.get("uid") for r in refs if r.get("kind") == "Lab"), None)


def whole(lab: dict[str, Any], mine: list[dict[str, Any]]) -> bool:
    """Whether every part of ``lab`` is written: as many hosts as its ``hostCount``."""
    count = (lab.get("spec") or {}).get("hostCount")
    return isinstance(count, int) and len({(p.get("spec") or {}).get("host")
                                           for p in mine}) >= count


def lab_phase(parts: list[dict[str, Any]], dead: set[str]) -> tuple[str, str]:
    """A lab's phase from its parts (see the module) and why; ``dead``: the Nodes whose
    agent holds no live Lease."""
    phases = {p["metadata"]["name"]: part_phase(p) for p in parts}
    if not parts:
        return "Pending", "no part yet"
    failed = sorted(n for n, ph in phases.items() if ph == "Failed")
    if failed:
        return "Failed", f"failed: {', '.join(failed)}"
    if any(ph in ("Removing", "Removed") for ph in phases.values()):
        return "Removing", "its parts are being removed"
    lost = sorted(p["metadata"]["name"] for p in parts if p["spec"].get("node") in dead)
    if lost:
        return "Degraded", f"no live agent for: {', '.join(lost)}"
    if all(ph == "Up" for ph in phases.values()):
        return "Up", f"{len(parts)} parts up"
    return "Pending", ", ".join(f"{n} {ph}" for n, ph in sorted(phases.items()))


@dataclass
class Actions:
    """What one pass does: status patches, parts to set ``Removing``, objects to delete."""

    lab_status: dict[str, dict[str, Any]] = field(default_factory=dict)  # Lab -> status
    removing: list[str] = field(default_factory=list)  # parts
    delete_parts: list[str] = field(default_factory=list)
    delete_labs: list[str] = field(default_factory=list)
    delete_requests: list[str] = field(default_factory=list)
    #: Labs to allocate, in this order: those begun by a pass that stopped, then the oldest
    allocate: list[str] = field(default_factory=list)


def _removal(lab: str, parts: list[dict[str, Any]], known_nodes: set[str], out: Actions
             ) -> bool:
    """Remove ``parts`` (see the module); whether every one is gone or removed."""
    done = True
    for p in parts:
        ph = (p.get("status") or {}).get("phase")
        if ph == "Removed" or p["spec"].get("node") not in known_nodes:
            out.delete_parts.append(p["metadata"]["name"])
            continue
        done = False
        if ph != "Removing":
            out.removing.append(p["metadata"]["name"])
    return done


def decide(labs: list[dict[str, Any]], parts: list[dict[str, Any]],
           requests: list[dict[str, Any]], dead: set[str], known_nodes: set[str], now: float,
           grace: float = GRACE_SECONDS) -> Actions:
    """One pass (see the module), pure: the objects as read, the Nodes whose agent holds no
    live Lease (``dead``), the Nodes there are; what to do."""
    out = Actions()
    todo: list[tuple[bool, float, str]] = []
    by_lab: dict[str, list[dict[str, Any]]] = {}
    for p in parts:
        lab = ((p.get("metadata") or {}).get("labels") or {}).get(LAB_LABEL)
        if lab is not None and managed(p, lab) and p.get("spec", {}).get("lab") == lab:
            by_lab.setdefault(lab, []).append(p)
    uids = {}
    others = set()  # Labs of those names that are not sfclab's: their parts left alone
    for lab in labs:
        name, meta = lab["metadata"]["name"], lab["metadata"]
        if not managed(lab, name):
            others.add(name)
            continue
        uids[name] = meta.get("uid")
        mine = [p for p in by_lab.get(name, []) if owner_uid(p) == meta.get("uid")]
        status = lab.get("status") or {}
        done = allocated(lab)
        if status.get("phase") == "Removing" or \
                (not done and not whole(lab, mine) and now - created(lab) > grace):
            if status.get("phase") != "Removing":
                out.lab_status[name] = {"phase": "Removing", "message": (
                    "its writer (up --kube) stopped before the lab was whole: removed")}
            if _removal(name, mine, known_nodes, out):
                out.delete_labs.append(name)
            continue
        if not done:  # being written, refused (Failed: left for down), or to allocate
            if status.get("phase") != "Failed" and whole(lab, mine) and not any(
                    part_phase(p) in ("Removing", "Removed") for p in mine):
                started = any((p.get("spec") or {}).get("node") for p in mine)
                todo.append((not started, created(lab), name))
            continue
        ph, why = lab_phase(mine, dead)
        if (ph, why) != (status.get("phase"), status.get("message")):
            out.lab_status[name] = {"phase": ph, "message": why}
    for name, mine in by_lab.items():  # parts of no Lab, or of another Lab of that name
        if name in others:
            continue
        orphans = [p for p in mine if name not in uids or owner_uid(p) != uids[name]]
        _removal(name, orphans, known_nodes, out)
    for r in requests:
        meta, status = r.get("metadata") or {}, r.get("status") or {}
        lab = (meta.get("labels") or {}).get(LAB_LABEL)
        age = now - created(r)
        if lab is None or lab not in uids or \
                (status.get("phase") in ANSWERED and age > ANSWERED_KEEP_SECONDS) or \
                age > UNANSWERED_KEEP_SECONDS:
            out.delete_requests.append(meta["name"])
    out.allocate = [name for *_, name in sorted(todo)]
    return out


class Controller:
    """The controller (see the module), through ``api`` (its own credentials)."""

    def __init__(self, api: KubeApi, say: Any = None, grace: float = GRACE_SECONDS):
        self.api, self.grace = api, grace
        self.say = say or (lambda _m: None)
        self.changed = Event()
        self.leases = Liveness()
        self.lock = threading.Lock()

    def act(self, a: Actions) -> None:
        for name, status in a.lab_status.items():
            self.api.merge(labs_path(name, "status"), {"status": status})
            self.say(f"lab {name}: {status['phase']}: {status.get('message', '')}")
        for name in a.removing:
            self.api.merge(parts_path(name, "status"), {"status": {"phase": "Removing"}})
            self.say(f"part {name}: Removing (its lab is gone or was never whole)")
        for name in a.delete_parts:
            self.api.delete(parts_path(name))
            self.say(f"part {name}: deleted")
        for name in a.delete_labs:
            self.api.delete(labs_path(name))
            self.say(f"lab {name}: deleted")
        for name in a.delete_requests:
            self.api.delete(requests_path(name))

    def allocate(self, lab: dict[str, Any], parts: list[dict[str, Any]],
                 nodes: list[dict[str, Any]]) -> None:
        """Allocate ``lab`` (see the module): each part's Node and plan written (one update
        of the part each, only where it differs), then the Lab's status; ``Failed`` with the
        reason when it cannot be.  ``parts`` (every lab's) is kept up to date."""
        from ...kernel.cpus import online  # light start-up: only allocation plans

        name, uid = lab["metadata"]["name"], lab["metadata"].get("uid")
        mine = [p for p in parts if managed(p, name) and p["spec"].get("lab") == name and
                owner_uid(p) == uid]
        try:
            got = allocation(lab, mine, nodes, parts, online())
        except SfclabError as e:
            self.api.request("PATCH", labs_path(name, "status"), {
                "metadata": {"resourceVersion": lab["metadata"].get("resourceVersion")},
                "status": {"phase": "Failed", "message": str(e)[:1024]}},
                content_type="application/merge-patch+json")
            self.say(f"lab {name}: Failed: {e}")
            return
        for p in sorted(mine, key=lambda p: list(got.placement).index(p["spec"]["host"])):
            host, meta = str(p["spec"]["host"]), p["metadata"]
            node = got.placement[host]
            if p["spec"].get("node") == node and same(p["spec"].get("plan"), got.plans[host]) \
                    and (meta.get("labels") or {}).get(NODE_LABEL) == node:
                continue
            obj = {k: v for k, v in p.items() if k != "status"}
            obj["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}),
                                                  NODE_LABEL: node}}
            obj["spec"] = {**p["spec"], "node": node, "plan": got.plans[host]}
            new = self.api.request("PUT", parts_path(meta["name"]), obj)  # its resourceVersion
            parts[parts.index(p)] = new
            self.say(f"part {meta['name']}: placed on Node {node}, planned")
        self.api.request("PATCH", labs_path(name, "status"), {
            "metadata": {"resourceVersion": lab["metadata"].get("resourceVersion")},
            "status": {"phase": "Pending", "message": "allocated; its parts are being built",
                       **got.status, "placement": [{"host": h, "node": n}
                                                   for h, n in got.placement.items()]}},
            content_type="application/merge-patch+json")
        self.say(f"lab {name}: allocated: " +
                 ", ".join(f"{h} on {n}" for h, n in got.placement.items()))

    def one_pass(self) -> Actions:
        """Read everything, decide, act; what was done."""
        labs = self.api.items(labs_path())
        parts = self.api.items(parts_path())
        requests = self.api.items(requests_path())
        node_items = self.api.items(resource_path("v1", "nodes"))
        nodes = {n["metadata"]["name"] for n in node_items}
        with self.lock:
            if not self.leases.seen:  # before the Leases are followed: as they are now
                self.leases.listed(self.api.items(lease_path()))
            dead = {p["spec"].get("node") for p in parts} - \
                {n for n in self.leases.seen if self.leases.live(n)}
        a = decide(labs, parts, requests, dead, nodes, time.time(), self.grace)
        self.act(a)
        by_name = {lab["metadata"]["name"]: lab for lab in labs}
        for name in a.allocate:
            try:
                self.allocate(by_name[name], parts, node_items)
            except (Conflict, NotFound) as e:  # changed or gone meanwhile: the next pass
                self.say(f"lab {name}: not allocated yet ({e}); again at the next pass")
        return a

    def run(self, stop: Event) -> None:
        """Follow the Leases, and pass on every change of a Lab, part or request and every
        :data:`TICK_SECONDS`, until ``stop``."""
        def leases_listed(items: list[dict[str, Any]]) -> None:
            with self.lock:
                self.leases.listed(items)

        def lease_changed(kind: str, obj: dict[str, Any]) -> None:
            with self.lock:
                self.leases.saw(obj, deleted=kind == "DELETED")

        def poke(*_a: Any) -> None:
            self.changed.set()

        for path, on_list, on_change in ((lease_path(), leases_listed, lease_changed),
                                         (labs_path(), poke, poke), (parts_path(), poke, poke),
                                         (requests_path(), poke, poke)):
            threading.Thread(target=follow, daemon=True, args=(self.api, path, stop), kwargs={
                "on_list": on_list, "on_change": on_change, "say": self.say}).start()
        while not stop.is_set():
            self.changed.wait(TICK_SECONDS)
            self.changed.clear()
            try:
                self.one_pass()
            except (ClusterUnreachable, ClusterRefused) as e:
                self.say(f"pass failed, retrying: {e}")
                stop.wait(1.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m sfclab.realize.runtime.kubernetes_controller [--kubeconfig F] [--context C
    | --in-cluster] [--grace S]``: the controller until SIGTERM (exit 0), or 1 when the cluster
    refuses its first pass (one line on stderr)."""
    import argparse  # light start-up: only the controller's own process

    from .kubernetes_api import cluster_arguments, serve

    p = argparse.ArgumentParser(prog="python -m sfclab.realize.runtime.kubernetes_controller")
    cluster_arguments(p)
    p.add_argument("--grace", type=float, default=GRACE_SECONDS,
                   help="seconds a Lab may stay without a phase before its writer is taken "
                   f"for dead (default {GRACE_SECONDS:g})")
    a = p.parse_args(argv)

    def start(api: KubeApi, say: Any, stop: Event) -> None:
        c = Controller(api, say, a.grace)
        c.one_pass()  # the first refusal is the caller's error: exit 1
        c.say("reconciling")
        c.run(stop)

    return serve("controller", a, start)


if __name__ == "__main__":
    raise SystemExit(main())
