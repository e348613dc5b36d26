"""Hosts in the plan (pure): host contexts, the underlay, tunnels, MTU and CPUs.

- Every host gets a context namespace ``sfclab:<lab>:@<host>`` (for an emulated host: the
  namespace that plays its root context) with the underlay interface ``ul0``; emulated hosts are
  joined by the underlay, a bridge ``br0`` in ``sfclab:<lab>:-underlay`` with one veth to each
  context.  Underlay addresses are the hosts' own, else the underlay subnet's lowest free ones.
- A host's ``cpus`` are handed out from the machine's online CPUs in turn (a cpuset; hosts
  share CPUs only when there are more host CPUs than CPUs), its ``memory`` caps the nodes
  placed on it (one memory cgroup).
- A *hosted* link (ends on different hosts, or a link with ``attach`` or ``rate``) has, at each
  end, a veth between the node and its host's context (``p<link>e<end>`` there); across hosts
  each context has a VXLAN device ``vx<link>`` toward the other (VNI ``VNI_BASE`` + the
  tunnel's ordinal, UDP port 4789, over ``ul0``); ``attach`` joins port and tunnel (or the two
  ports of a link within one host): ``bridge`` (a Linux bridge ``br<link>``), ``shortbridge``
  (tc programs redirecting between the two), ``ovs`` (an OVS bridge ``ovs<link>``, userspace
  datapath), ``hybrid`` (``ovs``, with a Linux bridge ``qbr<link>e<end>`` and a veth pair
  ``qvb``/``qvo`` between the port and OVS, as Neutron plugs VMs).
- MTU: a tunnel's inner MTU is the link's ``mtu`` if it fits the underlay (its MTU less the
  50 bytes VXLAN adds), else the underlay is raised to carry it (emulated underlays can be);
  links without ``mtu`` are lowered to fit.  ``UnderlayPlan.mtu_note`` says which happened.
"""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import SpecError
from ..spec.limits import VXLAN_OVERHEAD
from . import names
from .model import HostEndPlan, HostLinkPlan, HostPlan, Plan, UnderlayPlan

if TYPE_CHECKING:
    from ..spec.lab import Lab, LinkSpec

VNI_BASE = 1000
UNDERLAY_IF = "ul0"
DEFAULT_ATTACH = "bridge"


def check_underlay(lab: Lab, subnets: Iterable[IPv4Network | None]) -> None:
    """The underlay joins the hosts' own contexts; a lab subnet that overlaps it would make a
    node's address and a host's underlay address one route apart.  Refused at the
    ``underlay.subnet`` place (``validate`` plans too, so it refuses what ``up`` would)."""
    if lab.underlay is None:
        return
    u = lab.underlay.subnet
    for net in subnets:
        if net is not None and net.overlaps(u):
            msg = (f"the underlay subnet {u} overlaps the lab's subnet {net}; choose an "
                   "underlay outside the lab's address plan")
            raise lab.doc.error(msg, ("underlay", "subnet")) if lab.doc is not None \
                else SpecError(msg, file=lab.source, place="underlay.subnet")


def is_hosted(lab: Lab, spec: LinkSpec) -> bool:
    """True for a link joined in host contexts (see the module's model)."""
    if not lab.hosts:
        return False
    a, b = (lab.nodes[ep.node] for ep in spec.endpoints)
    return a.host != b.host or spec.attach is not None or spec.rate is not None


def crosses(lab: Lab, spec: LinkSpec) -> bool:
    a, b = (lab.nodes[ep.node] for ep in spec.endpoints)
    return a.host != b.host


def allocate_cpus(wanted: list[int | None], online: list[int]) -> list[list[int]]:
    """Each host's CPUs: all of them when it asks for none, else its count in turn."""
    out: list[list[int]] = []
    nxt = 0
    for n in wanted:
        if n is None or n >= len(online):
            out.append(list(online))
            continue
        got = sorted({online[(nxt + k) % len(online)] for k in range(n)})
        nxt = (nxt + n) % len(online)
        out.append(got)
    return out


def plan_hosts(lab: Lab, online_cpus: list[int]) -> tuple[list[HostPlan], UnderlayPlan]:
    """The hosts and the underlay of a lab with hosts."""
    assert lab.underlay is not None
    subnet: IPv4Network = lab.underlay.subnet
    given = {h.address for h in lab.hosts.values() if h.address is not None}
    free = (a for a in subnet.hosts() if a not in given)
    cpus = allocate_cpus([h.cpus for h in lab.hosts.values()], online_cpus or [0])
    hosts = []
    for k, ((name, h), c) in enumerate(zip(lab.hosts.items(), cpus)):
        addr = h.address if h.address is not None else next(free)
        hosts.append(HostPlan(name, names.host_netns(lab.name, name),
                              str(IPv4Interface(f"{addr}/{subnet.prefixlen}")), UNDERLAY_IF,
                              names.host_cgroup(lab.name, name), c, h.memory, h.ssh is None,
                              [n for n, s in lab.nodes.items() if s.host == name], f"h{k}"))
    base = lab.underlay.mtu
    tunnels = [lk for lk in lab.links if is_hosted(lab, lk) and crosses(lab, lk)]
    explicit = [lk.mtu for lk in tunnels if lk.mtu is not None]
    need = max(explicit, default=0) + VXLAN_OVERHEAD
    if need > base:
        mtu, note = need, (f"underlay raised from {base} to {need} to carry the inner MTU "
                           f"{need - VXLAN_OVERHEAD} plus VXLAN's {VXLAN_OVERHEAD} bytes")
    else:
        mtu, note = base, (f"tunnels without an 'mtu' get {base - VXLAN_OVERHEAD}: the underlay's "
                           f"{base} less VXLAN's {VXLAN_OVERHEAD} bytes")
    underlay = UnderlayPlan(names.netns_name(lab.name, names.UNDERLAY_NODE), "br0", str(subnet),
                            mtu, note)
    return hosts, underlay


def refit(plan: Plan) -> None:
    """After the SFC planner gave interfaces on chain paths room for labels: each hosted link
    carries the largest MTU of its ends, and the (emulated) underlay is raised to carry it."""
    u = plan.underlay
    if u is None:
        return
    mtu_of = {(i.link, i.node): i.mtu for i in plan.interfaces}
    for hl in plan.host_links:
        need = max([hl.mtu] + [mtu_of.get((hl.link, e.node)) or 0 for e in hl.ends])
        hl.mtu = need
        if hl.vni is not None and need + VXLAN_OVERHEAD > u.mtu:
            u.mtu = need + VXLAN_OVERHEAD
            u.mtu_note = (f"underlay raised to {u.mtu} to carry the inner MTU {need} (chain "
                          f"label room included) plus VXLAN's {VXLAN_OVERHEAD} bytes")


def inner_mtu(underlay: UnderlayPlan, spec: LinkSpec) -> int:
    return spec.mtu if spec.mtu is not None else underlay.mtu - VXLAN_OVERHEAD


def host_link(lab: Lab, hosts: list[HostPlan], underlay: UnderlayPlan, link: int, ordinal: int,
              node_ifs: list[str]) -> HostLinkPlan:
    """The host-context side of hosted link ``link`` (``ordinal``: its place among tunnels, for
    the VNI); ``node_ifs`` are the node-side interface names of its two ends."""
    spec = lab.links[link]
    by_name = {h.name: h for h in hosts}
    attach = spec.attach or DEFAULT_ATTACH
    cross = crosses(lab, spec)
    ends = []
    for j, ep in enumerate(spec.endpoints):
        node = lab.nodes[ep.node]
        assert node.host is not None
        h = by_name[node.host]
        other = by_name[lab.nodes[spec.endpoints[1 - j].node].host or ""]
        end = HostEndPlan(ep.node, h.name, h.netns, "" if attach == "direct" else f"p{link}e{j}",
                          names.netns_name(lab.name, ep.node), node_ifs[j])
        if cross:
            end.vxlan = f"vx{link}"
            end.local = str(IPv4Interface(h.address).ip)
            end.remote = str(IPv4Interface(other.address).ip)
        if attach == "bridge":
            end.joiner = f"br{link}"
        elif attach in ("ovs", "hybrid"):
            end.joiner = f"ovs{link}"
        if attach == "hybrid":
            end.hybrid = {"qbr": f"qbr{link}e{j}", "qvb": f"qvb{link}e{j}",
                          "qvo": f"qvo{link}e{j}"}
        ends.append(end)
    mtu = inner_mtu(underlay, spec) if cross else (spec.mtu or 1500)
    return HostLinkPlan(link, attach, mtu, ends, VNI_BASE + ordinal if cross else None,
                        spec.rate, lab.link_spaces[link] if lab.link_spaces else None)
