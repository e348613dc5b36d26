"""``veth``: a veth pair, the form of every link that no other form claims.

Each end is created directly in its namespace (one rtnetlink batch for the whole lab).  An end on
an OVS bridge lives in the root namespace as a port of that bridge: it is born in the lab's
*staging* namespace, marked there with its alias, and only then moved to the root namespace, so
a crash at any moment leaves either an interface inside a lab namespace or a marked one in the
root.  Root ends are journaled and removed at ``down`` only if they still carry the mark.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from ...kernel import netns, ovs
from ...plan.model import InterfacePlan, OvsPortPlan, VethPlan
from ...plan.names import STAGING_NODE, netns_name
from .. import ownership
from ..step import step
from ..nodes.namespace import BASE_SYSCTLS
from .base import LinkForm, configure_interface

if TYPE_CHECKING:
    from ...plan.build import Planner
    from ...plan.model import Plan
    from ...spec.lab import LinkSpec
    from ..build import Builder
    from ..state import LabState
    from ..teardown import TeardownReport


class Veth(LinkForm):
    name = "veth"
    teardown_rank = 30

    def plan_link(self, p: Planner, link: int, spec: LinkSpec) -> dict[int, InterfacePlan]:
        ends = []
        for j, ep in enumerate(spec.endpoints):
            node = p.lab.nodes[ep.node]
            if node.attachment != "ovs-bridge":
                ends.append(p.namespace_end(link, j, self.name))
                continue
            br = p.ovs_bridge(node.name)
            name = p.root_name("v")
            br.ports.append(OvsPortPlan(name, "system", node.name, link=link))
            ends.append(InterfacePlan(node.name, None, name, link, spec.endpoints[1 - j].node,
                                      self.name, mtu=spec.mtu, offloads=dict(ep.offloads()),
                                      master=br.name, alias=p.alias(node.name, link)))
        p.plan.veths.append(VethPlan(link, ends[0], ends[1]))
        p.plan.interfaces.extend(ends)
        p.fit_to_ovs(ends)
        return dict(enumerate(ends))

    @staticmethod
    def root_ends(plan: Plan) -> list[InterfacePlan]:
        return [i for v in plan.veths for i in (v.a, v.b) if i.netns is None]

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        roots = self.root_ends(plan)
        if not roots:
            return []
        return ([{"op": "netns", "name": netns_name(plan.lab, STAGING_NODE)}]
                + [{"op": "link", "name": i.name, "alias": i.alias} for i in roots])

    def namespaces(self, b: Builder) -> None:
        if self.root_ends(b.plan):
            b.open_namespace(netns_name(b.plan.lab, STAGING_NODE), BASE_SYSCTLS, iproute=True)
            # each end keeps the index it is made with when it moves to the root namespace if
            # that index is free there, so the lab's count starts above the root's
            b.count_above(None, None)

    def links(self, b: Builder) -> None:
        stage = netns_name(b.plan.lab, STAGING_NODE)
        for v in b.plan.veths:
            x, y = v.a, v.b
            b.link_batch.veth(x.name, b.fds[x.netns or stage], y.name, b.fds[y.netns or stage],
                              f"veth {x.netns or 'root'}/{x.name} - {y.netns or 'root'}/{y.name}",
                              mtu=x.mtu, peer_mtu=y.mtu,
                              index=b.created(x.netns or stage, x.name),
                              peer_index=b.created(y.netns or stage, y.name))

    def after_links(self, b: Builder) -> None:
        """Mark each root-bound end (born in the staging namespace), then move it to the root
        namespace; the staging namespace goes when all have moved."""
        roots = self.root_ends(b.plan)
        if not roots:
            return
        stage = netns_name(b.plan.lab, STAGING_NODE)
        ipr = b.ipr[stage]
        for end in roots:
            with step(f"veth end {end.name} into the root namespace"):
                ipr.link("set", ifname=end.name, ifalias=end.alias)
                root_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
                try:
                    ipr.link("set", ifname=end.name, net_ns_fd=root_fd)
                finally:
                    os.close(root_fd)
        b.close_namespace(stage)

    def ovs(self, b: Builder) -> None:
        for end in self.root_ends(b.plan):
            b.ovs_commands.append(["add-port", end.master or "", end.name])
            b.ovs_commands.append(["set", "interface", end.name,
                                   f"external_ids:{ovs.MARK}={b.plan.lab}"])

    def configure(self, b: Builder) -> None:
        for i in self.interfaces(b.plan):
            configure_interface(b, i, set_mtu=False, enslave=True)  # veths are created with their MTU

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        links = [e for e in journal if e.get("op") == "link"]
        if not links:
            return
        from pyroute2 import IPRoute  # light start-up: pyroute2 only for labs with root ends

        with IPRoute() as ipr:
            for e in links:
                idx = ipr.link_lookup(ifname=e["name"])
                if not idx:
                    continue
                msg = ipr.get_links(idx[0])[0]
                if msg.get_attr("IFLA_IFALIAS") != e.get("alias"):
                    report.errors.append(f"interface {e['name']} lacks the lab's mark; left alone")
                    continue
                with contextlib.suppress(Exception):
                    ipr.link("del", index=idx[0])
                    report.links += 1

    def teardown_joined(self, state: LabState, plan: Plan, joined: set[str],
                        report: TeardownReport) -> None:
        """The ends of the change's veths in the lab's namespaces it joined (an added node's
        link at its attach node), deleted at once: the namespace of the other end goes too,
        but the kernel frees it later and the end's name would stay taken meanwhile.  Each only
        while its namespace carries the lab's mark and the end the alias the plan gave it."""
        by_ns: dict[str, list[InterfacePlan]] = {}
        for v in plan.veths:
            for end in (v.a, v.b):
                if end.netns in joined:
                    by_ns.setdefault(end.netns, []).append(end)
        for ns, ends in by_ns.items():
            ino, why = ownership.namespace_problem(state.name, ns)
            if why:
                report.errors.append(f"namespace {ns}: {why}; its links left alone")
                continue
            if ino is None:
                continue  # absent (or on another host): nothing of it is here
            ipr = netns.iproute(ns)
            try:
                for end in ends:
                    idx = ipr.link_lookup(ifname=end.name)
                    if not idx:
                        continue
                    alias = ipr.get_links(idx[0])[0].get_attr("IFLA_IFALIAS")
                    if end.alias is None or alias != end.alias:
                        report.errors.append(f"interface {ns}/{end.name} lacks the lab's mark "
                                             f"(alias {alias!r}); left alone")
                        continue
                    ipr.link("del", index=idx[0])
                    report.links += 1
            except Exception as e:  # keep removing the rest
                report.errors.append(f"links in namespace {ns}: {e}")
            finally:
                ipr.close()
