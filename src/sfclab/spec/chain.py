"""The ``chain:`` shorthand, expanded into nodes and links of the studied topologies.

- ``{length: N, link: veth}``: N namespaces in a line, the endpoint hosts ``src`` and ``dst``
  and routers ``r1`` .. ``r<N-2>`` between them, each adjacent pair joined by a veth pair
  (N = 2 is one direct veth, as in the container service-chaining paper).
- ``{length: N, link: ovs}``: the same namespaces, each adjacent pair joined through an OVS
  bridge of its own (``br1`` .. ``br<N-1>``) with internal ports (``port: veth`` for veths).
- ``{bridges: N, connect: patch|veth}``: ``src`` and ``dst`` joined through N chained OVS
  bridges ``br1`` .. ``brN`` (the OVS-chaining blog's setup), bridges joined by patch ports or
  veth pairs.

Nodes given under ``nodes:`` with a generated name replace it when they carry a ``kind``
(``nodes: {r1: {kind: firewall, ...}}`` turns the first router into a firewall) and are merged
into it otherwise; links under ``links:`` are added to the generated ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .source import Document
from .strict import Strict

MAX_CHAIN = 1000


class ChainSpec(Strict):
    """``{length: N, link: veth|ovs}`` or ``{bridges: N, connect: patch|veth}``."""

    length: int | None = None
    link: Literal["veth", "ovs"] = "veth"
    bridges: int | None = None
    connect: Literal["patch", "veth"] = "patch"
    port: Literal["veth", "internal"] = "internal"
    mtu: int | None = Field(default=None, ge=68, le=65535)


def expand(c: ChainSpec, doc: Document) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    if (c.length is None) == (c.bridges is None):
        raise doc.error("expected exactly one of 'length' (namespaces in a line) or 'bridges' "
                        "(OVS bridges between src and dst)", ("chain",))
    extra = {"mtu": c.mtu} if c.mtu else {}
    nodes: dict[str, dict[str, Any]] = {}
    links: list[dict[str, Any]] = []
    if c.length is not None:
        if not 2 <= c.length <= MAX_CHAIN:
            raise doc.error(f"expected a chain length from 2 to {MAX_CHAIN} (src and dst count), "
                            f"got {c.length}", ("chain", "length"))
        names = ["src"] + [f"r{i}" for i in range(1, c.length - 1)] + ["dst"]
        for n in names:
            nodes[n] = {"kind": "host" if n in ("src", "dst") else "router"}
        for i, (a, b) in enumerate(zip(names, names[1:]), start=1):
            if c.link == "veth":
                links.append({"endpoints": [a, b], **extra})
            else:
                br = f"br{i}"
                nodes[br] = {"kind": "ovs-bridge"}
                links.append({"endpoints": [a, br], "port": c.port, **extra})
                links.append({"endpoints": [br, b], "port": c.port, **extra})
        return nodes, links
    if not 1 <= c.bridges <= MAX_CHAIN:  # type: ignore[operator]
        raise doc.error(f"expected from 1 to {MAX_CHAIN} bridges, got {c.bridges}",
                        ("chain", "bridges"))
    bridges = [f"br{i}" for i in range(1, c.bridges + 1)]  # type: ignore[operator]
    nodes["src"] = {"kind": "host"}
    for b in bridges:
        nodes[b] = {"kind": "ovs-bridge"}
    nodes["dst"] = {"kind": "host"}
    links.append({"endpoints": ["src", bridges[0]], "port": c.port, **extra})
    for a, b in zip(bridges, bridges[1:]):
        links.append({"endpoints": [a, b], "connect": c.connect, **extra})
    links.append({"endpoints": [bridges[-1], "dst"], "port": c.port, **extra})
    return nodes, links
