"""The plan: every kernel and OVSDB object a lab needs, named and addressed.

``Plan`` is plain data (dataclasses that round-trip through JSON), so the state journal can
store it and ``down``/``inspect`` can work from it without the lab file.  Its network
functions are :class:`FunctionPlan` entries (kind and parameters) keyed by node; its service
chains are one :class:`~sfclab.plan.steering.SteeringPlan` (None without chains).
``Plan.to_dict`` writes the JSON that state files and the SSH agent exchange, and
``Plan.from_dict`` reads it back into these types.

Addresses: a lab's ``ip`` (``"4"``, ``"6"`` or ``"dual"``) says which families its links carry;
an interface's IPv4 address is ``address``, its IPv6 one ``address6`` (None where the lab has
no such family), a segment's subnets ``subnet`` and ``subnet6``; routes of both families are
``RoutePlan`` rows (an IPv6 ``dst`` such as ``::/0`` is an IPv6 route).  ``Plan.address_of(node,
family=6)`` is the IPv6 twin of today's ``address_of(node)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from ipaddress import (IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface,
                       IPv6Network)
from typing import Any, Literal, overload

from .steering import SteeringPlan


@dataclass
class NamespacePlan:
    node: str
    name: str
    kind: str
    forwards: bool


@dataclass
class InterfacePlan:
    """One interface.  ``netns`` None means the root namespace (OVS-attached ends)."""

    node: str  # the node it belongs to (for a root-side veth end: the OVS bridge node)
    netns: str | None
    name: str
    link: int  # index into the lab's links
    peer: str  # the node at the other end of the link
    role: str  # veth | internal | patch
    address: str | None = None  # "198.18.0.1/24"
    mtu: int | None = None
    offloads: dict[str, bool] = field(default_factory=dict)
    master: str | None = None  # linux bridge device (in the same namespace) or OVS bridge name
    alias: str | None = None
    address6: str | None = None  # "2001:2:0:1::1/64" (labs of ip 6 or dual)


@dataclass
class VethPlan:
    link: int
    a: InterfacePlan
    b: InterfacePlan


@dataclass
class OvsPortPlan:
    name: str
    type: str  # system | internal | patch
    node: str  # the bridge node
    peer_port: str | None = None  # for patch ports
    link: int = -1


@dataclass
class OvsBridgePlan:
    node: str
    name: str
    datapath: str  # netdev | system
    ports: list[OvsPortPlan] = field(default_factory=list)


@dataclass
class LinuxBridgePlan:
    node: str
    netns: str
    name: str = "br0"


@dataclass
class RoutePlan:
    node: str
    netns: str
    dst: str  # "0.0.0.0/0" or a prefix
    gateway: str  # "" for a route straight out of ``dev`` (a tenant table's connected routes)
    dev: str
    table: int | None = None  # None: main; a shared node's tenant table otherwise


@dataclass
class HostPlan:
    """A host: its context namespace (its root context, for an emulated host), its address
    on the underlay, the CPUs and memory its nodes share (one cgroup ``cgroup`` under the
    cpuset and memory controllers) and the nodes placed on it."""

    name: str
    netns: str
    address: str  # "198.19.255.1/24" on ``underlay_if``
    underlay_if: str
    cgroup: str
    cpus: list[int] = field(default_factory=list)
    memory: int | None = None
    emulated: bool = True
    nodes: list[str] = field(default_factory=list)
    underlay_peer: str = ""  # the underlay's end of the veth to ``underlay_if``


@dataclass
class UnderlayPlan:
    """The network joining emulated hosts: a Linux bridge in a namespace of its own, a veth
    to each host context.  ``mtu_note`` says how tunnels were made to fit it."""

    netns: str
    bridge: str
    subnet: str
    mtu: int
    mtu_note: str
    vxlan_port: int = 4789


@dataclass
class HostEndPlan:
    """One end of a hosted link in its host's context: the veth ``port`` whose peer is the
    node's interface, and (across hosts) the VXLAN device toward the other host."""

    node: str
    host: str
    netns: str  # the host context
    port: str
    node_netns: str
    node_if: str
    vxlan: str | None = None
    local: str | None = None  # underlay addresses
    remote: str | None = None
    joiner: str | None = None  # the bridge (Linux or OVS) that joins port and tunnel
    hybrid: dict[str, str] = field(default_factory=dict)  # qbr, qvb, qvo (attach: hybrid)


@dataclass
class HostLinkPlan:
    """A link joined in host contexts: across hosts a VXLAN tunnel (``vni``), on one host the
    two ports joined directly.  ``attach`` says how; ``rate`` (bit/s) is shaped on each
    ``port`` toward its node, in the host context."""

    link: int
    attach: str
    mtu: int
    ends: list[HostEndPlan]
    vni: int | None = None
    rate: int | None = None
    space: str | None = None  # its tenant (None: public)


@dataclass
class TenancyPlan:
    """A node shared by tenants: its interfaces of each tenant (routed by a table of the
    tenant's, selected by the incoming interface and by the connection's mark) and the
    conntrack zone that keeps tenants' identical flows apart."""

    node: str
    netns: str
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {id, ifaces}


@dataclass
class FunctionPlan:
    """The network function of a node: its kind (a name in :mod:`sfclab.functions`) and its
    parameters as the lab file gave them (checked by the kind's ``Params`` when it starts)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FunctionPlan:
        return cls(kind=d["kind"], params=dict(d["params"]))


@dataclass
class ContainerPlan:
    """A node's container (its ``image``): the podman name it gets
    (:func:`sfclab.plan.names.container_name`), the namespace it joins and how it runs.
    ``cmd`` empty: decided at start from the image (:func:`sfclab.spec.image.run_command`)."""

    node: str
    name: str
    netns: str
    image: str
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    binds: list[list[Any]] = field(default_factory=list)  # [source, target, writable]
    cpus: float | None = None
    memory: int | None = None
    caps: list[str] = field(default_factory=list)
    privileged: bool = False


@dataclass
class SegmentPlan:
    index: int
    subnet: str | None
    members: list[str]  # nodes with an address on it
    bridges: list[str]
    subnet6: str | None = None  # its IPv6 subnet (labs of ip 6 or dual)


@dataclass
class Plan:
    lab: str
    tag: str
    namespaces: list[NamespacePlan] = field(default_factory=list)
    interfaces: list[InterfacePlan] = field(default_factory=list)
    veths: list[VethPlan] = field(default_factory=list)
    ovs_bridges: list[OvsBridgePlan] = field(default_factory=list)
    linux_bridges: list[LinuxBridgePlan] = field(default_factory=list)
    routes: list[RoutePlan] = field(default_factory=list)
    segments: list[SegmentPlan] = field(default_factory=list)
    functions: dict[str, FunctionPlan] = field(default_factory=dict)  # node -> its function
    #: the SFC data plane, None for a lab without chains
    steering: SteeringPlan | None = None
    hosts: list[HostPlan] = field(default_factory=list)  # empty: this machine alone
    underlay: UnderlayPlan | None = None
    host_links: list[HostLinkPlan] = field(default_factory=list)
    tenants: dict[str, list[str]] = field(default_factory=dict)  # tenant -> its nodes
    tenancy: list[TenancyPlan] = field(default_factory=list)  # shared nodes
    containers: list[ContainerPlan] = field(default_factory=list)  # nodes with an image
    ip: str = "4"  # the lab's ``ip:``: "4", "6" or "dual"

    @property
    def families(self) -> tuple[int, ...]:
        """The address families (4, 6) of the lab's links."""
        return {"4": (4,), "6": (6,), "dual": (4, 6)}[self.ip]

    def host_of(self, node: str) -> HostPlan | None:
        for h in self.hosts:
            if node in h.nodes:
                return h
        return None

    def tenants_of(self, node: str) -> list[str]:
        return [t for t, nodes in self.tenants.items() if node in nodes]

    # --- look-ups -------------------------------------------------------------------------
    def netns_of(self, node: str) -> str:
        for ns in self.namespaces:
            if ns.node == node:
                return ns.name
        raise KeyError(node)

    def interfaces_of(self, node: str) -> list[InterfacePlan]:
        return [i for i in self.interfaces if i.node == node and i.netns is not None]

    @overload
    def addresses_of(self, node: str, family: Literal[4] = 4) -> list[IPv4Interface]: ...
    @overload
    def addresses_of(self, node: str, family: Literal[6]) -> list[IPv6Interface]: ...
    @overload
    def addresses_of(self, node: str, family: int) -> list[IPv4Interface | IPv6Interface]: ...

    def addresses_of(self, node: str, family: int = 4) -> Any:
        """The node's addresses of ``family`` (4: IPv4Interface, 6: IPv6Interface), in
        interface order."""
        if family == 6:
            return [IPv6Interface(i.address6) for i in self.interfaces_of(node) if i.address6]
        return [IPv4Interface(i.address) for i in self.interfaces_of(node) if i.address]

    @overload
    def address_of(self, node: str, family: Literal[4] = 4) -> IPv4Address: ...
    @overload
    def address_of(self, node: str, family: Literal[6]) -> IPv6Address: ...
    @overload
    def address_of(self, node: str, family: int) -> IPv4Address | IPv6Address: ...

    def address_of(self, node: str, family: int = 4) -> Any:
        """The node's first address of ``family`` (an IPv4Address, or an IPv6Address for
        ``family=6``); ``KeyError`` if it has none."""
        addrs = self.addresses_of(node, family)
        if not addrs:
            raise KeyError(node)
        return addrs[0].ip

    def subnets(self, family: int = 4) -> list[Any]:
        """The segments' subnets of ``family``."""
        if family == 6:
            return [IPv6Network(s.subnet6) for s in self.segments if s.subnet6]
        return [IPv4Network(s.subnet) for s in self.segments if s.subnet]

    # --- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.steering is not None:
            d["steering"] = self.steering.to_dict()
        if not d["containers"]:  # a lab without images saves the plan it always saved
            del d["containers"]
        if self.ip == "4":  # so does an IPv4 lab: no IPv6 keys
            del d["ip"]
            for i in d["interfaces"]:
                del i["address6"]
            for v in d["veths"]:
                del v["a"]["address6"], v["b"]["address6"]
            for s in d["segments"]:
                del s["subnet6"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        def ifp(x: dict[str, Any]) -> InterfacePlan:
            return InterfacePlan(**x)
        return cls(
            lab=d["lab"], tag=d["tag"],
            namespaces=[NamespacePlan(**x) for x in d["namespaces"]],
            interfaces=[ifp(x) for x in d["interfaces"]],
            veths=[VethPlan(x["link"], ifp(x["a"]), ifp(x["b"])) for x in d["veths"]],
            ovs_bridges=[OvsBridgePlan(x["node"], x["name"], x["datapath"],
                                       [OvsPortPlan(**p) for p in x["ports"]])
                         for x in d["ovs_bridges"]],
            linux_bridges=[LinuxBridgePlan(**x) for x in d["linux_bridges"]],
            routes=[RoutePlan(**x) for x in d["routes"]],
            segments=[SegmentPlan(**x) for x in d["segments"]],
            functions={n: FunctionPlan.from_dict(f) for n, f in d.get("functions", {}).items()},
            steering=SteeringPlan.from_dict(d["steering"]) if d.get("steering") else None,
            hosts=[HostPlan(**x) for x in d.get("hosts", [])],
            underlay=UnderlayPlan(**d["underlay"]) if d.get("underlay") else None,
            host_links=[HostLinkPlan(**{**x, "ends": [HostEndPlan(**e) for e in x["ends"]]})
                        for x in d.get("host_links", [])],
            tenants=d.get("tenants", {}),
            tenancy=[TenancyPlan(**x) for x in d.get("tenancy", [])],
            containers=[ContainerPlan(**x) for x in d.get("containers", [])],
            ip=d.get("ip", "4"),
        )
