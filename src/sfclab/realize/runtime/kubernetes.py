"""A lab on a Kubernetes cluster: the objects ``up --kube`` writes, and their removal.

**The objects** (their schemas: ``deploy/kubernetes/1*-crd-*.yaml``), all in namespace
:data:`NAMESPACE`:

- one ``Lab`` named as the lab: the lab file's lab-wide keys (hosts, underlay, tenants,
  addressing, mtu, chains, groups) with the order of their mappings' keys (the API server keeps
  keys sorted), and its host count; in its status, once the controller allocated the lab,
  each host's Node and underlay address and each tunnel's VNI;
- one ``LabPart`` per host of the lab (``local`` for a lab that names no host), named
  ``LAB.HOST``: the lab file's nodes on that host and the links with an end there (each with
  its place in the file), and the host's CPUs and memory; the controller adds the Node it
  placed the host on and the host's part of the lab's plan.

So no object grows with the whole lab: each grows with one host's share, and each is checked
against :data:`MAX_OBJECT` (below etcd's 1.5 MiB request limit) before it is written.
Every object carries the labels :data:`MANAGED` and ``sfclab.dev/lab=LAB``, and each part an
owner reference to its Lab; :func:`down` removes a part only when its label, its ``spec.lab``
and its owner reference all name the lab (its mark checked where it is removed).

**Who decides what.**  ``up --kube`` (:func:`up`) writes the lab file, nothing allocated: the
controller (:mod:`.kubernetes_controller`) places the hosts on Nodes, plans the lab and writes
each part's plan and the Lab's status.  :func:`up` places the hosts first with the controller's
own function on the Nodes as it reads them, so a lab that cannot fit is refused at once with
nothing written; the controller's placement, made once the lab is written, is the one that
counts.  :func:`lab_file` is the lab file again from the objects as the API server keeps them:
what the controller plans (and ``up --kube`` plans again, the same, to keep the whole plan on
this machine).

**Writing** is all or nothing: every object is first sent as a server-side dry run (the API
server checks schema, admission and the caller's rights and stores nothing), then created,
the Lab first and its parts after it; if a create fails, the objects created before it are
deleted again and the error raised.  The last part written makes the lab whole (its part
count is the Lab's ``hostCount``): a Lab that stays short of it was left by a writer that
died, and the controller removes it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import ClusterRefused, LabError, SpecError
from ...plan.placement import Need
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
    """What ``up --kube`` writes for one lab: its ``Lab`` and its parts."""

    lab: dict[str, Any]
    parts: list[dict[str, Any]]
    #: host -> Node as ``up --kube`` placed the hosts before writing (the controller decides)
    placement: dict[str, str] = field(default_factory=dict)


def host_of(lab: Lab, node: str) -> str:
    return lab.nodes[node].host or IMPLICIT_HOST


def shares(lab: Lab) -> dict[str, tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]]:
    """Each host's share of the lab file: its nodes (name -> keys) and the links with an end
    on it, each with its index in the file, in the file's order (a link across two hosts is in
    both)."""
    raw_nodes = lab.raw.get("nodes") or {}
    raw_links = lab.raw.get("links") or []
    hosts = list(lab.hosts) or [IMPLICIT_HOST]
    out: dict[str, tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]] = \
        {h: ({}, []) for h in hosts}
    for name in lab.nodes:
        out[host_of(lab, name)][0][name] = raw_nodes.get(name, {})
    for i, (spec, raw) in enumerate(zip(lab.links, raw_links, strict=False)):
        for h in dict.fromkeys(host_of(lab, e.node) for e in spec.endpoints):
            out[h][1].append((i, raw))
    return out


def lab_file(lab_obj: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The lab file ``up --kube`` wrote, from its objects as the API server keeps them: the
    Lab's lab-wide keys and each part's nodes and links, the file's order restored from their
    ``order`` (the server keeps a mapping's keys sorted), a link across hosts once."""
    spec = lab_obj.get("spec") or {}
    raw: dict[str, Any] = {"name": spec.get("lab") or lab_obj["metadata"]["name"]}
    order = spec.get("order") or {}
    for k, v in (spec.get("file") or {}).items():
        if isinstance(v, dict) and isinstance(order.get(k), list):
            v = {**{x: v[x] for x in order[k] if x in v}, **v}
        raw[k] = v
    nodes: list[tuple[int, str, Any]] = []
    links: dict[int, Any] = {}
    for p in parts:
        ps = p.get("spec") or {}
        where = ps.get("order") or {}
        at = where.get("nodes") or {}
        nodes += [(int(at.get(n, 1 << 30)), n, keys) for n, keys in (ps.get("nodes") or
                                                                      {}).items()]
        for i, link in zip(where.get("links") or [], ps.get("links") or [], strict=False):
            links.setdefault(int(i), link)
    raw["nodes"] = {n: keys for _, n, keys in sorted(nodes, key=lambda x: (x[0], x[1]))}
    if links:
        raw["links"] = [links[i] for i in sorted(links)]
    return raw


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


def needs(lab: Lab) -> list[Need]:
    """What each host of ``lab`` needs of a Node (its file's ``cpus`` and ``memory``, 0 where
    it gives none), of "function" LAB: the lab's hosts spread over Nodes when they can be."""
    out = []
    for h in shares(lab):
        spec = lab.hosts.get(h)
        out.append(Need(lab.name, h, float(spec.cpus or 0) if spec else 0.0,
                        int(spec.memory or 0) if spec else 0))
    return out


def resources(lab: Lab) -> Resources:
    """The objects of ``lab`` as ``up --kube`` writes them (pure): the ``Lab`` and one part per
    host holding its share of the lab file, neither placed nor planned yet (see the module);
    :class:`SpecError` when a name is not one Kubernetes takes or an object would be too
    large."""
    check_names(lab)
    share = shares(lab)
    labels = {**MANAGED, LAB_LABEL: lab.name}
    wide = {k: lab.raw[k] for k in LAB_WIDE if lab.raw.get(k) is not None}
    # the API server keeps a mapping's keys sorted: the file's order, kept beside them
    order = {k: list(v) for k, v in wide.items() if isinstance(v, dict)}
    lab_obj: dict[str, Any] = {"apiVersion": GROUP_VERSION, "kind": "Lab",
               "metadata": {"name": lab.name, "namespace": NAMESPACE, "labels": labels},
               "spec": {"lab": lab.name, "hostCount": len(share), "file": wide,
                        "order": order}}
    node_index = {n: i for i, n in enumerate(lab.nodes)}
    parts: list[dict[str, Any]] = []
    for need in needs(lab):
        node_names, links = share[need.instance]
        parts.append({
            "apiVersion": GROUP_VERSION, "kind": "LabPart",
            "metadata": {"name": f"{lab.name}.{need.instance}", "namespace": NAMESPACE,
                         "labels": dict(labels)},
            "spec": {"lab": lab.name, "host": need.instance, "cpu": need.cpu,
                     "memory": need.memory, "nodes": node_names,
                     "links": [raw for _, raw in links],
                     "order": {"nodes": {n: node_index[n] for n in node_names},
                               "links": [i for i, _ in links]}}})
    for obj in [lab_obj] + parts:
        size = len(json.dumps(obj))
        if size > MAX_OBJECT:
            raise SpecError(f"{obj['kind']} {obj['metadata']['name']} would be {size} bytes, "
                            f"more than the {MAX_OBJECT} an object may have (etcd): spread the "
                            f"lab's nodes over more hosts", file=lab.source)
    return Resources(lab_obj, parts)


def up(lab: Lab, api: KubeApi) -> Resources:
    """Write ``lab``'s resources (see the module): all of them, or none.  Its hosts are placed
    first on the Nodes as they are now (:func:`.kubernetes_controller.place_lab`, the
    controller's own function): a lab that does not fit is refused here, nothing written; the
    controller decides for good once the lab is written."""
    from .kubernetes_controller import place_lab, schedulable_nodes

    try:
        api.get(labs_path(lab.name))
        raise LabError(f"lab '{lab.name}' is already on the cluster {api.config.server}")
    except NotFound:
        pass
    res = resources(lab)  # names and sizes checked before the cluster is asked anything
    res.placement = place_lab(lab, schedulable_nodes(api.items(resource_path("v1", "nodes")),
                                                     api.items(parts_path())))
    objs = [(labs_path(), res.lab)] + [(parts_path(), p) for p in res.parts]
    for path, obj in objs:  # the API server checks all (rights, schema) before any is made
        api.create(path, obj, dry_run=True)
    made: list[str] = []
    try:
        uid = api.create(labs_path(), res.lab)["metadata"]["uid"]
        made.append(labs_path(lab.name))
        owner = {"apiVersion": GROUP_VERSION, "kind": "Lab", "name": lab.name, "uid": uid,
                 "blockOwnerDeletion": True}
        for p in res.parts:  # the last one makes the lab whole: the controller's from here
            p["metadata"]["ownerReferences"] = [owner]
            api.create(parts_path(), p)
            made.append(parts_path(p["metadata"]["name"]))
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
