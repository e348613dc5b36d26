"""A lab's plan as the graph the page draws (pure; JSON-ready).

``topology(plan)`` returns::

    {"lab": NAME,
     "groups":  [{"id": "host:h1", "kind": "host", "name": "h1", "parent": None}, ...],
     "nodes":   [{"id": NODE, "kind": KIND, "function": KIND|None, "netns": NS|None,
                  "image": IMAGE|None, "container": STATE|None,
                  "host": H|None, "tenant": T|None, "parent": GROUP-ID|None,
                  ["was": KIND, "moved_to": CLONE] | ["stands_for": NODE]}, ...],
     "links":   [{"id": "l3", "link": 3, "source": A, "target": B, "kind": "veth",
                  "interfaces": [{"node", "ifname", "netns", "address",
                                  ["address6"]}, ...]}, ...],   # address6: labs with IPv6
     "chains":  [{"chain": NAME, "reverse": bool, "ingress", "egress",
                  "paths": [{"index", "nodes": [...], "weight"}]}, ...]}

Grouping is data-driven: a node's ``host`` and ``tenant`` are read from its namespace entry in
the plan, or from a plan-wide mapping (``hosts``/``tenants``: group -> [nodes], or
node -> group) when the plan has one.  A plan with neither draws no groups.  A node with both
sits in its tenant's box inside its host's box.  Link kinds are the plan's interface roles
(``veth``, ``internal``, ``patch``, or whatever a new link form writes there); chains are the
steering plan's directions and paths (``plan.steering``), absent for a lab without chains.
A running lab's saved plan holds what was made on it (``chain add``/``migrate``, ``host add``):
its links (index -1, ``"added": true``, known by their two nodes, with ``vni`` and ``attach``
when tunnelled), its nodes and hosts, and the chains' paths as they run now.  A lab-file
function node whose function ``chain migrate`` moved to a clone (``moved``: node -> clone, read
from the lab's state by :func:`sfclab.realize.moved.moved_nodes`) is what it is now: kind
``transit``, no function, ``was`` its old kind and ``moved_to`` its clone; the clone says which
node it ``stands_for`` -- as ``sfclab inspect`` and ``sfclab graph`` show them.
"""

from __future__ import annotations

from typing import Any

from ..plan.graph import TRANSIT, link_key

GROUP_KEYS = ("host", "tenant")


def _mapping(plan: dict[str, Any], key: str) -> dict[str, str]:
    """node -> group from a plan-wide ``hosts``/``tenants`` entry of either shape."""
    raw = plan.get(key + "s")
    out: dict[str, str] = {}
    if isinstance(raw, list):  # the plan's hosts: [{"name": H, "nodes": [...]}, ...]
        raw = {str(h["name"]): h for h in raw if isinstance(h, dict) and "name" in h}
    if isinstance(raw, dict):
        for k, v in raw.items():
            if isinstance(v, (list, tuple)):
                out.update({str(n): str(k) for n in v})
            elif isinstance(v, str):
                out[str(k)] = v
            elif isinstance(v, dict) and isinstance(v.get("nodes"), list):
                out.update({str(n): str(k) for n in v["nodes"]})
    return out


def _group_of(entry: dict[str, Any], node: str, maps: dict[str, dict[str, str]], key: str
              ) -> str | None:
    v = entry.get(key)
    if isinstance(v, str) and v:
        return v
    return maps[key].get(node)


def _links(plan: dict[str, Any], names: set[str]) -> list[dict[str, Any]]:
    by_link: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for i in plan.get("interfaces", []):
        by_link.setdefault(link_key(int(i["link"]), i["node"], i["peer"]), []).append(i)
    tunnels = {frozenset(e["node"] for e in hl["ends"]): hl
               for hl in plan.get("host_links", []) if hl.get("link") == -1}
    out = []
    for key in sorted(by_link):
        link = key[0]
        ifs = by_link[key]
        ends = sorted({i["node"] for i in ifs} | {i["peer"] for i in ifs},
                      key=lambda n: (n != ifs[0]["node"], n))
        ends = [n for n in ends if n in names]
        if len(ends) < 2:
            continue
        hl = tunnels.get(frozenset(ends)) if link < 0 else None
        out.append({"id": f"l{link}" if link >= 0 else f"a:{ends[0]}:{ends[1]}", "link": link,
                    "source": ends[0], "target": ends[1],
                    "kind": ifs[0].get("role") or "link", "added": link < 0,
                    **({"vni": hl["vni"], "attach": hl["attach"]} if hl else {}),
                    "interfaces": [{"node": i["node"], "ifname": i["name"],
                                    "netns": i.get("netns"), "address": i.get("address"),
                                    **({"address6": i["address6"]} if i.get("address6")
                                       else {})}
                                   for i in ifs]})
    return out


def _chains(steering: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not steering:
        return []
    return [{"chain": d["chain"], "reverse": bool(d.get("reverse")), "ingress": d["ingress"],
             "egress": d["egress"],
             "paths": [{"index": p["index"], "nodes": list(p["nodes"]),
                        "weight": p.get("weight", 1)} for p in d.get("paths", [])]}
            for d in steering.get("directions", [])]


def _moved(node: str, kind: str, function: str | None, moved: dict[str, str]
           ) -> dict[str, Any]:
    """A node's kind and function as it is now: a migrated lab-file node is a transit node
    whose function moved to its clone; a clone says which node it stands for."""
    if node in moved:
        return {"kind": TRANSIT, "function": None, "was": function or kind,
                "moved_to": moved[node]}
    stood = sorted(n for n, c in moved.items() if c == node)
    return {"kind": kind, "function": function, **({"stands_for": stood[0]} if stood else {})}


def topology(plan: dict[str, Any], moved: dict[str, str] | None = None,
             containers: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The graph of ``plan`` (a plan as stored: :meth:`sfclab.plan.model.Plan.to_dict`);
    ``moved``: the running lab's migrated lab-file nodes -> their clones (none when omitted);
    ``containers``: the running lab's containers' states by node, as ``inspect`` shows them
    (:func:`sfclab.realize.containers.states`)."""
    moved = moved or {}
    containers = containers or {}
    maps = {k: _mapping(plan, k) for k in GROUP_KEYS}
    functions = plan.get("functions") or {}
    images = {c["node"]: c["image"] for c in plan.get("containers") or []}
    nodes: list[dict[str, Any]] = []
    for ns in plan.get("namespaces", []):
        fn = functions.get(ns["node"])
        nodes.append({"id": ns["node"], "netns": ns["name"], "image": images.get(ns["node"]),
                      "container": containers.get(ns["node"]),
                      **_moved(ns["node"], ns["kind"],
                               fn.get("kind") if isinstance(fn, dict) else None, moved),
                      **{k: _group_of(ns, ns["node"], maps, k) for k in GROUP_KEYS}})
    for b in plan.get("ovs_bridges", []):
        nodes.append({"id": b["node"], "kind": "ovs-bridge", "netns": None, "function": None,
                      "image": None, "container": None,
                      "datapath": b.get("datapath"),
                      **{k: _group_of(b, b["node"], maps, k) for k in GROUP_KEYS}})
    groups: dict[str, dict[str, Any]] = {}
    for n in nodes:
        parent = None
        if n["host"]:
            parent = f"host:{n['host']}"
            groups.setdefault(parent, {"id": parent, "kind": "host", "name": n["host"],
                                       "parent": None})
        if n["tenant"]:
            gid = f"tenant:{n['tenant']}" + (f"@{n['host']}" if n["host"] else "")
            groups.setdefault(gid, {"id": gid, "kind": "tenant", "name": n["tenant"],
                                    "parent": parent})
            parent = gid
        n["parent"] = parent
    return {"lab": plan.get("lab"), "groups": list(groups.values()), "nodes": nodes,
            "links": _links(plan, {n["id"] for n in nodes}),
            "chains": _chains(plan.get("steering"))}
