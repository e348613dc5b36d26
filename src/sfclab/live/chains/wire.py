"""Function nodes made on a running lab: a namespace, one link to the attach node, the
function itself, and its eBPF programs; and their removal.

:func:`journal_nodes` and :func:`make_nodes` hand the nodes' objects -- the part of the merged
plan they bring (:func:`sfclab.plan.chainadd.change_of`) -- to the build engine of ``up``
(:mod:`sfclab.realize.change`): journaled by the parts of the kind table, then made by their
stages, so a node is made as ``up`` makes one: namespace (the lab's base sysctls, forwarding
on), the veth pair (each end made in its namespace, the attach node's joined after its mark is
checked), marks (aliases), MTU with room for labels, addresses, links up, the default route via the attach node, offloads, then the function's
``configure`` and ``start``; then ICMP redirects off (a one-armed function sends packets back
out of the interface they came in by), before any traffic is steered to it.  Their removal
(:func:`remove_nodes`) is the plan diff from the lab with them to the lab without them, taken
out by the same engine's parts as ``down`` takes out a lab (each object's mark checked).

A node on another emulated host than its attach node is joined by a tunnel instead
(:func:`make_tunnelled` with its :class:`~sfclab.live.hosts.underlay.Tunnel`, made by the
hosted links' code; the node's own side by :func:`make_instance`, as a host's agent over SSH
makes a tunnelled node's), then its container, if it has one
(:func:`sfclab.realize.containers.start_node`).  A host's agent over SSH makes its nodes
beside their attach node with :func:`make_nodes` too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from ipaddress import IPv4Interface

from ...errors import RealizeError
from ...kernel import ethtool, netns
from ...plan.chainadd import BASE_MTU, NewNode, change_of
from ...plan.model import Plan
from ...plan.sfc import LABEL_ROOM
from ...plan.tunnels import LABELLED_MTU
from ...plan import diff
from ...realize import change, containers, dataplane, ownership
from ...realize.functions import instantiate
from ...realize.nodes.namespace import BASE_SYSCTLS, FORWARDING_SYSCTLS
from ...realize.state import LabState
from ...realize.steering import PROGRAM_OBJECT, steer_binary
from ...realize.links.hosted import make_live
from ...realize.step import step
from .. import record
from ..hosts import underlay
from ..hosts.underlay import remove_tunnel

if TYPE_CHECKING:
    from pyroute2 import IPRoute

    from ..hosts.underlay import Tunnel

ONE_ARM_SYSCTLS = {"net.ipv4.conf.all.send_redirects": "0",
                   "net.ipv4.conf.default.send_redirects": "0"}


def journal_nodes(state: LabState, merged: Plan, nodes: list[NewNode]) -> None:
    """Journal the objects ``nodes`` bring to the lab (``merged``: its plan with them), as
    ``up`` journals a lab's, before any is made."""
    change.journal(state, change_of(merged, {n.node for n in nodes}))


def make_nodes(state: LabState, merged: Plan, nodes: list[NewNode],
               say: Callable[[str], None] | None = None, *, functions: bool = True) -> None:
    """Make ``nodes`` (journaled: :func:`journal_nodes`) and start their functions (unless
    ``functions`` is false: the caller starts them with :func:`start_function`): those on
    their attach node's host by the build engine, the others each with its tunnel."""
    here = [n for n in nodes if n.vni is None]
    made = change_of(merged, {n.node for n in here})
    if not functions:
        made.functions = {}
    change.make(state, merged, made, say)
    for n in here:  # one-armed (before any traffic is steered to it: that comes last)
        with step(f"sysctls of {n.node}"):
            for key, value in ONE_ARM_SYSCTLS.items():
                netns.write_sysctl(n.netns, key, value)
    for n in nodes:
        if n.vni is not None:
            tunnel = planned_tunnel(state, merged, n)
            assert tunnel is not None  # a node with a VNI is on another host: a tunnel
            make_tunnelled(merged, n, tunnel)
            containers.start_node(merged.lab, merged, n.node)  # its namespace exists now
            if functions:
                start_function(state, merged, n.node)


def make_tunnelled(plan: Plan, n: NewNode, tunnel: Tunnel) -> None:
    """The namespace, link, addresses and route of added node ``n`` (its name journaled) on
    another emulated host than its attach node: ``tunnel`` is its hosted link (in the plan's
    ``host_links``), made through the two hosts' contexts by the lab's hosted-link code."""
    def link(_ipr: IPRoute) -> None:
        make_live(plan.lab, tunnel.link, tunnel.contexts, tunnel.underlay_ifs, tunnel.vxlan_port)

    make_instance(plan, n, link)
    fit_attach(plan, n)


def make_instance(plan: Plan, n: NewNode, link: Callable[[IPRoute], None]) -> None:
    """Added node ``n``'s own side: its namespace, its link made by ``link`` (handed the
    namespace's socket), its interface, address and default route, its offloads."""
    with step(f"namespace {n.netns}"):
        ipr = netns.create(n.netns, {**BASE_SYSCTLS, **FORWARDING_SYSCTLS, **ONE_ARM_SYSCTLS})
    assert ipr is not None
    try:
        link(ipr)
        mtu = n.mtu or BASE_MTU + LABEL_ROOM
        mine = ipr.link_lookup(ifname=n.ifname)[0]
        with step(f"interface {n.node}/{n.ifname}"):
            ipr.link("set", index=mine, mtu=mtu, ifalias=f"sfclab:{plan.lab}:{n.node}:added")
            ipr.addr("add", index=mine, address=str(IPv4Interface(n.address).ip),
                     prefixlen=IPv4Interface(n.address).network.prefixlen)
            ipr.link("set", index=1, state="up")
            ipr.link("set", index=mine, state="up")
        with step(f"default route of {n.node}"):
            ipr.route("add", dst="0.0.0.0/0", gateway=str(IPv4Interface(n.gateway).ip),
                      oif=mine)
        with step(f"offloads of {n.node}/{n.ifname}"), netns.entered(n.netns):
            ethtool.set_offloads(n.ifname, {"tx-checksum": False, "gro": False})
    finally:
        ipr.close()


def fit_attach(plan: Plan, n: NewNode) -> None:
    """The attach node's end of ``n``'s link (there already): MTU, mark, gateway address, up,
    offloads."""
    mtu = n.mtu or BASE_MTU + LABEL_ROOM
    attach_ns = plan.netns_of(n.attach)
    other = netns.iproute(attach_ns)
    try:
        with step(f"interface {n.attach}/{n.attach_ifname}"):
            idx = other.link_lookup(ifname=n.attach_ifname)[0]
            other.link("set", index=idx, mtu=mtu,
                       ifalias=f"sfclab:{plan.lab}:{n.attach}:added")
            gw = IPv4Interface(n.gateway)
            other.addr("add", index=idx, address=str(gw.ip),
                       prefixlen=gw.network.prefixlen)
            other.link("set", index=idx, state="up")
    finally:
        other.close()
    with step(f"offloads of {n.attach}/{n.attach_ifname}"), netns.entered(attach_ns):
        ethtool.set_offloads(n.attach_ifname, {"tx-checksum": False})


def start_function(state: LabState, plan: Plan, node: str) -> None:
    with step(f"function {node} ({plan.functions[node].kind})"):
        f = instantiate(state, plan, node)
        f.check()
        f.configure()
        f.start()


def stop_function(state: LabState, plan: Plan, node: str) -> list[str]:
    """Stop ``node``'s function (processes, cgroups), if its namespace is the lab's and carries
    its mark (:func:`~sfclab.realize.ownership.function_problem`); the errors, if any."""
    if node not in plan.functions:
        return []
    problem = ownership.function_problem(state.name, plan, node)
    if problem:
        return [f"function {node}: {problem}; not stopped"]
    if not state.node_dir(node).exists():
        return []
    try:
        instantiate(state, plan, node).stop()
    except Exception as e:  # keep removing the rest
        return [f"function {node}: {e}"]
    return []


def remove_nodes(state: LabState, before: Plan, after: Plan, nodes: list[NewNode],
                 here: set[str] | None = None) -> list[str]:
    """Remove added ``nodes``: the plan diff from ``before`` (the lab's plan with them) to
    ``after`` (without them), kept to the nodes and their attach nodes (``here``: those of
    them on this host, for a host's agent), removed by the build engine's parts as ``down``
    removes a lab's (:func:`sfclab.realize.change.remove`): each container, then each
    function stopped, what runs in the namespaces ended, each link's end at its attach node
    deleted, the namespaces last, each object once its mark is checked.  Without ``here`` this
    machine holds every end: a node's tunnel, if it has one, goes first through the two hosts'
    contexts (the hosted links' code).  The errors, going on past them."""
    errors: list[str] = []
    if here is None:
        for n in nodes:
            errors += remove_tunnel(before, n)
        here = {n.node for n in nodes} | {n.attach for n in nodes}
    cut = diff.within(diff.removed(before, after), here)
    return errors + change.remove(state, before, cut)


def load_programs(plan: Plan, node: str, node_id: int,
                  progs: list[tuple[str, str, str]], maps: Path | None = None) -> None:
    """Load and attach ``progs`` (program, interface, hook) at ``node`` with the lab's maps
    (``maps``: another directory of them, a host's share)."""
    binary = steer_binary()
    argv = [str(binary), "--maps", str(maps or dataplane.lab_dir(plan.lab) / "maps"), "--node-id",
            str(node_id), "--netns", plan.netns_of(node)]
    argv += [f"{binary.parent / PROGRAM_OBJECT[p]}:{p}:{i}:{h}" for p, i, h in progs]
    with step(f"eBPF programs of {node}"):
        cp = subprocess.run(argv, capture_output=True, text=True, check=False)
        if cp.returncode != 0:
            raise RealizeError(cp.stderr.strip() or f"sfc-steer exited {cp.returncode}",
                               obj=f"eBPF programs of {node}")


def set_link(plan: Plan, node: str, ifname: str, *, mtu: int | None = None,
             offloads: dict[str, bool] | None = None, gso_max_segs: int | None = None) -> None:
    """Fit an existing interface of the lab to labelled traffic."""
    ns = plan.netns_of(node)
    ipr = netns.iproute(ns)
    try:
        with step(f"interface {node}/{ifname}"):
            idx = ipr.link_lookup(ifname=ifname)[0]
            if mtu is not None:
                ipr.link("set", index=idx, mtu=mtu)
            if gso_max_segs is not None:
                ipr.link("set", index=idx, gso_max_segs=gso_max_segs)
            if offloads:
                with netns.entered(ns):
                    ethtool.set_offloads(ifname, offloads)
    finally:
        ipr.close()


def planned_tunnel(state: LabState, merged: Plan, n: NewNode) -> underlay.Tunnel | None:
    """``n``'s tunnel, if it has one: its hosts joined, its hosted link put in the plan (and
    the plan saved) before it is made."""
    t = underlay.tunnel(state, merged, n, LABELLED_MTU)
    if t is not None:
        merged.host_links.append(t.link)
        record.save_plan(state, merged)
    return t
