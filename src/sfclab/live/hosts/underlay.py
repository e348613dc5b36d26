"""The underlay for added instances' tunnels (:mod:`sfclab.plan.tunnels`) on a running lab.

A lab file with hosts has an underlay (a Linux bridge in ``sfclab:<lab>:-underlay``) and its
hosts are joined to it.  What a running lab lacks is made on first need as a change of the
running lab (:func:`join_change`: the underlay and the host as plan objects), journaled and
made by the hosts' part of the build engine of ``up`` (:mod:`sfclab.realize.hosts` through
:mod:`sfclab.realize.change`), so ``down`` removes it (after a ``kill -9`` too):

- an underlay, when the lab file names no hosts: namespace ``sfclab:<lab>:-underlay``, bridge
  ``br0``, subnet ``UNDERLAY_SUBNET`` (clear of the lab's addresses, else refused), MTU the
  labelled MTU plus VXLAN's 50 bytes;
- a context namespace ``sfclab:<lab>:@local`` for the implicit host ``local`` (the machine
  itself: its root namespace is never touched);
- for a host ``host add`` made (or ``local``), a veth ``ul0`` in its context to ``ua<n>``
  (``n``: its address's last byte) on the underlay's bridge, with the lowest free address of
  the underlay's subnet, marked ``sfclab:<lab>:@<host>:underlay`` as ``up`` marks a host's.
  The contexts and the underlay the lab has already are joined (mark checked), never made.

What was made is recorded in ``underlay.json`` in the lab's state directory; everything lives
in lab namespaces, so removing them removes it.  ``host rm`` drops the host's record.

:func:`tunnel` joins an added instance's two hosts and gives its hosted link their underlay
addresses; the link itself is a plan object of the change that adds the instance, made and
removed by the hosted links' part of the build engine (:mod:`sfclab.realize.links.hosted`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network
from typing import Any

from ...errors import LabError
from ...kernel import netns
from ...plan import tunnels as plan_tunnels
from ...plan.chainadd import NewNode
from ...plan.model import HostLinkPlan, HostPlan, Plan, UnderlayPlan
from ...plan.names import UNDERLAY_NODE, host_netns, netns_name
from ...plan.tunnels import LOCAL, attach_host
from ...realize import change, ownership
from ...realize.hosts import underlay_mark
from ...realize.state import LabState

UNDERLAY_SUBNET = "198.19.128.0/24"
UNDERLAY_IF = "ul0"
BRIDGE = "br0"
VXLAN_PORT = 4789
MADE_NOTE = "made for tunnels of added instances: the labelled MTU plus VXLAN's 50 bytes"


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


def _underlay(plan: Plan, d: dict[str, Any], labelled_mtu: int) -> tuple[UnderlayPlan, bool]:
    """The underlay a host joins, and whether the running lab has it already: the lab file's,
    the one made for an earlier tunnel, or (pure: made by the caller's change) a new one."""
    if plan.underlay is not None:
        return plan.underlay, True
    if d["underlay"]:
        u = d["underlay"]
        return UnderlayPlan(u["netns"], u["bridge"], u["subnet"], int(u["mtu"]), MADE_NOTE,
                            VXLAN_PORT), True
    net = IPv4Network(UNDERLAY_SUBNET)
    for i in plan.interfaces:
        if i.address and IPv4Interface(i.address).network.overlaps(net):
            raise LabError(f"cannot make an underlay for tunnels: its subnet {net} "
                           f"overlaps {i.netns}/{i.name}'s address {i.address}")
    return UnderlayPlan(netns_name(plan.lab, UNDERLAY_NODE), BRIDGE, str(net),
                        labelled_mtu + 50, MADE_NOTE, VXLAN_PORT), False


def join_change(state: LabState, plan: Plan, host: str,
                labelled_mtu: int) -> tuple[Plan, set[str], Joined]:
    """``host``'s join to the underlay as a change of the running lab (pure of side effects):
    the change (the underlay, and the host with its address, ``ul0`` and the underlay's port
    ``ua<n>``), the namespaces of the running lab it adds to (joined, not made), and what a
    tunnel end needs of it.  The implicit host ``local`` gets a context of its own (made by
    the change unless it is there), never a cgroup; an added host's cgroup is the lab's
    already (``cgroup`` empty in the change)."""
    hp = next((h for h in plan.hosts if h.name == host), None)
    d = _load(state)
    u, have = _underlay(plan, d, labelled_mtu)
    net = IPv4Network(u.subnet)
    taken = {str(IPv4Interface(h.address).ip) for h in plan.hosts if h.address}
    taken |= {str(IPv4Interface(j["address"]).ip) for j in d["hosts"].values()}
    ip = next((a for a in net.hosts() if str(a) not in taken), None)
    if ip is None:
        raise LabError(f"the underlay {net} has no free address for host '{host}'")
    ctx = hp.netns if hp is not None else host_netns(plan.lab, host)
    if hp is None:
        assert host == LOCAL
    address = f"{ip}/{net.prefixlen}"
    joining = HostPlan(host, ctx, address, UNDERLAY_IF, "", [], None, True, [],
                       f"ua{ip.packed[-1]}")
    joined = {u.netns} if have else set()
    if hp is not None or netns.exists(ctx):
        joined.add(ctx)
    change = Plan(plan.lab, plan.tag, hosts=[joining], underlay=u)
    return change, joined, Joined(host, ctx, address, UNDERLAY_IF)


def join(state: LabState, plan: Plan, host: str, labelled_mtu: int) -> Joined:
    """``host``'s context joined to the underlay: the change of :func:`join_change`,
    journaled and made by the hosts' part of the build engine of ``up``
    (:mod:`sfclab.realize.change`; its underlay namespace, ``local``'s context, the veth
    from the host's ``ul0`` to the underlay's bridge with its address and mark), unless it
    is joined already.  On a failure what the change made is taken out and the error raised
    naming the object."""
    hp = next((h for h in plan.hosts if h.name == host), None)
    if hp is not None and not hp.emulated:
        raise LabError(f"host '{host}' is reached over SSH: tunnels of added instances are "
                       "made between emulated hosts only")
    if hp is not None and hp.address:
        return Joined(host, hp.netns, hp.address, hp.underlay_if)
    d = _load(state)
    if host in d["hosts"]:
        return Joined(**d["hosts"][host])
    made, joined, j = join_change(state, plan, host, labelled_mtu)
    change.journal(state, made, joined)
    try:
        change.make(state, plan, made, joined=joined)
    except BaseException:
        _undo(plan.lab, made, joined)
        raise
    u = made.underlay
    assert u is not None
    if d["underlay"] is None and plan.underlay is None:
        d["underlay"] = {"netns": u.netns, "bridge": u.bridge, "subnet": u.subnet,
                         "mtu": u.mtu, "own": True}
    d["hosts"][host] = j.__dict__
    _save(state, d)
    return j


def _undo(lab: str, made: Plan, joined: set[str]) -> None:
    """Take out what a failed join made: its namespaces (each once its mark is checked; their
    veths go with them), else the host's ``ul0`` in its joined context, only if it carries the
    mark the change gives it (one of that name without it is not the change's: left)."""
    u = made.underlay
    assert u is not None
    gone = False
    for ns in [u.netns, *(h.netns for h in made.hosts)]:
        if ns in joined:
            continue
        ino, _ = ownership.namespace_problem(lab, ns)
        if ino is not None:
            netns.delete(ns, ino)
            gone = True
    if gone:
        return
    for h in made.hosts:  # both ends joined: the veth between them is the change's own
        with contextlib.suppress(Exception):
            ipr = netns.iproute(h.netns)
            try:
                idx = ipr.link_lookup(ifname=h.underlay_if)
                alias = ipr.get_links(idx[0])[0].get_attr("IFLA_IFALIAS") if idx else None
                if idx and alias == underlay_mark(lab, h.name):
                    ipr.link("del", index=idx[0])
            finally:
                ipr.close()


def tunnel(state: LabState, plan: Plan, n: NewNode, labelled_mtu: int) -> HostLinkPlan | None:
    """The two hosts of ``n``'s tunnel joined to the underlay (made on first need,
    journaled) and its hosted link with their contexts and underlay addresses; None when
    ``n`` is on its attach node's host."""
    if n.vni is None:
        return None
    ends = [join(state, plan, attach_host(plan, n.attach), labelled_mtu),
            join(state, plan, n.host, labelled_mtu)]
    return plan_tunnels.host_link(plan, n, [(j.host, j.netns, j.address) for j in ends])
