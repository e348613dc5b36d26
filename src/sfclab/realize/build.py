"""Plan -> kernel objects, through netlink and one OVSDB transaction.

Order: namespaces (with their sysctls written while we are inside), Linux bridges, veth pairs
(created directly with each end in its namespace, so no temporary names), the lab's OVSDB
transaction (bridges, ports, patch pairs, marks), internal ports moved into their namespaces,
then per interface: master, MTU, offloads, address, alias, up; then routes.  Every failure is
raised as :class:`RealizeError` naming the object; the caller rolls back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from typing import TYPE_CHECKING

from ..errors import RealizeError, SfclabError
from ..plan.model import InterfacePlan, Plan
from ..plan.names import STAGING_NODE, netns_name
from ..kernel import ethtool, netns, nlbatch, ovs
from ..kernel.nlbatch import Batch

if TYPE_CHECKING:  # pyroute2 is loaded only for labs with root-namespace ends (OVS)
    from pyroute2 import IPRoute

#: written inside every lab namespace at creation: no IPv6 chatter (RA, DAD, MLD) in counters
#: and a default TTL of 255, so chains of hundreds of routers still pass traffic (``router``'s
#: ``ttl`` overrides it)
BASE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1",
                "net.ipv4.ip_default_ttl": "255"}
FORWARDING_SYSCTLS = {"net.ipv4.ip_forward": "1"}


@contextlib.contextmanager
def step(obj: str) -> Iterator[None]:
    try:
        yield
    except SfclabError as e:
        if isinstance(e, RealizeError):
            raise
        raise RealizeError(str(e), obj=obj) from e
    except OSError as e:
        raise RealizeError(e.strerror or str(e), obj=obj, errno=e.errno) from e
    except Exception as e:
        code = getattr(e, "code", None)  # pyroute2's NetlinkError carries the errno
        if type(e).__name__ == "NetlinkError" and isinstance(code, int) and code > 0:
            raise RealizeError(os.strerror(code), obj=obj, errno=code) from e
        raise RealizeError(f"{type(e).__name__}: {e}", obj=obj) from e


class Builder:
    """Makes a plan's objects.  Keeps one netlink socket per namespace; ``close()`` them."""

    def __init__(self, plan: Plan, progress: Callable[[str], None] | None = None):
        self.plan = plan
        self.ipr: dict[str | None, IPRoute] = {}  # root and staging namespaces only
        self.fds: dict[str, int] = {}  # an open fd on every lab namespace
        self.progress = progress or (lambda _msg: None)
        # ifindexes in our fresh namespaces are handed out in creation order (lo is 1), so the
        # index of every interface we create there is known without asking the kernel
        self.next_index: dict[str, int] = {}
        self.index: dict[tuple[str, str], int] = {}

    def _created(self, ns: str | None, name: str) -> None:
        if ns is None:
            return
        n = self.next_index.get(ns, 2)
        self.index[(ns, name)] = n
        self.next_index[ns] = n + 1

    def close(self) -> None:
        for ipr in self.ipr.values():
            with contextlib.suppress(Exception):
                ipr.close()
        self.ipr.clear()
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def root(self) -> "IPRoute":
        if None not in self.ipr:
            from pyroute2 import IPRoute

            self.ipr[None] = IPRoute()
        return self.ipr[None]

    def build(self) -> None:
        p = self.plan
        self.progress(f"namespaces: {len(p.namespaces)}")
        for ns in p.namespaces:
            sysctls = dict(BASE_SYSCTLS)
            if ns.forwards:
                sysctls.update(FORWARDING_SYSCTLS)
            with step(f"namespace {ns.name}"):
                netns.create(ns.name, sysctls, iproute=False)
                self.fds[ns.name] = os.open(netns.path(ns.name), os.O_RDONLY | os.O_CLOEXEC)
        stage = netns_name(p.lab, STAGING_NODE)
        rooted = [i for v in p.veths for i in (v.a, v.b) if i.netns is None]
        if rooted:
            with step(f"namespace {stage}"):
                self.ipr[stage] = netns.create(stage, BASE_SYSCTLS)
                self.fds[stage] = os.open(netns.path(stage), os.O_RDONLY | os.O_CLOEXEC)
        # Linux bridges and veth pairs: one batch from the root namespace, each end created
        # directly in its namespace (an end bound for the root is born in the staging one)
        self.progress(f"veth pairs: {len(p.veths)}")
        links = Batch()
        for br in p.linux_bridges:
            links.bridge(br.name, self.fds[br.netns], f"linux bridge {br.name} in {br.netns}")
            self._created(br.netns, br.name)
        for v in p.veths:
            a, b = v.a, v.b
            links.veth(a.name, self.fds[a.netns or stage], b.name, self.fds[b.netns or stage],
                       f"veth {a.netns or 'root'}/{a.name} - {b.netns or 'root'}/{b.name}",
                       mtu=a.mtu)
            self._created(a.netns, a.name)
            self._created(b.netns, b.name)
        with step("veth pairs"):
            sock = nlbatch.open_socket()
            try:
                links.send(sock)
            finally:
                sock.close()
        for end in rooted:
            self._to_root(end, stage)
        if rooted:
            self.ipr.pop(stage).close()
            os.close(self.fds.pop(stage))
            netns.delete(stage)
        if p.ovs_bridges:
            self.progress(f"ovs bridges: {len(p.ovs_bridges)}")
            self._ovs()
        self.progress("internal ports into their namespaces")
        for i in p.interfaces:
            if i.role == "internal":
                with step(f"internal port {i.name} into {i.netns}"):
                    fd = os.open(netns.path(i.netns), os.O_RDONLY)  # type: ignore[arg-type]
                    try:
                        self.root().link("set", ifname=i.name, net_ns_fd=fd)
                    finally:
                        os.close(fd)
        # everything else is independent small requests: one batch per namespace, sent at once
        batches: dict[str | None, Batch] = {ns.name: Batch() for ns in p.namespaces}
        for ns in p.namespaces:
            batches[ns.name].link(1, f"interface {ns.name}/lo")
        for br in p.linux_bridges:
            batches[br.netns].link(self.index[(br.netns, br.name)],
                                   f"linux bridge {br.name} in {br.netns}")
        for i in p.interfaces:
            if i.role != "patch":
                self._configure(i, batches.setdefault(i.netns, Batch()))
        for r in p.routes:
            batches[r.netns].route(r.dst, r.gateway, f"route {r.dst} via {r.gateway} in {r.netns}")
        self.progress(f"addresses, links up, routes: {sum(map(len, batches.values()))} requests")
        for ns, batch in batches.items():
            if not batch:
                continue
            with step(f"netlink batch in {ns or 'the root namespace'}"):
                ctx = netns.entered(ns) if ns else contextlib.nullcontext()
                with ctx:
                    sock = nlbatch.open_socket()
                try:
                    batch.send(sock)
                finally:
                    sock.close()

    def _to_root(self, end: InterfacePlan, stage: str) -> None:
        """Mark a root-bound veth end (born in the staging namespace), then move it to the root
        namespace: a crash at any moment leaves either an interface inside a lab namespace or a
        marked one in the root."""
        with step(f"veth end {end.name} into the root namespace"):
            ipr = self.ipr[stage]
            ipr.link("set", ifname=end.name, ifalias=end.alias)
            root_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            try:
                ipr.link("set", ifname=end.name, net_ns_fd=root_fd)
            finally:
                os.close(root_fd)

    def _ipr(self, i: InterfacePlan) -> IPRoute:
        if i.netns is None:
            return self.root()
        if i.netns not in self.ipr:  # only for look-ups of moved-in internal ports
            self.ipr[i.netns] = netns.iproute(i.netns)
        return self.ipr[i.netns]

    def _ovs(self) -> None:
        lab = self.plan.lab
        cmds: list[list[str]] = []
        for br in self.plan.ovs_bridges:
            cmds.append(["add-br", br.name])
            cmds.append(["set", "bridge", br.name, f"datapath_type={br.datapath}",
                         f"external_ids:{ovs.MARK}={lab}", f"external_ids:sfclab-node={br.node}"])
            for port in br.ports:
                cmds.append(["add-port", br.name, port.name])
                attrs = [f"external_ids:{ovs.MARK}={lab}"]
                if port.type == "internal":
                    attrs.append("type=internal")
                elif port.type == "patch":
                    attrs += ["type=patch", f"options:peer={port.peer_port}"]
                cmds.append(["set", "interface", port.name, *attrs])
        with step(f"ovs transaction for lab {lab}"):
            ovs.vsctl(cmds)

    def _configure(self, i: InterfacePlan, batch: Batch) -> None:
        """Offloads now (ioctl); MTU, master, alias, up and the address into ``batch``."""
        where = i.netns or "root"
        what = f"interface {where}/{i.name}"
        with step(what):
            index = self.index.get((i.netns, i.name)) if i.netns else None
            if index is None:  # root ends and moved-in internal ports: ask the kernel
                idx = self._ipr(i).link_lookup(ifname=i.name)
                if not idx:
                    raise RealizeError("interface is missing after creation", obj=what)
                index = idx[0]
            if i.offloads:
                if i.netns:
                    with netns.entered(i.netns):
                        ethtool.set_offloads(i.name, i.offloads)
                else:
                    ethtool.set_offloads(i.name, i.offloads)
        master = None
        if i.master and i.netns is not None and i.role == "veth":  # a Linux bridge port
            master = self.index[(i.netns, i.master)]
        batch.link(index, what, mtu=i.mtu if i.role == "internal" else None, master=master,
                   alias=i.alias if i.netns is not None else None)  # root ends: marked at birth
        if i.address:
            batch.addr(index, i.address, f"address {i.address} on {where}/{i.name}")
