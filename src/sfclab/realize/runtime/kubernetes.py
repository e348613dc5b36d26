"""A lab on a Kubernetes cluster: its resources, their placement on Nodes, written and removed.

**The objects** (their schemas: ``deploy/kubernetes/1*-crd-*.yaml``), all in namespace
:data:`NAMESPACE`:

- one ``Lab`` named as the lab: the lab file's lab-wide keys (hosts, underlay, tenants,
  addressing, mtu, chains, groups), its host count, and in its status each host's Node;
- one ``LabPart`` per host of the lab (``local`` for a lab that names no host), named
  ``LAB.HOST``: the lab file's nodes on that host and the links with an end there, the Node
  the host was placed on, and the host's CPUs and memory reserved there.

So no object grows with the whole lab: each grows with one host's share, and each is checked
against :data:`MAX_OBJECT` (below etcd's 1.5 MiB request limit) before anything is written.
Every object carries the labels :data:`MANAGED` and ``sfclab.dev/lab=LAB``, and each part an
owner reference to its Lab; :func:`down` removes a part only when its label, its ``spec.lab``
and its owner reference all name the lab (its mark checked where it is removed).

**Placement.**  Each host of the lab is one :class:`~sfclab.plan.placement.Need` (its file's
``cpus`` and ``memory``, 0 where it gives none) of "function" LAB, so the lab's hosts are
spread over Nodes when they can be; the Nodes are the cluster's schedulable ones, each with its
``status.allocatable`` CPU and memory less what the parts of every lab placed there already
reserve.  sfclab's own first-fit-decreasing policy (:func:`sfclab.plan.placement.place`)
decides; a lab that fits nowhere is refused before anything is written.

**Allocation.**  The controller side (``up --kube``) plans the lab as ``up`` does
(:func:`sfclab.plan.build.build_plan`), each host at its Node's ``InternalIP`` (the lab's
underlay subnet kept when it holds them all, else the smallest one that does), and splits the
plan per host (:func:`sfclab.plan.split.split`): each part's ``spec.plan`` is its host's share,
with the VXLAN VNIs, tunnel ends and addresses already chosen, so an agent builds its part from
its part alone.  The Lab's status keeps what was allocated lab-wide: each host's underlay
address and each tunnel's VNI.

**Writing** is all or nothing: every object is first sent as a server-side dry run (the API
server checks schema, admission and the caller's rights and stores nothing), then created;
if a create fails, the objects created before it are deleted again and the error raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipaddress import IPv4Address, IPv4Network

from ...errors import ClusterRefused, LabError, SpecError
from ...plan.model import Plan
from ...plan.placement import Host, Need, NoRoom, fmt_bytes, place
from ...plan.split import SplitError, split
from .kubernetes_api import KubeApi, NotFound, resource_path

if TYPE_CHECKING:
    from ...spec.lab import Lab

NAMESPACE = "sfclab-system"
GROUP_VERSION = "sfclab.dev/v1alpha1"
#: the labels every object sfclab writes carries
MANAGED = {"app.kubernetes.io/managed-by": "sfclab"}
LAB_LABEL = "sfclab.dev/lab"
NODE_LABEL = "sfclab.dev/node"
#: the largest object written (JSON bytes): etcd refuses a request over 1.5 MiB
MAX_OBJECT = 1 << 20
#: the name of the one host of a lab that names none
IMPLICIT_HOST = "local"
#: the lab file's keys kept in the Lab (the rest, nodes and links, go to the parts)
LAB_WIDE = ("hosts", "underlay", "tenants", "addressing", "mtu", "chains", "groups", "chain")

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
           "Ei": 1 << 60}


def quantity(text: Any, what: str) -> float:
    """A Kubernetes quantity (``2``, ``1500m``, ``4Gi``, ``512M``) as a number."""
    m = _QUANTITY.match(str(text)) if len(str(text)) <= 32 else None
    if m is None:
        raise ClusterRefused(f"{what}: {str(text)[:32]!r} is not a quantity sfclab reads")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def labs_path(name: str | None = None, sub: str | None = None) -> str:
    return resource_path(GROUP_VERSION, "labs", NAMESPACE, name, sub)


def parts_path(name: str | None = None, sub: str | None = None) -> str:
    return resource_path(GROUP_VERSION, "labparts", NAMESPACE, name, sub)


@dataclass
class Resources:
    """What ``up --kube`` writes for one lab: its ``Lab``, its parts, where each host went."""

    lab: dict[str, Any]
    parts: list[dict[str, Any]]
    placement: dict[str, str]  # host -> Node
    nodes: list[Host] = field(default_factory=list)  # the Nodes as placement saw them
    status: dict[str, Any] = field(default_factory=dict)  # the Lab's status: what was allocated
    plan: Plan | None = None  # the lab's whole plan as placed


def host_of(lab: Lab, node: str) -> str:
    return lab.nodes[node].host or IMPLICIT_HOST


def shares(lab: Lab) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each host's share of the lab file: its nodes (name -> keys) and the links with an end
    on it, in the file's order (a link across two hosts is in both)."""
    raw_nodes = lab.raw.get("nodes") or {}
    raw_links = lab.raw.get("links") or []
    hosts = list(lab.hosts) or [IMPLICIT_HOST]
    out: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {h: ({}, []) for h in hosts}
    for name in lab.nodes:
        out[host_of(lab, name)][0][name] = raw_nodes.get(name, {})
    for spec, raw in zip(lab.links, raw_links, strict=False):
        for h in dict.fromkeys(host_of(lab, e.node) for e in spec.endpoints):
            out[h][1].append(raw)
    return out


def node_addresses(api: KubeApi) -> dict[str, str]:
    """Each Node's ``InternalIP`` (IPv4), where it has one: the VXLAN tunnels' ends."""
    out = {}
    for n in api.items(resource_path("v1", "nodes")):
        for a in (n.get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP" and ":" not in str(a.get("address", "")):
                out[n["metadata"]["name"]] = str(a["address"])
                break
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
    from ..kinds import load_lab_dict  # light start-up: only up --kube plans

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


def part_plans(lab: Lab, placement: dict[str, str], ips: dict[str, str]
               ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Plan]:
    """Each host's part of the lab's plan (as JSON), what was allocated lab-wide (the Lab's
    status: underlay addresses, tunnels' VNIs), and the whole plan, its hosts the Nodes (none
    of them this machine's: not emulated)."""
    from ...kernel.cpus import online  # light start-up: only up --kube plans
    from ...plan.build import build_plan

    plan = build_plan(placed(lab, placement, ips), ovs_datapath="netdev", cpus=online())
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
                          if hl.vni is not None]}
    return {h: p.to_dict() for h, p in parts.items()}, status, plan


def schedulable_nodes(api: KubeApi) -> list[Host]:
    """The cluster's schedulable Nodes as placement hosts: allocatable capacity, less what the
    parts already placed on each reserve."""
    hosts: dict[str, Host] = {}
    for n in api.items(resource_path("v1", "nodes")):
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        name = n["metadata"]["name"]
        alloc = (n.get("status") or {}).get("allocatable") or {}
        hosts[name] = Host(name, quantity(alloc.get("cpu", "0"), f"Node {name} cpu"),
                           int(quantity(alloc.get("memory", "0"), f"Node {name} memory")))
    for p in api.items(parts_path()):
        spec = p.get("spec") or {}
        h = hosts.get(spec.get("node", ""))
        if h is not None:
            h.used_cpu += float(spec.get("cpu") or 0)
            h.used_memory += int(spec.get("memory") or 0)
            h.functions.append(str(spec.get("lab")))
    return list(hosts.values())


#: what Kubernetes takes as a part of an object's name (a DNS label, lower case)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: the longest lab name: it is also a label's value (63 characters at most)
MAX_LAB_NAME = 63


def check_names(lab: Lab) -> None:
    """The lab's name and its hosts' are names Kubernetes takes for its objects (``LAB`` and
    ``LAB.HOST``); :class:`SpecError` at the place in the file otherwise."""
    def bad(name: str, loc: tuple[str, ...], max_len: int) -> None:
        if not _DNS_LABEL.match(name) or len(name) > max_len:
            raise lab.error_at(SpecError(
                f"'{name}' is not a name Kubernetes takes for an object: lower-case letters, "
                f"digits and '-', starting and ending with a letter or digit, at most "
                f"{max_len} characters (with --kube)"), loc)

    bad(lab.name, ("name",), MAX_LAB_NAME)
    for h in lab.hosts:
        bad(h, ("hosts", h), 253 - len(lab.name) - 1)


def resources(lab: Lab, nodes: list[Host], ips: dict[str, str] | None = None) -> Resources:
    """The objects of ``lab`` placed on ``nodes`` (pure); :class:`SpecError` when a name is
    not one Kubernetes takes, the lab does not fit or an object would be too large.  With
    ``ips`` (each Node's address), each part carries its host's plan for its agent."""
    check_names(lab)
    share = shares(lab)
    needs = []
    for h in share:
        spec = lab.hosts.get(h)
        needs.append(Need(lab.name, h, float(spec.cpus or 0) if spec else 0.0,
                          int(spec.memory or 0) if spec else 0))
    if not nodes:
        raise SpecError("no schedulable Kubernetes Node to place the lab on", file=lab.source)
    try:
        placement = place(needs, nodes)
    except NoRoom as e:
        big = e.largest
        where = (f"the largest free Node is {big.name} with {big.free_cpu:g} CPU and "
                 f"{fmt_bytes(big.free_memory)}") if big else "there is no Node"
        raise SpecError(f"the lab does not fit the cluster's Nodes: host {e.need.instance} "
                        f"needs {e.need.cpu:g} CPU and {fmt_bytes(e.need.memory)}; {where}",
                        file=lab.source) from e
    labels = {**MANAGED, LAB_LABEL: lab.name}
    wide = {k: lab.raw[k] for k in LAB_WIDE if lab.raw.get(k) is not None}
    lab_obj: dict[str, Any] = {"apiVersion": GROUP_VERSION, "kind": "Lab",
               "metadata": {"name": lab.name, "namespace": NAMESPACE, "labels": labels},
               "spec": {"lab": lab.name, "hostCount": len(share), "file": wide}}
    plans, status, plan = part_plans(lab, placement, ips) if ips is not None else \
        ({}, {}, None)
    parts: list[dict[str, Any]] = []
    for need in needs:
        node_names, links = share[need.instance]
        parts.append({
            "apiVersion": GROUP_VERSION, "kind": "LabPart",
            "metadata": {"name": f"{lab.name}.{need.instance}", "namespace": NAMESPACE,
                         "labels": {**labels, NODE_LABEL: placement[need.instance]}},
            "spec": {"lab": lab.name, "host": need.instance, "node": placement[need.instance],
                     "cpu": need.cpu, "memory": need.memory, "nodes": node_names,
                     "links": links,
                     **({"plan": plans[need.instance]} if need.instance in plans else {})}})
    for obj in [lab_obj] + parts:
        size = len(json.dumps(obj))
        if size > MAX_OBJECT:
            raise SpecError(f"{obj['kind']} {obj['metadata']['name']} would be {size} bytes, "
                            f"more than the {MAX_OBJECT} an object may have (etcd): spread the "
                            f"lab's nodes over more hosts", file=lab.source)
    if len(json.dumps(status)) > MAX_OBJECT:
        raise SpecError(f"Lab {lab.name}'s status (its tunnels' VNIs) would be more than the "
                        f"{MAX_OBJECT} bytes an object may have (etcd)", file=lab.source)
    return Resources(lab_obj, parts, placement, nodes, status, plan)


def up(lab: Lab, api: KubeApi) -> Resources:
    """Write ``lab``'s resources (see the module): all of them, or none."""
    try:
        api.get(labs_path(lab.name))
        raise LabError(f"lab '{lab.name}' is already on the cluster {api.config.server}")
    except NotFound:
        pass
    check_names(lab)  # before the cluster is asked anything
    res = resources(lab, schedulable_nodes(api), node_addresses(api))
    objs = [(labs_path(), res.lab)] + [(parts_path(), p) for p in res.parts]
    for path, obj in objs:  # the API server checks all (rights, schema) before any is made
        api.create(path, obj, dry_run=True)
    made: list[str] = []
    try:
        uid = api.create(labs_path(), res.lab)["metadata"]["uid"]
        made.append(labs_path(lab.name))
        owner = {"apiVersion": GROUP_VERSION, "kind": "Lab", "name": lab.name, "uid": uid,
                 "blockOwnerDeletion": True}
        for p in res.parts:
            p["metadata"]["ownerReferences"] = [owner]
            api.create(parts_path(), p)
            made.append(parts_path(p["metadata"]["name"]))
        api.request("PATCH", labs_path(lab.name, "status"),
                    {"status": {"phase": "Pending", **res.status, "placement": [
                        {"host": h, "node": n} for h, n in res.placement.items()]}},
                    content_type="application/merge-patch+json")
    except BaseException:
        for path in reversed(made):
            api.delete(path)
        raise
    return res


def owned_part(part: dict[str, Any], lab: str, uid: str | None) -> bool:
    """``part`` carries ``lab``'s mark: its label, its ``spec.lab`` and (when the Lab is
    there) an owner reference to that Lab's uid."""
    meta = part.get("metadata") or {}
    if (meta.get("labels") or {}).get(LAB_LABEL) != lab or \
            (part.get("spec") or {}).get("lab") != lab:
        return False
    refs = meta.get("ownerReferences") or []
    return uid is None or any(r.get("kind") == "Lab" and r.get("uid") == uid for r in refs)


def down(name: str, api: KubeApi) -> dict[str, Any]:
    """Remove lab ``name``'s parts (each only with its mark) and then its Lab; what was
    removed.  :class:`LabError` when the cluster has no such lab and no part of it."""
    try:
        lab = api.get(labs_path(name))
        uid = lab["metadata"].get("uid")
        managed = (lab["metadata"].get("labels") or {}).get(LAB_LABEL) == name
    except NotFound:
        lab, uid, managed = None, None, False
    parts = [p for p in api.items(parts_path(), f"{LAB_LABEL}={name}") if owned_part(p, name, uid)]
    if lab is None and not parts:
        raise LabError(f"no lab '{name}' on the cluster {api.config.server}")
    if lab is not None and not managed:
        raise LabError(f"Lab {NAMESPACE}/{name} does not carry sfclab's mark "
                       f"({LAB_LABEL}={name}): left alone")
    removed = [p["metadata"]["name"] for p in parts if api.delete(parts_path(p["metadata"]["name"]))]
    if lab is not None:
        api.delete(labs_path(name))
    return {"name": name, "lab": lab is not None, "parts": removed}
