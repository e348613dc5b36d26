"""How a hosted link meets its node in the host context: one entry per ``attach`` kind.

At each host context a hosted link has its *ports* (the host-side ends of the veths to its
nodes: one, or two when both nodes are on this host) and, across hosts, its VXLAN device.  An
attach kind joins them:

``bridge``
    a Linux bridge ``br<link>`` with the ports and the tunnel (learning, flooding)
``shortbridge``
    across hosts, the shortbridge is the tunnel's end itself (no VXLAN device): a tc program at
    the port's ingress (``bpf/vxlan_encap.bpf.c``) puts the link's VXLAN outer headers on and
    sends the frame out of the underlay interface; one at the underlay interface's ingress
    (``bpf/vxlan_decap.bpf.c``, one per link) strips them from this link's frames (VNI, remote
    and local address match) and hands the inner frame into the node, and passes every other
    frame on.  On one host, the two ports joined as ``shortbridge-vxlandev`` joins them.  No
    learning, no lookup, no UDP socket path
``shortbridge-vxlandev``
    the earlier form: a kernel VXLAN device and the port joined by two tc programs
    (``bpf/shortbridge.bpf.c``), each redirecting every frame from one to the other (Trellis's
    shortbridge, without its patch); into a node's veth straight to its inside end, unless the
    link is shaped
``ovs``
    an OVS bridge ``ovs<link>`` of the host's own OVS (userspace datapath)
``hybrid``
    ``ovs``, with each port first in a Linux bridge ``qbr<link>e<end>`` joined to OVS by a veth
    pair ``qvb``/``qvo`` (Neutron's hybrid plug, where security groups lived)
``direct``
    no port: the tunnel device itself is moved into the node (comparison only)

Every kind works only through the :class:`~sfclab.hosts.context.HostContext`, so it runs the
same on a host reached another way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..errors import RealizeError, ToolError
from ..kernel import netns
from . import ovs
from .context import EmulatedHost, HostContext

if TYPE_CHECKING:
    from pyroute2 import IPRoute

    from ..plan.model import HostEndPlan, HostLinkPlan

ENV_BINARY = "SFCLAB_SHORTBRIDGE"
IFF_MULTICAST = 0x1000
#: OVS's userspace datapath corrupts TCP checksums left to offload
NO_TX_CSUM = {"tx-checksum": False}


def tunnel_mark(lab: str, vni: int) -> str:
    """The mark a shortbridged tunnel's decapsulation carries in its load-time constants: on a
    real host it sits on the underlay interface, which outlives the lab, and ``down`` takes off
    only the program that carries this mark (``sfc-shortbridge --detach ... --owner``)."""
    return f"sfclab:{lab}:tunnel:{vni}"


def shortbridge_binary() -> Path:
    """``$SFCLAB_SHORTBRIDGE``, else ``native/build/sfc-shortbridge`` of this checkout."""
    env = os.environ.get(ENV_BINARY)
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "native" / "build" / \
        "sfc-shortbridge"
    if not path.is_file():
        raise RealizeError(f"the shortbridge loader is not built ({path} is missing): run "
                           "`make -C native`", obj=str(path))
    return path


class Joint:
    """What an attach kind is handed at one host context."""

    def __init__(self, ctx: HostContext, ipr: IPRoute, link: HostLinkPlan,
                 here: list[HostEndPlan], lab: str, ovs_dir: Path, *, xdp_nodes: bool = False,
                 underlay_if: str = "", udp_port: int = 4789):
        self.ctx, self.ipr, self.link, self.here, self.lab = ctx, ipr, link, here, lab
        self.ovs_dir = ovs_dir
        #: the host's underlay interface and the VXLAN UDP port (tunnels the kind ends itself)
        self.underlay_if, self.udp_port = underlay_if, udp_port
        #: the nodes run XDP programs (the SFC data plane): frames must reach them through
        #: their veth's receive path, and their XDP redirects must be taken by the ports
        self.xdp_nodes = xdp_nodes

    @property
    def members(self) -> list[str]:
        """The devices to join: the ports here, then the tunnel (if the link crosses hosts)."""
        out = [e.port for e in self.here]
        if self.here[0].vxlan and ATTACH_KINDS[self.link.attach].kernel_tunnel:
            out.append(self.here[0].vxlan)
        return out

    def index(self, name: str) -> int:
        idx = self.ipr.link_lookup(ifname=name)
        if not idx:
            raise RealizeError("interface is missing", obj=f"{self.ctx.name}/{name}")
        return int(idx[0])

    def bridge(self, name: str, members: list[str]) -> None:
        """A Linux bridge of ``members``; the bridge device itself is silent (no multicast:
        its own IGMP reports would reach the nodes)."""
        self.ipr.link("add", ifname=name, kind="bridge", br_stp_state=0, br_forward_delay=0,
                      br_mcast_snooping=0)
        br = self.index(name)
        self.ipr.link("set", index=br, flags=0, change=IFF_MULTICAST)
        for m in members:
            self.ipr.link("set", index=self.index(m), master=br)
        self.ipr.link("set", index=br, state="up")


class AttachKind:
    name: ClassVar[str]
    #: the host runs an OVS of its own for this kind
    needs_ovs: ClassVar[bool] = False
    #: what the node's interface must have for this kind to carry TCP
    node_offloads: ClassVar[dict[str, bool]] = {}
    #: the tunnel device goes into the node (no port in the host context)
    in_node: ClassVar[bool] = False
    #: the programs (in ``PATH``) this kind runs in the host context
    programs: ClassVar[tuple[str, ...]] = ()

    def lacks(self) -> list[str]:
        """What this host lacks for this kind, beyond :attr:`programs` (one phrase each)."""
        return []
    #: across hosts, the link's tunnel end is a kernel VXLAN device (else the kind is the end)
    kernel_tunnel: ClassVar[bool] = True

    def join(self, j: Joint) -> None:
        raise NotImplementedError

    def finish(self, j: Joint) -> None:
        """What needs the host contexts' underlay addresses (set after ``join``)."""


class Bridge(AttachKind):
    name = "bridge"

    def join(self, j: Joint) -> None:
        assert j.here[0].joiner
        j.bridge(j.here[0].joiner, j.members)


def via_egress(j: Joint) -> list[str]:
    """Frames bound for a node go straight into it (``bpf_redirect_peer``), unless the link is
    shaped (then through the port's egress, where the shaper is) or the node runs XDP programs
    (which only the veth's own receive path runs)."""
    return ["--via-egress"] if j.link.rate is not None or j.xdp_nodes else []


class ShortbridgeVxlanDev(AttachKind):
    """A kernel VXLAN device and the port (or two ports of one host) joined by two tc
    redirects."""

    name = "shortbridge-vxlandev"

    def lacks(self) -> list[str]:
        try:
            shortbridge_binary()
        except RealizeError as e:
            return [str(e)]
        return []

    def join(self, j: Joint) -> None:
        a, b = j.members
        j.ctx.run([str(shortbridge_binary()), "--netns", j.ctx.tool_netns, *via_egress(j), a, b])


class Shortbridge(ShortbridgeVxlanDev):
    """Across hosts the shortbridge ends the tunnel itself.  The outer destination MAC is the
    remote host's underlay interface's, resolved by the host context's own neighbour table
    when the link is made (one ping; the underlay is one Ethernet segment here).

    The nodes keep their offloads: the encapsulation marks a GSO frame (the node's TSO/GSO, or
    segments GRO merged at the port) as a UDP tunnel packet, so it is cut into segments, each
    with its own outer headers, where it leaves the host.  An emulated host's ``ul0`` is a veth,
    which would pass such a frame whole, and segments with their checksums still to finish and
    the tunnel mark, to the other host, where the decapsulation could not clear that mark (this
    kernel's ``bpf_skb_adjust_room`` has no flag for it) and the next encapsulation of the
    frame would refuse it.  So ``ul0`` of an emulated host puts complete frames on its "wire",
    as a NIC does: it cuts the segments and computes the checksums itself."""

    name = "shortbridge"
    kernel_tunnel = False

    def join(self, j: Joint) -> None:
        if not j.here[0].vxlan:  # both ends on this host: the two ports joined
            super().join(j)

    def finish(self, j: Joint) -> None:
        e = j.here[0]
        if not e.vxlan:
            return
        assert e.local and e.remote and j.link.vni is not None
        mac = remote_mac(j, e.remote)
        if isinstance(j.ctx, EmulatedHost):
            j.ctx.run(["ethtool", "-K", j.underlay_if, *UNDERLAY_CUTS_TUNNEL_GSO])
        j.ctx.run([str(shortbridge_binary()), "--netns", j.ctx.tool_netns, *via_egress(j),
                   "--underlay", j.underlay_if, "--vni", str(j.link.vni), "--local", e.local,
                   "--remote", e.remote, "--remote-mac", mac, "--udp-port", str(j.udp_port),
                   "--owner", tunnel_mark(j.lab, j.link.vni), e.port])


#: an emulated underlay interface puts complete frames on its "wire": UDP tunnel GSO frames
#: cut into segments, checksums computed
UNDERLAY_CUTS_TUNNEL_GSO = ["tx", "off", "tx-udp_tnl-segmentation", "off",
                            "tx-udp_tnl-csum-segmentation", "off"]


def remote_mac(j: Joint, remote: str, tries: int = 20) -> str:
    """The MAC address of underlay address ``remote`` seen from the host context (resolved
    there by a ping, whose answer does not matter: the ARP exchange does)."""
    for _ in range(tries):
        for n in j.ipr.get_neighbours(dst=remote):
            mac = n.get_attr("NDA_LLADDR")
            if mac and n["state"] not in (0x20, 0x01):  # NUD_FAILED, NUD_INCOMPLETE
                return str(mac)
        try:
            j.ctx.run(["ping", "-c", "1", "-W", "1", "-n", "-q", remote], timeout=5)
        except ToolError:
            time.sleep(0.1)
    raise RealizeError(f"no answer from underlay address {remote} (its MAC address is needed "
                       "for the shortbridge's tunnel)", obj=f"{j.ctx.name}/{j.underlay_if}")


class Ovs(AttachKind):
    name = "ovs"
    needs_ovs = True
    programs = ovs.PROGRAMS
    node_offloads = NO_TX_CSUM

    def ovs_ports(self, j: Joint) -> list[str]:
        return j.members

    def join(self, j: Joint) -> None:
        assert j.here[0].joiner
        ports = self.ovs_ports(j)
        for p in ports:
            j.ctx.set_offloads(p, NO_TX_CSUM)
        ovs.vsctl(j.ctx, j.ovs_dir, ovs.bridge(j.here[0].joiner, ports, j.lab))


class Hybrid(Ovs):
    name = "hybrid"

    def ovs_ports(self, j: Joint) -> list[str]:
        out = []
        for e in j.here:
            h = e.hybrid
            j.ipr.link("add", ifname=h["qvb"], kind="veth", peer=h["qvo"], mtu=j.link.mtu)
            for n in (h["qvb"], h["qvo"]):
                j.ipr.link("set", index=j.index(n), state="up")
                j.ctx.set_offloads(n, NO_TX_CSUM)
            j.bridge(h["qbr"], [e.port, h["qvb"]])
            out.append(h["qvo"])
        if j.here[0].vxlan:
            out.append(j.here[0].vxlan)
        return out


class Direct(AttachKind):
    """The tunnel terminated directly in the node (Trellis's comparison setup): the VXLAN
    device, made in the host context (so its socket stays there), is moved into the node's
    namespace under the node's interface name.  A tenant then owns its tunnel device, so
    nothing can be shaped or joined in the host context: for comparisons only."""

    name = "direct"
    in_node = True

    def join(self, j: Joint) -> None:
        for e in j.here:
            assert e.vxlan
            fd = os.open(netns.path(e.node_netns), os.O_RDONLY | os.O_CLOEXEC)
            try:
                j.ipr.link("set", index=j.index(e.vxlan), net_ns_fd=fd, ifname=e.node_if)
            finally:
                os.close(fd)


class Registry(dict[str, AttachKind]):
    def add(self, kind: AttachKind) -> None:
        if kind.name in self:
            raise ValueError(f"attach kind '{kind.name}' is registered twice")
        self[kind.name] = kind


ATTACH_KINDS = Registry()
for _k in (Bridge(), Shortbridge(), ShortbridgeVxlanDev(), Ovs(), Hybrid(), Direct()):
    ATTACH_KINDS.add(_k)
