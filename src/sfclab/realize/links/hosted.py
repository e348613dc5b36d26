"""``hosted``: a link joined in host contexts (labs with ``hosts``; see :mod:`sfclab.plan.hosts`).

Each end is a veth between the node (``eth<N>`` as always) and its host's context (``p<link>e<end>``
there), created in the lab's shared rtnetlink batch.  Then, in each host context, the link's
VXLAN device (across hosts: VNI from the plan, over the underlay interface) is made from inside
the context, so its UDP socket lives there and never in this machine's root namespace; the
link's attach kind (:mod:`sfclab.hosts.attach`) joins ports and tunnel; a ``rate`` is shaped
on each port toward its node (:mod:`sfclab.hosts.shaping`).  Everything of a hosted link lives
in lab namespaces, so removing them removes it.

The same stages make the links of function instances added to a running lab across hosts
(``chain add``/``migrate``; planned in :mod:`sfclab.plan.tunnels`), as a change of the build
engine (:mod:`sfclab.realize.change`): their host contexts are then the running lab's (joined)
or a real host's root namespace, which outlive the change, so :func:`join_context` marks every
device it makes there (port, tunnel, bridge: ``sfclab:<lab>:@<host>:<dev>``), a real host's
are journaled as at ``up``, and the change's removal (:meth:`Hosted.teardown_joined`) deletes
each only while it carries that mark (:func:`remove_live_end`), on this machine and in a real
host's agent for its end alike.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import RealizeError
from ...hosts import ovs, shaping
from ...hosts.attach import ATTACH_KINDS, Joint, shortbridge_binary, tunnel_mark
from ...hosts.context import EmulatedHost
from ...kernel import netns
from ...plan import hosts as plan_hosts
from ...plan.model import InterfacePlan
from .. import hosts as realize_hosts, ownership
from ..step import step
from .base import LinkForm, configure_interface

if TYPE_CHECKING:
    from pyroute2 import IPRoute

    from ...hosts.context import HostContext
    from ...plan.build import Planner
    from ...plan.model import HostEndPlan, HostLinkPlan, Plan
    from ...spec.kinds import Locate
    from ...spec.lab import LinkSpec, NodeSpec
    from ..build import Builder
    from ..state import LabState
    from ..teardown import TeardownReport


def context_mark(lab: str, host: str, name: str) -> str:
    return f"sfclab:{lab}:@{host}:{name}"


def context_devices(hl: HostLinkPlan, e: HostEndPlan) -> list[str]:
    """The devices a hosted link makes in host ``e.host``'s context itself (not in a node):
    its tunnel (unless it goes into the node) and its Linux bridge."""
    out = []
    kind = ATTACH_KINDS[hl.attach]
    if e.vxlan and kind.kernel_tunnel and not kind.in_node:
        out.append(e.vxlan)
    if hl.attach == "bridge" and e.joiner:
        out.append(e.joiner)
    return out


def context_devices_at(hl: HostLinkPlan, here: list[HostEndPlan]) -> list[str]:
    """:func:`context_devices` of a host's ends ``here``, and each end's hybrid plug (its Linux
    bridge ``qbr`` and its veth ``qvb``, whose peer ``qvo`` goes with it)."""
    out = context_devices(hl, here[0])
    for e in here:
        if hl.attach == "hybrid" and e.hybrid:
            out += [e.hybrid["qbr"], e.hybrid["qvb"]]
    return out


#: the daemons of a host's own OVS (their pid files in its directory)
OVS_DAEMONS = ("ovs-vswitchd", "ovsdb-server")


def join_context(ctx: HostContext, ipr: IPRoute, hl: HostLinkPlan, here: list[HostEndPlan],
                 *, lab: str, underlay_if: str, vxlan_port: int, odir: Path,
                 xdp_nodes: bool, real: bool) -> None:
    """One host's side of hosted link ``hl`` in its context (``here``: its ends there, ports
    already made): ports up (GRO on where XDP-redirected frames arrive), across hosts the
    link's VXLAN device toward the other host's underlay address (no learning), the attach
    kind joining ports and tunnel, with ``real`` (a context that outlives what is built now: a
    real host's root namespace, or a running lab's context a change joined) the marks teardown
    checks on ports, tunnel and bridges, and the rate.  The one path for every tunnel of a
    lab: the lab file's hosted links at ``up`` and the links of instances ``chain
    add``/``migrate`` make on a running lab."""
    e0 = here[0]

    def mark(devices: list[str]) -> None:  # each as soon as it exists: what teardown checks
        for n in devices if real else []:
            idx = ipr.link_lookup(ifname=n)
            if idx:
                ipr.link("set", index=idx[0], ifalias=context_mark(lab, e0.host, n))

    mark([e.port for e in here if e.port])
    for e in here:
        if e.port:
            ipr.link("set", index=ipr.link_lookup(ifname=e.port)[0], state="up")
            if xdp_nodes:  # a veth takes XDP-redirected frames only with NAPI: GRO on
                ctx.set_offloads(e.port, {"gro": True})
    if e0.vxlan and ATTACH_KINDS[hl.attach].kernel_tunnel:
        ul = ipr.link_lookup(ifname=underlay_if)[0]
        ipr.link("add", ifname=e0.vxlan, kind="vxlan", vxlan_id=hl.vni, vxlan_local=e0.local,
                 vxlan_group=e0.remote, vxlan_port=vxlan_port, vxlan_link=ul,
                 vxlan_learning=0, mtu=hl.mtu)
        mark([e0.vxlan])
        if not ATTACH_KINDS[hl.attach].in_node:
            ipr.link("set", index=ipr.link_lookup(ifname=e0.vxlan)[0], state="up")
    ATTACH_KINDS[hl.attach].join(Joint(ctx, ipr, hl, here, lab, odir, xdp_nodes=xdp_nodes,
                                       underlay_if=underlay_if, udp_port=vxlan_port))
    mark(context_devices_at(hl, here))
    if hl.rate is not None:
        for e in here:
            shaping.shape(ctx, e.port, hl.rate, hl.mtu)


def remove_live_end(lab: str, hl: HostLinkPlan, e: HostEndPlan, ctx: HostContext) -> list[str]:
    """Delete end ``e``'s devices in context ``ctx`` (its port, tunnel and bridge), each only
    while it carries the mark :func:`join_context` gave it: a device of that name without it
    is not the lab's and is left, said so; absent ones are skipped.  The errors, if any."""
    errors = []
    try:
        ipr = ctx.iproute()
        try:
            for dev in [e.port, *context_devices(hl, e)]:
                idx = ipr.link_lookup(ifname=dev)
                if not idx:
                    continue
                alias = ipr.get_links(idx[0])[0].get_attr("IFLA_IFALIAS")
                if alias != context_mark(lab, e.host, dev):
                    errors.append(f"tunnel {hl.vni} in host {e.host}: interface {dev} does "
                                  f"not carry the lab's mark (alias {alias!r}); left alone")
                    continue
                ipr.link("del", index=idx[0])
        finally:
            ipr.close()
    except Exception as ex:  # keep removing the rest
        errors.append(f"tunnel {hl.vni} in host {e.host}: {ex}")
    return errors


class Hosted(LinkForm):
    name = "hosted"

    def selects(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> bool:
        return a.host is not None and (a.host != b.host or link.attach is not None
                                       or link.rate is not None)

    def check(self, link: LinkSpec, ends: tuple[NodeSpec, NodeSpec], at: Locate) -> None:
        if link.attach == "direct":
            if ends[0].host == ends[1].host:
                raise at("attach")("'direct' puts a tunnel's end in each node: the nodes must "
                                   "be on different hosts")
            if link.rate is not None:
                raise at("rate")("a link with 'attach: direct' has no host-context port to "
                                 "shape (the node holds the tunnel); remove 'rate' or use "
                                 "another attach kind")

    def plan_link(self, p: Planner, link: int, spec: LinkSpec) -> dict[int, InterfacePlan]:
        assert p.plan.underlay is not None
        ends = [p.namespace_end(link, j, self.name) for j in (0, 1)]
        ordinal = sum(1 for h in p.plan.host_links if h.vni is not None)
        hl = plan_hosts.host_link(p.lab, p.plan.hosts, p.plan.underlay, link, ordinal,
                                  [e.name for e in ends])
        for e in ends:
            e.mtu = hl.mtu
            for k, v in ATTACH_KINDS[hl.attach].node_offloads.items():
                e.offloads.setdefault(k, v)
        p.plan.interfaces.extend(ends)
        p.plan.host_links.append(hl)
        return dict(enumerate(ends))

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        """On a real host the context is the machine's root namespace, which outlives the lab:
        its ports, tunnels and bridges are journaled (``link`` with their mark) and removed by
        mark before the lab's namespaces go.  A port would go with its peer's namespace too,
        but the kernel frees a deleted namespace later, and until then the port stays in the
        host's root namespace.  Shortbridges go with the devices.  A
        real host's own OVS (``ovs``/``hybrid``) runs in that root namespace, so its daemons
        outlive every namespace of the lab: journaled (``host-ovs``, its directory) and ended
        by the PIDs of their pid files there (see :meth:`teardown`).  A shortbridged tunnel's
        decapsulation sits on the host's own underlay interface: journaled (``tcx-tunnel``)
        by its VNI and addresses, and taken off only if it carries the lab's mark."""
        real = {h.name: h for h in plan.hosts if not h.emulated}
        out: list[dict[str, Any]] = []
        ovs_hosts: list[str] = []
        for hl in plan.host_links:
            here: dict[str, list[HostEndPlan]] = {}
            for e in hl.ends:
                here.setdefault(e.host, []).append(e)
            out += [{"op": "link", "name": n, "alias": context_mark(plan.lab, h, n)}
                    for h, es in here.items() if h in real
                    for n in [e.port for e in es if e.port] + context_devices_at(hl, es)]
            if ATTACH_KINDS[hl.attach].needs_ovs:
                ovs_hosts += [h for h in here if h in real and h not in ovs_hosts]
            if ATTACH_KINDS[hl.attach].kernel_tunnel or hl.vni is None:
                continue
            # the tunnel's decapsulation sits on the host's own underlay interface, which
            # outlives the lab: it is taken off by its tunnel (VNI and addresses) and mark
            assert plan.underlay is not None
            out += [{"op": "tcx-tunnel", "dev": real[h].underlay_if, "vni": hl.vni,
                     "local": es[0].local, "remote": es[0].remote,
                     "udp_port": plan.underlay.vxlan_port}
                    for h, es in here.items() if h in real]
        return [{"op": "host-ovs", "host": h} for h in ovs_hosts] + out

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        """End a real host's own OVS: ``ovs-vswitchd`` is asked to exit deleting its datapath
        and devices (in the root namespace, they would outlive it); then the PIDs in the
        daemons' pid files in the host's OVS directory are ended, each only while it still
        runs that daemon with that directory.  Then the shortbridge's decapsulation programs
        of this lab's tunnels, off the underlay interface: each only if its load-time
        constants carry the tunnel's VNI and addresses and the lab's mark
        (:func:`sfclab.hosts.attach.tunnel_mark`, made from the lab's name, not the journal)."""
        self._end_host_ovs(state, journal, report)
        self._detach_tunnels(state.name, journal, report)

    @staticmethod
    def _end_host_ovs(state: LabState, journal: list[dict[str, Any]],
                      report: TeardownReport) -> None:
        for e in journal:
            if e.get("op") != "host-ovs":
                continue
            odir = realize_hosts.ovs_dir(state, e["host"])
            vswitchd = _owned_pid(odir / "ovs-vswitchd.pid", "ovs-vswitchd", odir)
            if vswitchd is not None:
                try:
                    cp = subprocess.run(ovs.exit_cleanup(odir), capture_output=True, text=True,
                                        timeout=20)
                except (OSError, subprocess.TimeoutExpired) as err:
                    report.errors.append(f"ovs-vswitchd of host {e['host']}: {err}")
                else:
                    if cp.returncode != 0:
                        report.errors.append(f"ovs-vswitchd of host {e['host']} did not clean "
                                             f"up: {cp.stderr.strip()[-200:]}")
                    _wait_gone(vswitchd, odir)
            daemon_of: dict[int, str] = {}
            for d in OVS_DAEMONS:
                pid = _owned_pid(odir / f"{d}.pid", d, odir)
                if pid is not None:
                    daemon_of[pid] = d
            report.processes += len(netns.end_processes(  # checked again once held by pidfd
                list(daemon_of), owned=lambda p: _owned_pid(
                    odir / f"{daemon_of[p]}.pid", daemon_of[p], odir) == p))

    @staticmethod
    def _detach_tunnels(lab: str, journal: list[dict[str, Any]], report: TeardownReport) -> None:
        for e in journal:
            if e.get("op") != "tcx-tunnel":
                continue
            argv = [str(shortbridge_binary()), "--netns", "-", "--detach", e["dev"], "--vni",
                    str(e["vni"]), "--local", e["local"], "--remote", e["remote"],
                    "--udp-port", str(e["udp_port"]), "--owner", tunnel_mark(lab, e["vni"])]
            cp = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
            if cp.returncode != 0:
                report.errors.append(f"tunnel {e['vni']} on {e['dev']}: {cp.stderr.strip()}")

    def links(self, b: Builder) -> None:
        mtu_of = {(i.netns, i.name): i.mtu for i in self.interfaces(b.plan)}
        if b.whole is not b.plan:
            self._names_free(b)
        for hl in b.plan.host_links:
            if ATTACH_KINDS[hl.attach].in_node:
                continue  # the tunnel device itself becomes the node's interface
            for e in hl.ends:
                b.link_batch.veth(e.node_if, b.fds[e.node_netns], e.port, b.fds[e.netns],
                                  f"veth {e.node_netns}/{e.node_if} - {e.netns}/{e.port}",
                                  mtu=mtu_of.get((e.node_netns, e.node_if)) or hl.mtu,
                                  peer_mtu=hl.mtu, index=b.created(e.node_netns, e.node_if),
                                  peer_index=b.created(e.netns, e.port))

    def _names_free(self, b: Builder) -> None:
        """A change adds to host contexts that outlive it: every device name its hosted links
        will use there must be free, or it is refused naming the device, before anything is
        made (the link batch would make some ports and fail on the taken name, and a port in
        a context with its peer at an attach node is not yet marked, so never removed)."""
        for host, items in self.by_host(b.plan).items():
            ctx, _, _ = self.end_host(b, host, items[0][1][0].netns)
            ipr = ctx.iproute()
            try:
                for hl, here in items:
                    for dev in [e.port for e in here if e.port] + context_devices_at(hl, here):
                        if ipr.link_lookup(ifname=dev):
                            raise RealizeError("the name is taken in the host's context",
                                               obj=f"interface {dev} of host {host}")
            finally:
                ipr.close()

    @staticmethod
    def by_host(plan: Plan) -> dict[str, list[tuple[HostLinkPlan, list[HostEndPlan]]]]:
        """Each host's hosted links with their ends on it."""
        out: dict[str, list[tuple[HostLinkPlan, list[HostEndPlan]]]] = {}
        for hl in plan.host_links:
            for h in dict.fromkeys(e.host for e in hl.ends):
                out.setdefault(h, []).append((hl, [e for e in hl.ends if e.host == h]))
        return out

    @staticmethod
    def end_host(b: Builder, host: str, ctx_ns: str) -> tuple[HostContext, str, bool]:
        """Host ``host`` of a hosted link's end, its context namespace ``ctx_ns``: its context,
        its underlay interface, and whether the context outlives what is built now (a real
        host's root namespace, or a context of the running lab a change joined), so that what
        is made there is marked.  A host no plan names is the implicit host ``local`` of a lab
        without hosts (an added instance's tunnel): its context is ``ctx_ns``."""
        hp = next((h for p in (b.plan, b.whole) for h in p.hosts if h.name == host), None)
        if hp is None:
            return EmulatedHost(host, ctx_ns), plan_hosts.UNDERLAY_IF, ctx_ns in b.joined
        ctx = realize_hosts.context(b.plan if hp in b.plan.hosts else b.whole, host)
        return (ctx, hp.underlay_if or plan_hosts.UNDERLAY_IF,
                not hp.emulated or ctx_ns in b.joined)

    def after_links(self, b: Builder) -> None:
        for host, items in self.by_host(b.plan).items():
            ctx, _, _ = self.end_host(b, host, items[0][1][0].netns)
            odir = realize_hosts.ovs_dir(b.state, host)
            if any(ATTACH_KINDS[hl.attach].needs_ovs for hl, _ in items):
                with step(f"Open vSwitch of host {host}"):
                    ovs.start(ctx, odir)
            ipr = ctx.iproute()
            try:
                for hl, here in items:
                    with step(f"link {hl.link} ({hl.attach}) in host {host}"):
                        self._join(b, ctx, ipr, hl, here, odir)
            finally:
                ipr.close()

    def prepare(self, b: Builder) -> None:
        """The attach kinds' last step, once the host contexts have their underlay addresses
        (the shortbridge's own tunnel end resolves the remote host's MAC address)."""
        if not b.plan.host_links:
            return
        xdp_nodes = b.whole.steering is not None
        for host, items in self.by_host(b.plan).items():
            ctx, underlay_if, _ = self.end_host(b, host, items[0][1][0].netns)
            odir = realize_hosts.ovs_dir(b.state, host)
            ipr = ctx.iproute()
            try:
                for hl, here in items:
                    with step(f"link {hl.link} ({hl.attach}) in host {host}: tunnel end"):
                        ATTACH_KINDS[hl.attach].finish(Joint(
                            ctx, ipr, hl, here, b.plan.lab, odir, xdp_nodes=xdp_nodes,
                            underlay_if=underlay_if, udp_port=vxlan_port(b)))
            finally:
                ipr.close()

    def _join(self, b: Builder, ctx: HostContext, ipr: IPRoute, hl: HostLinkPlan,
              here: list[HostEndPlan], odir: Path) -> None:
        _, underlay_if, outlives = self.end_host(b, here[0].host, here[0].netns)
        join_context(ctx, ipr, hl, here, lab=b.plan.lab, underlay_if=underlay_if,
                     vxlan_port=vxlan_port(b), odir=odir,
                     xdp_nodes=b.whole.steering is not None, real=outlives)

    def teardown_joined(self, state: LabState, plan: Plan, joined: set[str],
                        report: TeardownReport) -> None:
        """A change's hosted links (an added instance's tunnel): each end's devices in its
        host's context -- a context of the running lab the change joined (only while that
        namespace carries the lab's mark) or a real host's root namespace -- deleted each only
        while it carries the mark :func:`join_context` gave it (:func:`remove_live_end`); the
        port's peer, the node's end, goes with it."""
        named = {h.name for h in plan.hosts}
        for hl in plan.host_links:
            for e in hl.ends:
                if e.netns in joined:
                    ino, why = ownership.namespace_problem(state.name, e.netns)
                    if why:
                        report.errors.append(f"namespace {e.netns}: {why}; tunnel {hl.vni} "
                                             "left alone")
                        continue
                    if ino is None:
                        continue  # absent: nothing of it is left
                    ctx: HostContext = EmulatedHost(e.host, e.netns)
                elif e.host in named:  # a host the change names: its own context (an agent's)
                    ctx = realize_hosts.context(plan, e.host)
                else:
                    continue
                errors = remove_live_end(state.name, hl, e, ctx)
                report.errors += errors

    def configure(self, b: Builder) -> None:
        for i in self.interfaces(b.plan):
            configure_interface(b, i, set_mtu=False, enslave=True)  # created with their MTU


def vxlan_port(b: Builder) -> int:
    """The UDP port of the lab's tunnels: its underlay's, else VXLAN's own."""
    u = b.plan.underlay or b.whole.underlay
    return u.vxlan_port if u is not None else realize_hosts.VXLAN_PORT


def _wait_gone(pid: int, odir: Path, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while _owned_pid(odir / "ovs-vswitchd.pid", "ovs-vswitchd", odir) == pid and \
            time.monotonic() < deadline:
        time.sleep(0.05)


def _owned_pid(pidfile: Path, daemon: str, odir: Path) -> int | None:
    """The PID in ``pidfile`` if that process runs ``daemon`` with ``odir`` on its command
    line (so a reused PID is never ended), else ``None``."""
    try:
        pid = int(pidfile.read_text().split()[0])
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    ok = os.path.basename(argv[0].decode(errors="replace")) == daemon and \
        any(str(odir).encode() in a for a in argv)
    return pid if ok else None
