"""Hosts as a part of the build (labs with ``hosts``): each host's context, the underlay that
joins them, and each host's CPUs and memory.

- ``namespaces``: a context namespace ``sfclab:<lab>:@<host>`` per emulated host (the host's
  root context; this machine's root namespace is never used) and the underlay's namespace.
- ``links``: the underlay bridge ``br0`` and a veth from it to each context's ``ul0``.
- ``configure``: addresses on ``ul0``, everything up.
- ``prepare``: each host's cgroups (cpuset, memory; journaled), before functions start.
- ``teardown``: the journaled cgroups, after the lab's processes ended; the namespaces go with
  the rest.

The same part joins a host to the underlay of a running lab (:mod:`sfclab.realize.change`,
``host add``'s host or the implicit host ``local`` when an added instance's tunnel first needs
it): the change holds the host (its address, ``ul0`` and the underlay's port ``ua<n>``) and
the underlay; a context or underlay the running lab has already is *joined* (the builder's
``joined``: an fd kept once its mark is checked), never made again, and a host whose cgroup is
the lab's already (or that has none: ``local``) carries ``cgroup`` empty in the change.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..hosts import cgroups as host_cgroups
from ..hosts.attach import ATTACH_KINDS
from ..errors import RealizeError
from ..kernel import netns
from ..hosts.context import EmulatedHost, HostContext, OwnRoot
from ..plan.model import Plan
from .nodes.namespace import BASE_SYSCTLS
from . import ownership
from .part import Part
from .step import step

if TYPE_CHECKING:
    from .build import Builder
    from .state import LabState
    from .teardown import TeardownReport


#: the UDP port of a lab's tunnels when it names no underlay (VXLAN's IANA port)
VXLAN_PORT = 4789


def context(plan: Plan, host: str) -> HostContext:
    """The host's context: its namespace for an emulated host; for a real host (whose part is
    built by its agent, there) the namespace the agent runs in: the machine's root."""
    for h in plan.hosts:
        if h.name == host:
            return EmulatedHost(h.name, h.netns) if h.emulated else OwnRoot(h.name)
    raise KeyError(host)


def underlay_mark(lab: str, host: str) -> str:
    """The alias of a host's ``ul0`` (its end of the veth to the underlay's bridge)."""
    return f"sfclab:{lab}:@{host}:underlay"


def _emulated(plan: Plan) -> bool:
    return any(h.emulated for h in plan.hosts)


def ovs_dir(state: LabState, host: str) -> Path:
    """Where a host's own OVS keeps its database, sockets and logs."""
    return state.dir / "hosts" / host / "ovs"


class Hosts(Part):
    name = "hosts"
    teardown_rank = 45  # after the lab's processes ended (cgroups must be empty)

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        if not plan.hosts:
            return []
        # a real host's context is its root namespace: never journaled, never removed
        out: list[dict[str, Any]] = [{"op": "netns", "name": h.netns} for h in plan.hosts
                                     if h.emulated]
        if plan.underlay is not None and _emulated(plan):
            out.append({"op": "netns", "name": plan.underlay.netns})
        out += [{"op": "host-cgroup", "name": h.cgroup} for h in plan.hosts if h.cgroup]
        return out

    def namespaces(self, b: Builder) -> None:
        for h in b.plan.hosts:
            if h.netns in b.joined:  # a running lab's context a change joins to the underlay
                continue
            if h.emulated:
                b.open_namespace(h.netns, BASE_SYSCTLS)
            else:  # the agent's own namespace is the host's context
                b.fds[h.netns] = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        u = b.plan.underlay
        if u is not None and _emulated(b.plan) and u.netns not in b.joined:
            b.open_namespace(u.netns, BASE_SYSCTLS)

    def links(self, b: Builder) -> None:
        u = b.plan.underlay
        if u is None or not _emulated(b.plan):  # a real host's underlay is its own network
            return
        if u.netns not in b.joined:
            b.link_batch.bridge(u.bridge, b.fds[u.netns],
                                f"underlay bridge {u.netns}/{u.bridge}",
                                index=b.created(u.netns, u.bridge))
        for h in b.plan.hosts:
            b.link_batch.veth(h.underlay_if, b.fds[h.netns], h.underlay_peer, b.fds[u.netns],
                              f"underlay veth {h.netns}/{h.underlay_if} - "
                              f"{u.netns}/{h.underlay_peer}", mtu=u.mtu,
                              index=b.created(h.netns, h.underlay_if),
                              peer_index=b.created(u.netns, h.underlay_peer))

    def configure(self, b: Builder) -> None:
        u = b.plan.underlay
        if u is None or not _emulated(b.plan):
            return
        ub = b.batch(u.netns)
        ub.link(1, f"interface {u.netns}/lo")
        br = _index(b, u.netns, u.bridge)
        ub.link(br, f"underlay bridge {u.netns}/{u.bridge}")
        for h in b.plan.hosts:
            ub.link(_index(b, u.netns, h.underlay_peer), f"interface {u.netns}/{h.underlay_peer}",
                    master=br)
            hb = b.batch(h.netns)
            hb.link(1, f"interface {h.netns}/lo")
            idx = _index(b, h.netns, h.underlay_if)
            hb.link(idx, f"interface {h.netns}/{h.underlay_if}",
                    alias=underlay_mark(b.plan.lab, h.name))
            hb.addr(idx, h.address, f"address {h.address} on {h.netns}/{h.underlay_if}")

    def prepare(self, b: Builder) -> None:
        for h in b.plan.hosts:
            if not h.cgroup:  # the lab's already (a change joining it), or none (``local``)
                continue
            with step(f"cgroups of host {h.name}"):
                host_cgroups.create(h.cgroup, h.cpus, h.memory)

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        for e in journal:
            if e.get("op") != "host-cgroup":
                continue
            problem = ownership.cgroup_problem(state.name, e["name"])
            if problem:  # read_journal checks it too; checked again where it is removed
                report.errors.append(f"cgroup {e['name']}: {problem}; left alone")
                continue
            report.errors += host_cgroups.remove(e["name"])


HOSTS = Hosts()


def _index(b: Builder, ns: str, name: str) -> int:
    """The index of interface ``name`` in ``ns``: known for a namespace the build made, asked
    of the kernel in one a change joined."""
    idx = b.index.get((ns, name))
    if idx is not None:
        return idx
    found = b.iproute(ns).link_lookup(ifname=name)
    if not found:
        raise RealizeError("interface is missing after creation", obj=f"interface {ns}/{name}")
    return int(found[0])


def inspect_hosts(plan: Plan) -> dict[str, Any]:
    """What ``inspect`` shows of the hosts: each host's context, underlay address, CPUs and
    memory (live from its cgroups), nodes, and the links' tunnels."""
    out: dict[str, Any] = {}
    for h in plan.hosts:  # a real host's context is the root of the machine it is read on
        out[h.name] = {"context": h.netns if h.emulated else "root",
                       "present": netns.exists(h.netns) if h.emulated else True,
                       "emulated": h.emulated, "underlay": h.address, "cpus": h.cpus,
                       "memory": h.memory, "nodes": h.nodes,
                       "cgroups": host_cgroups.usage(h.cgroup)}
    return out


def inspect_links(plan: Plan, live: bool = False) -> list[dict[str, Any]]:
    """Every hosted link as the plan has it; with ``live``, each end also says whether its
    port and tunnel exist in the host context now (``present``)."""
    have: dict[str, set[str]] = {}
    if live:
        for h in plan.hosts:
            if not h.emulated or netns.exists(h.netns):
                ipr = netns.iproute(h.netns if h.emulated else None)
                try:
                    have[h.netns] = {m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
                finally:
                    ipr.close()
        # contexts no plan host names (``sfclab:<lab>:@local`` of added instances' tunnels)
        for ns in {e.netns for hl in plan.host_links for e in hl.ends} - set(have):
            if netns.exists(ns):
                ipr = netns.iproute(ns)
                try:
                    have[ns] = {m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
                finally:
                    ipr.close()
    out = []
    for hl in plan.host_links:
        ends = []
        for e in hl.ends:
            d: dict[str, Any] = {"node": e.node, "host": e.host, "port": e.port,
                                 "tunnel": e.vxlan, "local": e.local, "remote": e.remote,
                                 "joiner": e.joiner}
            if live:
                there = have.get(e.netns, set())
                tunnel = e.vxlan if ATTACH_KINDS[hl.attach].kernel_tunnel else None
                d["present"] = all(x in there for x in (e.port, tunnel) if x) if e.port \
                    else e.netns in have  # direct: the tunnel lives in the node
            ends.append(d)
        out.append({"link": hl.link, "added": hl.link == -1, "attach": hl.attach, "vni": hl.vni, "mtu": hl.mtu,
                    "rate": hl.rate, "tenant": hl.space, "ends": ends})
    return out
