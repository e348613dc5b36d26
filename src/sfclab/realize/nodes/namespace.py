"""What every node with a namespace of its own shares: hosts, functions and Linux bridges.

Its namespace is made with the lab's base sysctls written inside (no IPv6 chatter in counters,
TTL 255 so long chains pass traffic; forwarding nodes also get ``ip_forward``), or in a lab of
``ip: 6`` or ``dual`` the IPv6 ones (:func:`lab_sysctls`: IPv6 on, no duplicate address
detection, no router advertisements or solicitations, hop limit 255, IPv6 forwarding in
forwarding nodes), always inside the lab's namespace, never the root's; journaled by
name, marked as it is made (``lo``'s alias is its name: :func:`sfclab.kernel.netns.marked`,
what ``down`` checks before it deletes it), brought up (``lo``) in stage 6, and shown by
``inspect`` with its interfaces and routes.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any, ClassVar

from ...kernel import ethtool, netns
from ...plan.containers import container_plan
from ...plan.model import NamespacePlan
from ..part import Part

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pyroute2 import IPRoute

    from ...plan.build import Planner
    from ...plan.model import Plan
    from ...spec.lab import NodeSpec
    from ..build import Builder
    from ..state import LabState

#: written inside every lab namespace at creation: no IPv6 chatter (RA, DAD, MLD) in counters
#: and a default TTL of 255, so chains of hundreds of routers still pass traffic (``router``'s
#: ``ttl`` overrides it)
BASE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1",
                "net.ipv4.ip_default_ttl": "255"}
FORWARDING_SYSCTLS = {"net.ipv4.ip_forward": "1"}
#: in place of BASE_SYSCTLS's IPv6 keys in a lab of ``ip: 6`` or ``dual``: IPv6 on, addresses
#: usable at once (no DAD; sfclab also adds them ``nodad``), no router advertisements taken or
#: solicited (routes are the plan's), hop limit 255 like the IPv4 TTL
IPV6_SYSCTLS = {f"net.ipv6.conf.{scope}.{key}": value
                for scope in ("all", "default")
                for key, value in (("disable_ipv6", "0"), ("accept_dad", "0"), ("accept_ra", "0"),
                                   ("router_solicitations", "0"), ("hop_limit", "255"))}
FORWARDING6_SYSCTLS = {"net.ipv6.conf.all.forwarding": "1",
                       "net.ipv6.conf.default.forwarding": "1"}
_IFF_UP = 1


class NamespaceNode(Part):
    """A node kind whose nodes each live in a namespace ``sfclab:<lab>:<node>``."""

    attachment: ClassVar[str] = "namespace"
    has_namespace: ClassVar[bool] = True
    forwards: ClassVar[bool] = False
    sfc_program: ClassVar[str | None] = None
    #: the address families its nodes carry (function kinds: their class's ``families``)
    families: ClassVar[tuple[int, ...]] = (4, 6)
    #: how ``graph`` draws it: mermaid brackets, Graphviz shape
    mermaid: ClassVar[tuple[str, str]] = ('("', '")')
    dot: ClassVar[str] = "ellipse"

    # --- validation and planning -----------------------------------------------------------
    def params_model(self) -> type[BaseModel]:
        raise NotImplementedError

    def params_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        return raw

    def plan_node(self, p: Planner, node: NodeSpec) -> None:
        p.plan.namespaces.append(NamespacePlan(node.name, p.netns(node.name), self.name,
                                               self.forwards))
        if node.image is not None:  # its container: started by sfclab.realize.containers
            p.plan.containers.append(container_plan(p.plan.lab, node.name, p.netns(node.name),
                                                    node.image))

    def mine(self, plan: Plan) -> list[NamespacePlan]:
        return [ns for ns in plan.namespaces if ns.kind == self.name]

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        return [{"op": "netns", "name": ns.name} for ns in self.mine(plan)]

    # --- building --------------------------------------------------------------------------
    def namespaces(self, b: Builder) -> None:
        for ns in self.mine(b.plan):
            b.open_namespace(ns.name, lab_sysctls(b.plan.families, ns.forwards))

    def configure(self, b: Builder) -> None:
        for ns in self.mine(b.plan):
            b.batch(ns.name).link(1, f"interface {ns.name}/lo")

    # --- inspection ------------------------------------------------------------------------
    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        for ns in self.mine(plan):
            entry: dict[str, Any] = {"kind": ns.kind, "netns": ns.name,
                                     "present": netns.exists(ns.name)}
            if entry["present"]:
                ipr = netns.iproute(ns.name)
                try:
                    entry["forwarding"] = netns.read_sysctl(ns.name, "net.ipv4.ip_forward") == "1"
                    if 6 in plan.families:
                        entry["forwarding6"] = netns.read_sysctl(
                            ns.name, "net.ipv6.conf.all.forwarding") == "1"
                    entry["interfaces"] = _interfaces(ipr, ns.name)
                    entry["routes"] = _routes(ipr)
                finally:
                    ipr.close()
            nodes[ns.node] = entry


def lab_sysctls(families: tuple[int, ...], forwards: bool) -> dict[str, str]:
    """The sysctls written inside a lab namespace: the base ones, IPv6's in a lab that carries
    IPv6, and forwarding of each family the lab carries for a node that forwards."""
    sysctls = dict(BASE_SYSCTLS)
    if 6 in families:
        sysctls.update(IPV6_SYSCTLS)
    if forwards:
        sysctls.update(FORWARDING_SYSCTLS)
        if 6 in families:
            sysctls.update(FORWARDING6_SYSCTLS)
    return sysctls


def _interfaces(ipr: IPRoute, ns: str) -> list[dict[str, Any]]:
    addrs: dict[int, list[str]] = {}
    addrs6: dict[int, list[str]] = {}
    for a in ipr.get_addr(family=2):
        addrs.setdefault(a["index"], []).append(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
    for a in ipr.get_addr(family=10):
        if a["scope"] == 0:  # global: the lab's; link-local ones (scope 253) are the kernel's
            addrs6.setdefault(a["index"], []).append(
                f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
    links = list(ipr.get_links())
    names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in links}
    out = []
    for m in links:
        name = m.get_attr("IFLA_IFNAME")
        if name == "lo":
            continue
        info = m.get_attr("IFLA_LINKINFO")
        d = {"name": name, "state": "up" if m["flags"] & _IFF_UP else "down",
             "mtu": m.get_attr("IFLA_MTU"), "mac": m.get_attr("IFLA_ADDRESS"),
             "addresses": addrs.get(m["index"], []),
             **({"addresses6": addrs6[m["index"]]} if m["index"] in addrs6 else {}),
             "kind": info.get_attr("IFLA_INFO_KIND") if info else None,
             "alias": m.get_attr("IFLA_IFALIAS"),
             "master": names.get(m.get_attr("IFLA_MASTER"))}
        with contextlib.suppress(OSError):
            with netns.entered(ns):
                d["offloads"] = ethtool.get_offloads(name)
        out.append(d)
    return sorted(out, key=lambda d: _name_order(d["name"]))


def _name_order(name: str) -> list[tuple[int, int | str]]:
    """Interfaces in name order, numbers as numbers (eth2 before eth10): the same order
    whichever way a lab was built (the kernel's indexes are the build's choice)."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p]


def _routes(ipr: IPRoute) -> list[dict[str, Any]]:
    """The main table's IPv4 routes, then its IPv6 routes to global prefixes (a gateway or a
    global destination: not the kernel's link-local and multicast ones); IPv6 rows say
    ``"family": 6`` and the default is ``default6``."""
    names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
    out = []
    for r in ipr.get_routes(family=2, table=254):
        dst = r.get_attr("RTA_DST")
        out.append({"dst": f"{dst}/{r['dst_len']}" if dst else "default",
                    "gateway": r.get_attr("RTA_GATEWAY"), "dev": names.get(r.get_attr("RTA_OIF"))})
    for r in ipr.get_routes(family=10, table=254):
        dst = r.get_attr("RTA_DST")
        if r["type"] != 1 or (dst and dst.lower().startswith(("fe80:", "ff"))):
            continue  # local, multicast and link-local: the kernel's own
        out.append({"dst": f"{dst}/{r['dst_len']}" if dst else "default6",
                    "gateway": r.get_attr("RTA_GATEWAY"), "dev": names.get(r.get_attr("RTA_OIF")),
                    "family": 6})
    return out
