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

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from ..errors import RealizeError, SfclabError
from ..plan.model import InterfacePlan, Plan
from ..plan.names import STAGING_NODE, netns_name
from . import ethtool, netns, ovs

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
    except NetlinkError as e:
        raise RealizeError(f"{os.strerror(e.code) if e.code else e}", obj=obj, errno=e.code) from e
    except OSError as e:
        raise RealizeError(e.strerror or str(e), obj=obj, errno=e.errno) from e
    except Exception as e:
        raise RealizeError(f"{type(e).__name__}: {e}", obj=obj) from e


class Builder:
    """Makes a plan's objects.  Keeps one netlink socket per namespace; ``close()`` them."""

    def __init__(self, plan: Plan, progress: Callable[[str], None] | None = None):
        self.plan = plan
        self.ipr: dict[str | None, IPRoute] = {}
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

    def root(self) -> IPRoute:
        if None not in self.ipr:
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
                ipr = netns.create(ns.name, sysctls)
                self.ipr[ns.name] = ipr
                ipr.link("set", index=1, state="up")  # lo
        if any(i.netns is None for v in p.veths for i in (v.a, v.b)):
            stage = netns_name(p.lab, STAGING_NODE)
            with step(f"namespace {stage}"):
                self.ipr[stage] = netns.create(stage, BASE_SYSCTLS)
        for br in p.linux_bridges:
            with step(f"linux bridge {br.name} in {br.netns}"):
                self.ipr[br.netns].link("add", ifname=br.name, kind="bridge")
                self._created(br.netns, br.name)
        self.progress(f"veth pairs: {len(p.veths)}")
        for v in p.veths:
            self._veth(v.a, v.b)
        stage = netns_name(p.lab, STAGING_NODE)
        if stage in self.ipr:
            self.ipr.pop(stage).close()
            netns.delete(stage)
        if p.ovs_bridges:
            self.progress(f"ovs bridges: {len(p.ovs_bridges)}")
            self._ovs()
        self.progress("interfaces and addresses")
        for i in p.interfaces:
            if i.role == "internal":
                with step(f"internal port {i.name} into {i.netns}"):
                    fd = os.open(netns.path(i.netns), os.O_RDONLY)  # type: ignore[arg-type]
                    try:
                        self.root().link("set", ifname=i.name, net_ns_fd=fd)
                    finally:
                        os.close(fd)
        for br in p.linux_bridges:
            with step(f"linux bridge {br.name} in {br.netns}"):
                self.ipr[br.netns].link("set", index=self.index[(br.netns, br.name)], state="up")
        for i in p.interfaces:
            if i.role != "patch":
                self._configure(i)
        self.progress(f"routes: {len(p.routes)}")
        for r in p.routes:
            with step(f"route {r.dst} via {r.gateway} in {r.netns}"):
                self.ipr[r.netns].route("add", dst=r.dst, gateway=r.gateway)

    def _veth(self, a: InterfacePlan, b: InterfacePlan) -> None:
        """Make a veth pair with each end in its namespace.

        An end bound for the root namespace is born in the lab's staging namespace, gets the
        lab's mark (alias) there, and only then moves to the root namespace: a crash at any
        moment leaves either an interface inside a lab namespace or a marked one in the root.
        """
        what = f"veth {a.netns or 'root'}/{a.name} - {b.netns or 'root'}/{b.name}"
        if a.netns is None and b.netns is not None:
            a, b = b, a
        with step(what):
            stage = netns_name(self.plan.lab, STAGING_NODE)
            b_home = b.netns or stage
            fd = os.open(netns.path(b_home), os.O_RDONLY)
            try:
                peer: dict = {"ifname": b.name, "net_ns_fd": fd}
                kw = {}
                if a.mtu:
                    kw["mtu"] = a.mtu
                    peer["mtu"] = b.mtu or a.mtu
                self.ipr[a.netns or stage].link("add", ifname=a.name, kind="veth", peer=peer, **kw)
            finally:
                os.close(fd)
            self._created(a.netns, a.name)
            self._created(b.netns, b.name)
            for end in (a, b):
                if end.netns is None:
                    ipr = self.ipr[stage]
                    ipr.link("set", ifname=end.name, ifalias=end.alias)
                    root_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
                    try:
                        ipr.link("set", ifname=end.name, net_ns_fd=root_fd)
                    finally:
                        os.close(root_fd)

    def _ipr(self, i: InterfacePlan) -> IPRoute:
        return self.ipr[i.netns] if i.netns else self.root()

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

    def _configure(self, i: InterfacePlan) -> None:
        where = i.netns or "root"
        with step(f"interface {where}/{i.name}"):
            ipr = self._ipr(i)
            index = self.index.get((i.netns, i.name)) if i.netns else None
            if index is None:  # root ends and moved-in internal ports: ask the kernel
                idx = ipr.link_lookup(ifname=i.name)
                if not idx:
                    raise RealizeError("interface is missing after creation",
                                       obj=f"{where}/{i.name}")
                index = idx[0]
            attrs: dict = {"state": "up"}
            if i.master and i.netns is not None and i.role == "veth":  # a Linux bridge port
                attrs["master"] = self.index[(i.netns, i.master)]
            if i.mtu and i.role == "internal":
                attrs["mtu"] = i.mtu
            if i.alias and i.netns is not None:  # root ends were marked at birth
                attrs["ifalias"] = i.alias
            if i.offloads:
                if i.netns:
                    with netns.entered(i.netns):
                        ethtool.set_offloads(i.name, i.offloads)
                else:
                    ethtool.set_offloads(i.name, i.offloads)
            if i.address:
                addr, plen = i.address.split("/")
                ipr.addr("add", index=index, address=addr, prefixlen=int(plen))
            ipr.link("set", index=index, **attrs)
