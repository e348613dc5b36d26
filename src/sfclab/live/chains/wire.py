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

A node on another host than its attach node is joined by a tunnel instead: a hosted link of
the change (:func:`sfclab.plan.tunnels.planned_link`), its hosts joined to the underlay first
(:func:`join_tunnels`), made and removed by the hosted links' part through the two hosts'
contexts, which the change joins.  A host's agent over SSH makes its share of the same change
(:func:`make_change`: its nodes, the ends of their links at its attach nodes, its tunnels' ends
in its own root namespace).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ...errors import RealizeError
from ...kernel import ethtool, netns
from ...plan.chainadd import NewNode, change_of
from ...plan.model import HostPlan, Plan
from ...plan.steering import SteeringPlan
from ...plan.tunnels import LABELLED_MTU
from ...plan import diff
from ...realize import change, dataplane, ownership
from ...realize.functions import instantiate
from ...realize.state import LabState
from ...realize.steering import PROGRAM_OBJECT, steer_binary
from ...realize.step import step
from .. import record
from ..hosts import underlay

ONE_ARM_SYSCTLS = {"net.ipv4.conf.all.send_redirects": "0",
                   "net.ipv4.conf.default.send_redirects": "0"}


def journal_nodes(state: LabState, merged: Plan, nodes: list[NewNode]) -> None:
    """Journal the objects ``nodes`` bring to the lab (``merged``: its plan with them), as
    ``up`` journals a lab's, before any is made."""
    change.journal(state, change_of(merged, {n.node for n in nodes}))


def make_nodes(state: LabState, merged: Plan, nodes: list[NewNode],
               say: Callable[[str], None] | None = None, *, functions: bool = True) -> None:
    """Make ``nodes`` (journaled: :func:`journal_nodes`) and start their functions (unless
    ``functions`` is false: the caller starts them with :func:`start_function`), by the build
    engine; a node on another host than its attach node has its tunnel's hosts joined to the
    underlay first (:func:`join_tunnels`), its tunnel then made with it as a hosted link."""
    join_tunnels(state, merged, nodes)
    make_change(state, merged, change_of(merged, {n.node for n in nodes}), say,
                functions=functions)


def make_change(state: LabState, merged: Plan, made: Plan,
                say: Callable[[str], None] | None = None, *, functions: bool = True) -> None:
    """Make ``made`` (added nodes' part of ``merged``, journaled; a host's agent keeps its
    share of it) by the build engine, then one-armed: ICMP redirects off in each new node
    (before any traffic is steered to it: that comes last).  Functions only with
    ``functions``."""
    change.make(state, merged, made if functions else replace(made, functions={}), say)
    for ns in made.namespaces:
        with step(f"sysctls of {ns.node}"):
            for key, value in ONE_ARM_SYSCTLS.items():
                netns.write_sysctl(ns.name, key, value)


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
                 here: set[str] | None = None, host: HostPlan | None = None) -> list[str]:
    """Remove added ``nodes``: the plan diff from ``before`` (the lab's plan with them) to
    ``after`` (without them), kept to the nodes and their attach nodes (``here``: those of
    them on this host, for a host's agent, whose ``host`` is named in the change as in
    :func:`make_change`: its tunnels' ends are in its own root namespace, marked and
    journaled), removed by the build engine's parts as ``down``
    removes a lab's (:func:`sfclab.realize.change.remove`): each container, then each
    function stopped, what runs in the namespaces ended, each link's end at its attach node
    deleted (a tunnel's devices in its host contexts), the namespaces last, each object once
    its mark is checked.  The errors, going on past them."""
    if here is None:
        here = {n.node for n in nodes} | {n.attach for n in nodes}
    cut = diff.within(diff.removed(before, after), here)
    cut.hosts = [] if host is None else [host]
    return change.remove(state, before, cut)


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


def napi_ports(plan: Plan, sp: SteeringPlan) -> list[tuple[str, str | None, str]]:
    """The hosts' ports (host, its context namespace in ``plan``, port) of the lab's tunnels
    whose node end a label of ``sp`` sends out of (a forward or unpad hop's interface: its
    frames are redirected there by XDP, or by the proxy's tc program): a veth takes
    XDP-redirected frames only with NAPI, so GRO goes on there, as ``up`` does for a lab file's
    chains (:mod:`sfclab.realize.links.hosted`).  A lab whose file had no chain over a tunnel
    left its ports without; an added chain's path over it would drop every frame redirected
    into it.  (The forwarder runs only where labels arrive, :mod:`sfclab.plan.arrivals`, so
    its programs no longer mark the interfaces frames leave by.)"""
    out_ifs = {(h.node, h.ifname) for h in sp.hops
               if h.action in ("forward", "unpad") and h.ifname}
    return [(e.host, e.netns, e.port) for hl in plan.host_links for e in hl.ends
            if e.port and (e.node, e.node_if) in out_ifs]


def napi_on(port: str, ns: str | None) -> None:
    """GRO on at ``port`` (see :func:`napi_ports`), in namespace ``ns`` (None: this
    process's own, a host's agent's context)."""
    with step(f"GRO of port {port}"):
        if ns is None:
            ethtool.set_offloads(port, {"gro": True})
            return
        with netns.entered(ns):
            ethtool.set_offloads(port, {"gro": True})


def join_tunnels(state: LabState, merged: Plan, nodes: list[NewNode]) -> None:
    """The hosts of each tunnel of ``nodes`` joined to the underlay (made on first need:
    :func:`sfclab.live.hosts.underlay.tunnel`) and its hosted link in ``merged`` given their
    underlay addresses; the plan saved before the tunnel is made."""
    # an underlay made here carries each tunnel's MTU (its chain's headers) with VXLAN's
    links = {n.node: underlay.tunnel(state, merged, n, max(n.mtu, LABELLED_MTU))
             for n in nodes}
    got = {hl.vni: hl for hl in links.values() if hl is not None}
    if got:
        merged.host_links = [hl for hl in merged.host_links
                             if hl.link != -1 or hl.vni not in got] + list(got.values())
        record.save_plan(state, merged)
