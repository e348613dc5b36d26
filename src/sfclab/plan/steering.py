"""The steering plan as data: what the SFC data plane of a lab holds, typed.

A :class:`SteeringPlan` (``Plan.steering``; None for a lab without chains) is made by
:func:`sfclab.plan.sfc.build` and grown or shrunk by :mod:`sfclab.plan.chainadd`.  It holds:

- ``node_ids``: the number of each node on a chain's path (its key in the data plane's maps);
- ``hops``: the labels, each a :class:`Hop` owned by one node (*forward* out an interface to a
  neighbour, or *proxy* to the node's function);
- ``directions``: each chain direction (:class:`DirectionPlan`, with its ``encap``) with its paths
  (:class:`PathPlan`: nodes, function instances, label stack), the 256 slots shared among
  them, and its classifier rows (:class:`ClassifierRow`: the classifier as its file wrote it,
  plus its data-plane entries, each an :class:`EntryRow`);
- ``attach``: per node, the programs to attach (program, interface, hook);
- ``single_segment``: the (node, interface) pairs told to send one segment per packet.

``to_dict``/``from_dict`` write and read the JSON the state journal and the SSH agent keep:
tuples become lists (``attach`` and ``single_segment`` come back as tuples, an entry's port
pairs stay lists).  The classifier rows are typed dicts, so the JSON is the rows as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:  # the agent's light verbs read plans without the spec's pydantic
    from ..spec.sfc import Encap


@dataclass
class Hop:
    """One label: owned by ``node``; forward: out ``ifname`` to ``next`` (``next_ifname``)."""

    label: int
    node: str
    action: str  # forward | proxy | unpad (a padded path's last label: pops the padding too)
    ifname: str | None = None
    next: str | None = None
    next_ifname: str | None = None


@dataclass
class PathPlan:
    index: int
    nodes: list[str]  # ingress ... egress
    instances: list[str]  # the function instances, in order
    stack: list[int]  # labels, top first
    ifname: str  # the ingress's interface toward the first hop
    next: str
    next_ifname: str
    weight: int = 1
    #: padding entries pushed below ``stack`` (the chain's ``pad_labels``; not labels of hops)
    pad: int = 0


class EntryRow(TypedDict):
    """A classifier entry as the data plane holds it: one wildcard mask, prefix-aligned.  A
    port is (value, prefix length of 16): a tuple when planned, a list once read from JSON."""

    ingress: str
    src: str  # a prefix, "0.0.0.0/0" (IPv6: "::/0") for any
    dst: str
    sport: Sequence[int]
    dport: Sequence[int]
    proto: int  # 6, 17, 1, 58; 0 for any
    priority: int
    family: NotRequired[int]  # 6, or 0 for either (sfc_class_key.family); absent: 4


class ClassifierRow(TypedDict):
    """One classifier of a direction: its place in the chain's ``classifiers`` (``index``), the
    keys the lab or chain file gave (as it wrote them: ``dport`` 80 or ``"7000-7100"``; as the
    reverse direction sees them, for a symmetric chain's reverse), and its data-plane entries."""

    index: int
    ingress: str
    proto: str
    src: NotRequired[str]
    dst: NotRequired[str]
    sport: NotRequired[int | str]
    dport: NotRequired[int | str]
    priority: int
    entries: list[EntryRow]


@dataclass
class DirectionPlan:
    index: int
    chain: str
    reverse: bool
    ingress: str
    egress: str
    symmetric: bool
    ttl: int
    paths: list[PathPlan] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)  # slot -> index into paths
    classifiers: list[ClassifierRow] = field(default_factory=list)
    #: where its paths start in the path table; None: after the directions before it (the
    #: lab file's chains), set for chains added to a running lab (``sfclab chain add``)
    path_base: int | None = None
    #: how its paths are written on the wire (:mod:`sfclab.plan.encap`); the same paths,
    #: labels and slots whatever it is
    encap: Encap = "mpls"


@dataclass
class SteeringPlan:
    node_ids: dict[str, int] = field(default_factory=dict)
    hops: list[Hop] = field(default_factory=list)
    directions: list[DirectionPlan] = field(default_factory=list)
    #: node -> [(program, interface, hook)]
    attach: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    #: interfaces told to send one segment per packet: [(node, interface)]
    single_segment: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for x in d["directions"]:  # an unpadded path is written as before padding existed,
            for p in x["paths"]:
                if not p["pad"]:
                    del p["pad"]
            if x["encap"] == "mpls":  # and an MPLS direction as before encodings
                del x["encap"]
        return d

    def copy(self) -> SteeringPlan:
        """A deep copy, to change without changing the plan that holds this one."""
        return copy.deepcopy(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SteeringPlan:
        return cls(
            node_ids=dict(d["node_ids"]),
            hops=[Hop(**h) for h in d["hops"]],
            directions=[DirectionPlan(**{**x, "paths": [PathPlan(**p) for p in x["paths"]]})
                        for x in d["directions"]],
            attach={k: [(a[0], a[1], a[2]) for a in v] for k, v in d["attach"].items()},
            single_segment=[(x[0], x[1]) for x in d["single_segment"]],
        )

    def stack_of(self, chain: str) -> list[list[int]]:
        return [p.stack for d in self.directions if d.chain == chain for p in d.paths]


