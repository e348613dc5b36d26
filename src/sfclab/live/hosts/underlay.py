"""The underlay for added instances' tunnels (:mod:`sfclab.plan.tunnels`) on a running lab.

A lab file with hosts has an underlay (a Linux bridge in ``sfclab:<lab>:-underlay``) and its
hosts are joined to it.  What a running lab lacks is made here on first need, each namespace
journaled before it is made, so ``down`` removes it (after a ``kill -9`` too):

- an underlay, when the lab file names no hosts: namespace ``sfclab:<lab>:-underlay``, bridge
  ``br0``, subnet ``UNDERLAY_SUBNET`` (clear of the lab's addresses, else refused), MTU the
  labelled MTU plus VXLAN's 50 bytes;
- a context namespace ``sfclab:<lab>:@local`` for the implicit host ``local`` (the machine
  itself: its root namespace is never touched);
- for a host ``host add`` made (or ``local``), a veth ``ul0`` in its context to ``ua<n>``
  (``n``: its address's last byte) on the underlay's bridge, with the lowest free address of the underlay's subnet.

What was made is recorded in ``underlay.json`` in the lab's state directory; everything lives
in lab namespaces, so removing them removes it.  ``host rm`` drops the host's record.

:func:`tunnel` joins an added instance's two hosts and plans its hosted link; the link itself
is made and removed by the lab's one hosted-link code (:mod:`sfclab.realize.links.hosted`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network
from typing import Any

from ...errors import LabError
from ...hosts.context import EmulatedHost, HostContext
from ...kernel import netns
from ...plan import tunnels as plan_tunnels
from ...plan.chainadd import NewNode
from ...plan.model import HostLinkPlan, Plan
from ...plan.names import UNDERLAY_NODE, host_netns, netns_name
from ...plan.tunnels import LOCAL, attach_host
from ...realize import ownership
from ...realize.links.hosted import remove_live
from ...realize.nodes.namespace import BASE_SYSCTLS
from ...realize.state import LabState
from ...realize.step import step

UNDERLAY_SUBNET = "198.19.128.0/24"
UNDERLAY_IF = "ul0"
BRIDGE = "br0"
VXLAN_PORT = 4789


@dataclass
class Joined:
    """A host's context and its address on the underlay (what a tunnel end needs)."""

    host: str
    netns: str
    address: str  # "198.19.128.1/24"
    underlay_if: str


def _path(state: LabState) -> Any:
    return state.dir / "underlay.json"


def _load(state: LabState) -> dict[str, Any]:
    try:
        return dict(json.loads(_path(state).read_text()))
    except (FileNotFoundError, ValueError):
        return {"underlay": None, "hosts": {}}


def _save(state: LabState, d: dict[str, Any]) -> None:
    tmp = _path(state).with_suffix(".tmp")
    tmp.write_text(json.dumps(d))
    os.replace(tmp, _path(state))


def underlay_mtu(state: LabState, plan: Plan, labelled_mtu: int) -> int:
    """The MTU tunnels of added instances travel over (pure of side effects)."""
    if plan.underlay is not None:
        return plan.underlay.mtu
    u = _load(state)["underlay"]
    return int(u["mtu"]) if u else labelled_mtu + 50


def forget_host(state: LabState, host: str) -> None:
    d = _load(state)
    if d["hosts"].pop(host, None) is not None:
        _save(state, d)


def _underlay(state: LabState, plan: Plan, d: dict[str, Any],
              labelled_mtu: int) -> dict[str, Any]:
    if plan.underlay is not None:
        pu = plan.underlay
        return {"netns": pu.netns, "bridge": pu.bridge, "subnet": pu.subnet, "mtu": pu.mtu,
                "own": False}
    if d["underlay"]:
        return dict(d["underlay"])
    net = IPv4Network(UNDERLAY_SUBNET)
    for i in plan.interfaces:
        if i.address and IPv4Interface(i.address).network.overlaps(net):
            raise LabError(f"cannot make an underlay for tunnels: its subnet {net} "
                           f"overlaps {i.netns}/{i.name}'s address {i.address}")
    u: dict[str, Any] = {"netns": netns_name(plan.lab, UNDERLAY_NODE), "bridge": BRIDGE, "subnet": str(net),
         "mtu": labelled_mtu + 50, "own": True}
    state.record([{"op": "netns", "name": u["netns"]}])
    d["underlay"] = u
    _save(state, d)
    with step(f"underlay {u['netns']}"):
        ipr = netns.create(u["netns"], BASE_SYSCTLS)
        assert ipr is not None
        try:
            ipr.link("add", ifname=BRIDGE, kind="bridge", mtu=u["mtu"])
            ipr.link("set", index=ipr.link_lookup(ifname=BRIDGE)[0], state="up")
            ipr.link("set", index=1, state="up")
        finally:
            ipr.close()
    return u


def join(state: LabState, plan: Plan, host: str, labelled_mtu: int) -> Joined:
    """``host``'s context joined to the underlay (made and journaled if it is not yet)."""
    hp = next((h for h in plan.hosts if h.name == host), None)
    if hp is not None and not hp.emulated:
        raise LabError(f"host '{host}' is reached over SSH: tunnels of added instances are "
                       "made between emulated hosts only")
    if hp is not None and hp.address:
        return Joined(host, hp.netns, hp.address, hp.underlay_if)
    d = _load(state)
    if host in d["hosts"]:
        return Joined(**d["hosts"][host])
    u = _underlay(state, plan, d, labelled_mtu)
    net = IPv4Network(u["subnet"])
    taken = {str(IPv4Interface(h.address).ip) for h in plan.hosts if h.address}
    taken |= {str(IPv4Interface(j["address"]).ip) for j in d["hosts"].values()}
    ip = next(a for a in net.hosts() if str(a) not in taken)
    ctx = hp.netns if hp is not None else host_netns(plan.lab, host)
    j = Joined(host, ctx, f"{ip}/{net.prefixlen}", UNDERLAY_IF)
    if hp is None:  # the implicit host 'local' gets a context of its own
        assert host == LOCAL
        state.record([{"op": "netns", "name": ctx}])
        if not netns.exists(ctx):
            with step(f"context of host {host}"):
                r = netns.create(ctx, BASE_SYSCTLS)
                assert r is not None
                r.close()
    peer = f"ua{ip.packed[-1]}"
    with step(f"underlay port of host {host}"):
        ul = netns.iproute(u["netns"])
        try:
            ul.link("add", ifname=peer, kind="veth", peer=UNDERLAY_IF)
            idx = ul.link_lookup(ifname=UNDERLAY_IF)[0]
            fd = os.open(netns.path(ctx), os.O_RDONLY | os.O_CLOEXEC)
            try:
                ul.link("set", index=idx, net_ns_fd=fd)
            finally:
                os.close(fd)
            p = ul.link_lookup(ifname=peer)[0]
            ul.link("set", index=p, mtu=u["mtu"],
                    master=ul.link_lookup(ifname=u["bridge"])[0])
            ul.link("set", index=p, state="up")
        finally:
            ul.close()
        c = netns.iproute(ctx)
        try:
            i = c.link_lookup(ifname=UNDERLAY_IF)[0]
            c.link("set", index=i, mtu=u["mtu"])
            c.addr("add", index=i, address=str(ip), prefixlen=net.prefixlen)
            c.link("set", index=i, state="up")
            c.link("set", index=1, state="up")
        finally:
            c.close()
    d["hosts"][host] = j.__dict__
    _save(state, d)
    return j


@dataclass
class Tunnel:
    """What the hosted-link code needs to make an added instance's tunnel on a running lab
    (:func:`sfclab.realize.links.hosted.make_live`)."""

    link: HostLinkPlan
    contexts: dict[str, HostContext]
    underlay_ifs: dict[str, str]
    vxlan_port: int


def tunnel(state: LabState, plan: Plan, n: NewNode, labelled_mtu: int) -> Tunnel | None:
    """The two hosts of ``n``'s tunnel joined to the underlay (made on first need,
    journaled) and its hosted link; None when ``n`` is on its attach node's host."""
    if n.vni is None:
        return None
    ends = [join(state, plan, attach_host(plan, n.attach), labelled_mtu),
            join(state, plan, n.host, labelled_mtu)]
    hl = plan_tunnels.host_link(plan, n, [(j.host, j.netns, j.address) for j in ends])
    return Tunnel(hl, {j.host: EmulatedHost(j.host, j.netns) for j in ends},
                  {j.host: j.underlay_if for j in ends},
                  plan.underlay.vxlan_port if plan.underlay is not None else VXLAN_PORT)


def contexts(plan: Plan, hosts: list[str]) -> dict[str, HostContext]:
    """The contexts of ``hosts`` that exist now (emulated: the lab's namespaces, each only if
    it carries the lab's mark: :mod:`sfclab.realize.ownership`)."""
    out: dict[str, HostContext] = {}
    for host in hosts:
        hp = next((h for h in plan.hosts if h.name == host), None)
        ns = hp.netns if hp is not None else host_netns(plan.lab, host)
        if ownership.namespace_problem(plan.lab, ns)[0] is not None:
            out[host] = EmulatedHost(host, ns)
    return out


def remove_tunnel(plan: Plan, n: NewNode) -> list[str]:
    """Delete ``n``'s tunnel devices in both contexts (those absent are skipped)."""
    if n.vni is None:
        return []
    hl = plan_tunnels.host_link_of(plan, n.node) or \
        plan_tunnels.host_link(plan, n, [(attach_host(plan, n.attach), "", None),
                                         (n.host, "", None)])
    return remove_live(hl, contexts(plan, [e.host for e in hl.ends]))
