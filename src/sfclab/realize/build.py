"""Plan -> kernel objects, through netlink and one OVSDB transaction.

The builder runs the stages of :mod:`sfclab.realize.part` in order over every node kind and link
form of the table, and owns what they share: an open fd and netlink socket per namespace, the
rtnetlink batch of stage 2 (Linux bridges and veth pairs, each end created directly in its
namespace, so no temporary names), the lab's OVSDB transaction of stage 4, and one rtnetlink
batch per namespace in stage 6 (links up, masters, addresses, then the plan's routes).  Every
failure is raised as :class:`RealizeError` naming the object; the caller rolls back.

The same engine makes a *change* to a running lab (:mod:`sfclab.realize.change`): then its plan
holds only the objects to add, ``whole`` is the lab's plan with them (what functions are built
from), and the lab's namespaces the change's links end in are *joined*: an fd kept on each,
after its mark is checked, and no interface index guessed there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import RealizeError
from ..kernel import netns, nlbatch, ovs
from ..kernel.nlbatch import Batch
from ..plan.model import InterfacePlan, Plan
from .ownership import namespace_problem
from .part import Part
from .step import step
from .state import LabState

if TYPE_CHECKING:  # pyroute2 is loaded only for labs with root-namespace ends (OVS)
    from pyroute2 import IPRoute

#: how far above the highest index in a namespace the build did not make it starts its own
#: (room for interfaces something else adds there meanwhile)
INDEX_GAP = 64
#: the stages of a build, in order (see :mod:`sfclab.realize.part`)
STAGES = ("namespaces", "links", "after_links", "ovs", "attach", "configure", "prepare", "start")


class Builder:
    """Makes a plan's objects with ``parts``.  Keeps one netlink socket per namespace;
    ``close()`` them."""

    def __init__(self, plan: Plan, parts: list[Part], state: LabState,
                 progress: Callable[[str], None] | None = None, *, whole: Plan | None = None):
        self.plan = plan
        #: the lab's whole plan: ``plan`` itself, or the running lab's with a change's objects
        self.whole = whole if whole is not None else plan
        self.joined: set[str] = set()  # namespaces of the running lab a change adds to
        self.state = state
        self.parts = parts
        self.ipr: dict[str | None, IPRoute] = {}  # root and staging namespaces only
        self.fds: dict[str, int] = {}  # an open fd on every lab namespace
        self.progress = progress or (lambda _msg: None)
        # the build gives every interface it creates in a lab namespace its index there, from
        # one count over the whole lab that starts above every index the namespaces it did not
        # make hold (a host's, a running lab's a change joins, the root namespace where ends
        # move to it: see count_above), so it is known without asking the kernel and the two
        # ends of a veth pair never share one: the kernel takes a device whose index equals its
        # peer's for one without a peer, handles its carrier coming on up to a second late
        # (linkwatch), and drops what is sent there meanwhile
        self.next_index = 2
        self.index: dict[tuple[str, str], int] = {}
        self.fresh: set[str] = set()  # the namespaces this build made
        self.link_batch = Batch()  # stage 2
        self.ovs_commands: list[list[str]] = []  # stage 4
        self.batches: dict[str | None, Batch] = {ns.name: Batch() for ns in plan.namespaces}

    # --- what parts use --------------------------------------------------------------------
    def created(self, ns: str | None, name: str) -> int:
        """The index interface ``name``, about to be requested in namespace ``ns``, is to get
        there; 0 where the kernel chooses (a namespace of the host's, not the lab's)."""
        if ns not in self.fresh and ns not in self.joined:
            return 0
        n = self.next_index
        self.index[(ns, name)] = n
        self.next_index = n + 1
        return n

    def open_namespace(self, name: str, sysctls: dict[str, str], *, iproute: bool = False) -> None:
        """Make namespace ``name`` (sysctls written inside) and keep an fd on it."""
        with step(f"namespace {name}"):
            ipr = netns.create(name, sysctls, iproute=iproute)
            if iproute:
                self.ipr[name] = ipr
            self.fds[name] = os.open(netns.path(name), os.O_RDONLY | os.O_CLOEXEC)
            self.fresh.add(name)

    def join_namespace(self, name: str) -> None:
        """Keep an fd on namespace ``name`` of the running lab, which a change adds links to;
        refused unless it carries the lab's mark."""
        with step(f"namespace {name}"):
            ino, why = namespace_problem(self.state.name, name)
            if ino is None:
                raise RealizeError(why or "it is missing from the running lab",
                                   obj=f"namespace {name}")
            self.fds[name] = os.open(netns.path(name), os.O_RDONLY | os.O_CLOEXEC)
            self.joined.add(name)

    def close_namespace(self, name: str) -> None:
        """Forget and delete a namespace the build needed only for a while (staging)."""
        ipr = self.ipr.pop(name, None)
        if ipr is not None:
            ipr.close()
        fd = self.fds.pop(name, None)
        if fd is not None:
            os.close(fd)
        netns.delete(name)

    def root(self) -> IPRoute:
        if None not in self.ipr:
            from pyroute2 import IPRoute  # light start-up: pyroute2 only for root-side ends

            self.ipr[None] = IPRoute()
        return self.ipr[None]

    def iproute(self, ns: str | None) -> IPRoute:
        if ns is None:
            return self.root()
        if ns not in self.ipr:  # only for look-ups of moved-in internal ports
            self.ipr[ns] = netns.iproute(ns)
        return self.ipr[ns]

    def batch(self, ns: str | None) -> Batch:
        """The stage-6 batch of namespace ``ns`` (None: the root namespace)."""
        return self.batches.setdefault(ns, Batch())

    def interface_index(self, i: InterfacePlan, what: str) -> int:
        index = self.index.get((i.netns, i.name)) if i.netns else None
        if index is None:  # root ends and moved-in internal ports: ask the kernel
            idx = self.iproute(i.netns).link_lookup(ifname=i.name)
            if not idx:
                raise RealizeError("interface is missing after creation", obj=what)
            index = idx[0]
        return index

    # --- the stages ------------------------------------------------------------------------
    def close(self) -> None:
        for ipr in self.ipr.values():
            with contextlib.suppress(Exception):
                ipr.close()
        self.ipr.clear()
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def send(self, batch: Batch, ns: str | None = None) -> None:
        """Send ``batch`` on a netlink socket opened in namespace ``ns`` (None: this one)."""
        with netns.entered(ns) if ns else contextlib.nullcontext():
            sock = nlbatch.open_socket()
        try:
            batch.send(sock)
        finally:
            sock.close()

    def build(self) -> None:
        p = self.plan
        if self.whole is not p:  # a change: the lab's namespaces its links end in
            made = {ns.name for ns in p.namespaces}
            for name in sorted({i.netns for i in p.interfaces if i.netns} - made):
                self.join_namespace(name)
        self.progress(f"namespaces: {len(p.namespaces)}")
        self._stage("namespaces")
        for name, fd in self.fds.items():
            if name not in self.fresh:
                self.count_above(name, fd)
        self.progress(f"veth pairs: {len(p.veths)}")
        self._stage("links")
        with step("veth pairs"):
            self.send(self.link_batch)
        self._stage("after_links")
        self._stage("ovs")
        if self.ovs_commands:
            self.progress(f"ovs bridges: {len(p.ovs_bridges)}")
            with step(f"ovs transaction for lab {p.lab}"):
                ovs.vsctl(self.ovs_commands)
        self.progress("internal ports into their namespaces")
        self._stage("attach")
        self._stage("configure")
        for r in p.routes:
            if r.table is not None:
                continue  # a shared node's tenant tables: see sfclab.realize.tenancy
            self.batch(r.netns).route(r.dst, r.gateway, f"route {r.dst} via {r.gateway} in "
                                      f"{r.netns}")
        self.progress(f"addresses, links up, routes: {sum(map(len, self.batches.values()))} "
                      "requests")
        for ns, batch in self.batches.items():
            if not batch:
                continue
            with step(f"netlink batch in {ns or 'the root namespace'}"):
                self.send(batch, ns)
        if p.functions:
            self.progress("functions")
        self._stage("prepare")
        self._stage("start")

    def link_indexes(self, name: str | None, fd: int | None) -> list[int]:
        """The interface indexes namespace ``name`` (behind ``fd``; None: this thread's)
        holds."""
        with netns.entered_fd(fd, f"namespace {name}") if fd is not None else \
                contextlib.nullcontext():
            sock = nlbatch.open_socket()
        try:
            return nlbatch.link_indexes(sock)
        finally:
            sock.close()

    def count_above(self, name: str | None, fd: int | None) -> None:
        """Start the lab's count of interface indexes above those namespace ``name`` (behind
        ``fd``; None: this thread's) holds.  The build does so for every namespace it did not
        make; a part whose ends move elsewhere (root-bound veth ends) for where they go."""
        held = self.link_indexes(name, fd)
        self.next_index = max(self.next_index, max(held, default=1) + INDEX_GAP)

    def _stage(self, stage: str) -> None:
        for part in self.parts:
            getattr(part, stage)(self)
