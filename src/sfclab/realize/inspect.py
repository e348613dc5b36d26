"""``inspect``: what a lab is, read live from the kernel and OVSDB, as one JSON-ready dict.

For each namespace node: kind, namespace, forwarding, interfaces (state, MTU, MAC, addresses,
alias, master, offloads), routes, and the function's own ``inspect``; for each OVS bridge: its
name, datapath type (and why: no kernel module means the userspace datapath) and ports.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pyroute2 import IPRoute

from ..kernel import ethtool, netns, ovs
from .functions import instantiate
from .lifecycle import load_plan

_IFF_UP = 1


def _interfaces(ipr: IPRoute, ns: str) -> list[dict[str, Any]]:
    addrs: dict[int, list[str]] = {}
    for a in ipr.get_addr(family=2):
        addrs.setdefault(a["index"], []).append(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
    names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
    out = []
    for m in ipr.get_links():
        name = m.get_attr("IFLA_IFNAME")
        if name == "lo":
            continue
        d = {"name": name, "state": "up" if m["flags"] & _IFF_UP else "down",
             "mtu": m.get_attr("IFLA_MTU"), "mac": m.get_attr("IFLA_ADDRESS"),
             "addresses": addrs.get(m["index"], []),
             "kind": (m.get_attr("IFLA_LINKINFO") or {}).get_attr("IFLA_INFO_KIND")
             if m.get_attr("IFLA_LINKINFO") else None,
             "alias": m.get_attr("IFLA_IFALIAS"),
             "master": names.get(m.get_attr("IFLA_MASTER"))}
        with contextlib.suppress(OSError):
            with netns.entered(ns):
                d["offloads"] = ethtool.get_offloads(name)
        out.append(d)
    return out


def _routes(ipr: IPRoute) -> list[dict[str, Any]]:
    names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
    out = []
    for r in ipr.get_routes(family=2, table=254):
        dst = r.get_attr("RTA_DST")
        out.append({"dst": f"{dst}/{r['dst_len']}" if dst else "default",
                    "gateway": r.get_attr("RTA_GATEWAY"), "dev": names.get(r.get_attr("RTA_OIF"))})
    return out


def inspect(name: str) -> dict[str, Any]:
    state, plan = load_plan(name)
    meta = state.meta()
    nodes: dict[str, Any] = {}
    for ns in plan.namespaces:
        entry: dict[str, Any] = {"kind": ns.kind, "netns": ns.name, "present": netns.exists(ns.name)}
        if entry["present"]:
            ipr = netns.iproute(ns.name)
            try:
                entry["forwarding"] = netns.read_sysctl(ns.name, "net.ipv4.ip_forward") == "1"
                entry["interfaces"] = _interfaces(ipr, ns.name)
                entry["routes"] = _routes(ipr)
            finally:
                ipr.close()
            if ns.node in plan.functions:
                fn = instantiate(state, plan, ns.node)
                if fn is not None:
                    try:
                        entry["function"] = fn.inspect()
                    except Exception as e:  # inspect must still show the rest
                        entry["function"] = {"error": str(e)}
        nodes[ns.node] = entry
    live = ovs.bridge_info([b.name for b in plan.ovs_bridges]) if plan.ovs_bridges else {}
    for b in plan.ovs_bridges:
        info = live.get(b.name, {})
        dp = info.get("datapath_type", b.datapath)
        nodes[b.node] = {
            "kind": "ovs-bridge", "bridge": b.name, "present": bool(info),
            "datapath": dp,
            "datapath_note": ("userspace datapath (datapath_type=netdev): this kernel has no "
                              "openvswitch module; tx checksum offload is off on attached "
                              "interfaces") if dp == "netdev" else "kernel datapath",
            "ports": info.get("ports", sorted(p.name for p in b.ports)),
        }
    for br in plan.linux_bridges:
        nodes[br.node]["bridge"] = br.name
    return {"name": plan.lab, "status": meta.get("status"), "created": meta.get("created"),
            "source": meta.get("source"), "tag": plan.tag, "nodes": nodes,
            "segments": [{"subnet": s.subnet, "members": s.members, "bridges": s.bridges}
                         for s in plan.segments]}
