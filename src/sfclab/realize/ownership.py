"""What a lab may remove: each kind of journal entry, the fields it must have, and the proof of
ownership its object must show before anything is done to it.

The journal (:mod:`sfclab.realize.state`) says what a lab *meant* to make; it is a file, and a
file can be damaged or forged.  So nothing is removed on a journal entry alone: the entry must
first be well formed and name an object of *this* lab (:func:`entry_problem`, a check of the
entry's text), and the object found must then carry the lab's mark (checked where it is
removed).  An entry that fails is reported, naming the journal line and why, and skipped.

==============  ===========================================================================
entry           checked before removal
==============  ===========================================================================
``netns``       a plain name (no ``/``, not ``.``/``..``) with the lab's prefix
                ``sfclab:<lab>:``, and in the kernel the lab's mark: ``lo``'s alias equal to
                the name, written when sfclab made it (:func:`sfclab.kernel.netns.marked`);
                never the root namespace.  Processes are ended only inside namespaces that
                passed, through a pidfd checked after it was opened.
``link``        an interface name; its alias mark starts with ``sfclab:<lab>:`` and the live
                interface carries exactly that alias (checked by the link form)
``ovs-bridge``  an interface name; the live bridge carries ``external_ids:sfclab-lab=<lab>``
``bpffs``       the lab's own bpffs directory or a host's share directly in it (``@<host>``),
                with no ``..``, and no symbolic link on the way out of it (:func:`contained`)
``host-cgroup`` a plain name ``sfclab:<lab>:@<host>``
``host-ovs``    a host name (it becomes a directory under the lab's state directory); the
                daemons are ended only while their command line names that directory
``tcx-tunnel``  an interface name, VNI, addresses and UDP port; the decapsulation program
                found at the interface's tcx ingress must carry them and the lab's mark
                ``sfclab:<lab>:tunnel:<vni>`` in its load-time constants (``.rodata``)
``function``    a node name; its stop runs only for a node whose namespace is the lab's and
                carries the mark (:func:`function_problem`)
``container``   a node name and the container name sfclab derives from it
                (:func:`sfclab.plan.names.container_name`); the live container found under
                that name must carry all three labels of the lab and node, its owner mark
                ``sfclab.mark=sfclab:<lab>:<node>:container`` among them
                (:func:`container_owner_problem`); it is then removed by its ID.  The
                entry also covers the node's held sysfs
                (:func:`sfclab.realize.containers.sysfs_dir`), unmounted only while its
                mount's source is ``sfclab:<lab>:<node>:sysfs``
==============  ===========================================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kernel import netns
from ..plan.names import NETNS_PREFIX, container_labels, container_name
from ..spec.names import IFNAME_RE, node_name_ok

if TYPE_CHECKING:
    from ..plan.model import Plan

#: the longest journal entry quoted in a report
QUOTE_MAX = 120


def lab_prefix(lab: str) -> str:
    return f"{NETNS_PREFIX}{lab}:"


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a kernel object in a flat name space (namespace, cgroup)."""
    if not name or "/" in name or "\0" in name or name in (".", "..") or len(name) > 255:
        return "not a plain name (it has '/', is '.' or '..', empty or too long)"
    return None


def namespace_name_problem(lab: str, name: str) -> str | None:
    """Why ``name`` is not a namespace name of lab ``lab`` (its text only; the mark is read
    by :func:`namespace_problem`)."""
    return plain_name_problem(name) or (
        None if name.startswith(lab_prefix(lab)) and len(name) > len(lab_prefix(lab))
        else f"not a namespace of lab '{lab}' (its names start with '{lab_prefix(lab)}')")


def namespace_problem(lab: str, name: str) -> tuple[int | None, str | None]:
    """``(inode, None)`` for a namespace of ``lab`` that carries its mark; else ``(None, why)``
    (``why`` is ``None`` too for an absent namespace of the lab, or the empty file of one
    whose making was cut short: nothing runs there)."""
    problem = namespace_name_problem(lab, name)
    if problem:
        return None, problem
    ino, why = netns.marked(name)
    if ino is None and why in ("absent", netns.PLACEHOLDER):
        return None, None
    return ino, (why or None)


def contained(path: str | Path, root: Path) -> Path | None:
    """``path`` if it is ``root`` or lies inside it: absolute, no ``..`` component, and with
    every symbolic link on the way resolved still inside ``root`` (itself resolved); else
    ``None``.  Nothing is created or changed."""
    p = Path(path)
    if not p.is_absolute() or ".." in p.parts:
        return None
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(p))
    if real != base and base not in real.parents:
        return None
    if p.is_symlink():  # the object itself is what is removed: never a link to it
        return None
    return p


def bpffs_problem(path: str, top: Path) -> str | None:
    """Why ``path`` is not the lab's bpffs directory ``top`` or a host's share in it."""
    p = contained(path, top)
    if p is None:
        return f"not inside this lab's bpffs directory {top}"
    if p != top and not (p.parent == top and p.name.startswith("@")
                         and node_name_ok(p.name[1:])):
        return f"neither this lab's bpffs directory {top} nor a host's share in it"
    return None


def cgroup_problem(lab: str, name: str) -> str | None:
    """Why ``name`` is not a host cgroup of lab ``lab``."""
    problem = plain_name_problem(name)
    if problem:
        return problem
    host = name[len(lab_prefix(lab)) + 1:]
    if not name.startswith(lab_prefix(lab) + "@") or not node_name_ok(host):
        return f"not a cgroup of lab '{lab}' (its names are '{lab_prefix(lab)}@<host>')"
    return None


def container_problem(lab: str, entry: dict[str, Any]) -> str | None:
    """Why a ``container`` entry does not name a container of lab ``lab``: its node is no node
    name, or its name is not the one sfclab gives that node's container."""
    node = entry["node"]
    if not node_name_ok(node):
        return "not a node name"
    if entry["name"] != container_name(lab, node):
        return f"not the container name of node '{node}' ({container_name(lab, node)})"
    return None


def container_owner_problem(lab: str, node: str, labels: dict[str, str]) -> str | None:
    """Why a live container with ``labels`` (read from podman) is not node ``node``'s of lab
    ``lab``: each of its labels must be the lab's, the mark among them."""
    for key, want in container_labels(lab, node).items():
        if labels.get(key) != want:
            return f"its label {key} is {labels.get(key)!r}, not {want!r} (not this lab's)"
    return None


def function_problem(lab: str, plan: Plan, node: str) -> str | None:
    """Why the function of ``node`` (from the saved plan) must not be stopped: its name is not a
    node name (it becomes a state and cgroup path), its namespace is not the lab's, or that
    namespace lacks the lab's mark.  An absent namespace is no problem: its processes are gone,
    and what it left outside (cgroups, records) is still the lab's to remove."""
    if not node_name_ok(node):
        return "not a node name"
    try:
        ns = plan.netns_of(node)
    except KeyError:
        return "not a node of the plan"
    _ino, why = namespace_problem(lab, ns)
    return f"namespace {ns}: {why}" if why else None


def _ifname(v: Any) -> str | None:
    return None if isinstance(v, str) and IFNAME_RE.match(v) else "not an interface name"


def _link(lab: str, e: dict[str, Any]) -> str | None:
    alias = e.get("alias")
    if not isinstance(alias, str) or not alias.startswith(lab_prefix(lab)):
        return f"its mark is not this lab's (marks start with '{lab_prefix(lab)}')"
    return _ifname(e["name"])


def _bpffs(lab: str, e: dict[str, Any]) -> str | None:
    from .dataplane import lab_dir  # light start-up: only labs with a data plane

    return bpffs_problem(e["path"], lab_dir(lab))


def _host(lab: str, e: dict[str, Any]) -> str | None:
    return None if node_name_ok(e["host"]) else "not a host name"


@dataclass(frozen=True)
class EntryKind:
    """One kind of journal entry: the fields it must have (name -> type) and the check of its
    text that proves it names this lab's object (``None``: well formed is enough)."""

    fields: dict[str, type | tuple[type, ...]]
    check: Callable[[str, dict[str, Any]], str | None] | None = None


KINDS: dict[str, EntryKind] = {
    "netns": EntryKind({"name": str}, lambda lab, e: namespace_name_problem(lab, e["name"])),
    "link": EntryKind({"name": str, "alias": str}, _link),
    "ovs-bridge": EntryKind({"name": str}, lambda lab, e: _ifname(e["name"])),
    "bpffs": EntryKind({"path": str}, _bpffs),
    "host-cgroup": EntryKind({"name": str}, lambda lab, e: cgroup_problem(lab, e["name"])),
    "host-ovs": EntryKind({"host": str}, _host),
    "function": EntryKind({"node": str, "kind": str},
                          lambda lab, e: None if node_name_ok(e["node"]) else "not a node name"),
    "tcx-tunnel": EntryKind({"dev": str, "vni": int, "local": str, "remote": str,
                             "udp_port": int}, lambda lab, e: _ifname(e["dev"])),
    "watcher": EntryKind({"pid": int, "netns": str}),
    "remote-host": EntryKind({"host": str, "target": dict}, _host),
    # the Kubernetes cluster a lab was written to (sfclab.realize.runtime.kubernetes_runtime):
    # nothing of it is on this machine; its objects carry the lab's mark there
    "kube-cluster": EntryKind({"server": str}),
    "container": EntryKind({"name": str, "node": str}, container_problem),
}


def entry_problem(lab: str, entry: Any) -> str | None:
    """Why journal entry ``entry`` must not be acted on for lab ``lab``, or ``None``."""
    if not isinstance(entry, dict):
        return f"not an object (a JSON {type(entry).__name__})"
    op = entry.get("op")
    kind = KINDS.get(op) if isinstance(op, str) else None
    if kind is None:
        return f"unknown kind of entry {op!r}"
    for field, typ in kind.fields.items():
        v = entry.get(field)
        if not isinstance(v, typ) or isinstance(v, bool):
            return f"field '{field}' missing or not a {getattr(typ, '__name__', typ)}"
    return kind.check(lab, entry) if kind.check else None


def quote(entry: Any) -> str:
    """A journal entry for a report, cut to :data:`QUOTE_MAX` characters."""
    text = entry if isinstance(entry, str) else json.dumps(entry)
    text = text.strip()
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "..."
