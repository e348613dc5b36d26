"""The on-wire encodings of a chain (``encap:``), one table entry each: what each needs.

Model: every encoding carries the *same* planned path -- the nodes, the function instances and
the per-hop labels the planner (:mod:`sfclab.plan.sfc`) gives a path, with their actions
(forward, proxy, unpad) in ``sfc_labels`` -- so paths, groups, weights, slot tables,
symmetric chains, failover, ``chain migrate`` and ``chain add`` are one code for all of them.
Only the bytes between hops differ:

- ``mpls``: the path's labels as an RFC 3032 stack (RFC 8595), pushed at once, one popped per
  hop (``include/sfc.h``).
- ``nsh``: an RFC 8300 header (MD type 2, no metadata: 8 bytes).  Its service path identifier
  (SPI) is the path's index in the path table; its service index (SI) starts at 255 and the
  proxy after each function lowers it by one; each node forwards by (node, SPI, SI) -> the
  label of its hop there (``sfc_nsh`` in ``include/sfc_nsh.h``, :func:`nsh_entries`), so the
  same labels say what it does.
- ``srv6``: an outer IPv6 header and an RFC 8754 segment routing header, one SID per label
  (the owner's locator :: the label, :mod:`.srv6`); each node acts on the active SID by its
  label, a function's proxy parks the SIDs still to come (``include/sfc_srv6.h``).

An :class:`Encap` says what the planner and the realizer give the links and the nodes of a
path of that encoding; :data:`ENCAPS` is the table, :func:`encap_of` the one look-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.limits import MAX_LABELS

#: the first service index of an NSH path (RFC 8300: SI counts down from 255)
NSH_FIRST_SI = 255
#: bytes of an NSH header of MD type 2 with no metadata: base header and service path header
NSH_BYTES = 8


@dataclass(frozen=True)
class Encap:
    """What a chain of one encoding needs."""

    name: str
    #: the ethertype of its frames between hops
    ethertype: int
    #: bytes added to the MTU of a forwarding node's interfaces on a path (the most the
    #: encoding adds to a packet)
    headroom: int
    #: the programs of a forwarding node on a path, a function instance's proxy (its two
    #: halves) and a classifier (at a host's egress, at a forwarding node's ingress); the
    #: MPLS and NSH ones are the same programs, which dispatch by ethertype
    forwarder: str = "sfc_forward"
    proxy: tuple[str, str] = ("sfc_proxy_in", "sfc_proxy_out")
    classify: tuple[str, str] = ("sfc_classify_egress", "sfc_classify_ingress")
    #: offloads turned off where it is pushed (tx checksum on path interfaces, GRO on pushers)
    #: and hosts that classify told to send one segment per packet
    offloads: tuple[str, ...] = ("tx-checksum", "gro", "gso_max_segs 1")
    #: whether SFC-aware eBPF functions (bpf-firewall, bpf-nat, ...) read it under their XDP
    aware_functions: bool = False
    #: whether ``pad_labels`` means anything for it
    pads: bool = False
    #: the largest TTL its header holds
    max_ttl: int = 255
    #: the data plane's counter of packets dropped for their TTL (``chain trace`` reads it)
    ttl_counter: str = "ttl_expired"
    #: whether the TTL drops once per node (NSH: each forwarder) rather than once per label
    ttl_per_node: bool = False
    #: None when it is built; else why a chain of it is refused
    refused: str | None = None


ENCAPS: dict[str, Encap] = {}


def register(e: Encap) -> None:
    """One entry per encoding; a second of one name is refused."""
    if e.name in ENCAPS:
        raise ValueError(f"encapsulation {e.name!r} registered twice")
    ENCAPS[e.name] = e


register(Encap("mpls", 0x8847, 4 * MAX_LABELS, aware_functions=True, pads=True))
register(Encap("nsh", 0x894F, NSH_BYTES, max_ttl=63, ttl_counter="nsh_ttl_expired",
              ttl_per_node=True))
register(Encap("srv6", 0x86DD, 40 + 8 + 16 * MAX_LABELS))


def encap_of(name: str) -> Encap:
    """The table entry of encoding ``name`` (a name the spec's ``Encap`` allows)."""
    return ENCAPS[name]


def nsh_entries(spi: int, stack: list[int], owner: dict[int, tuple[str, str]]
                ) -> list[tuple[str, int, int, int, bool]]:
    """The ``sfc_nsh`` entries of one NSH path: (node, SPI, SI, label, last) per label of its
    ``stack`` (top first; ``owner``: label -> (node, action)).  SI is 255 until the first
    function's proxy and one less after each; ``last``: the path's last label, whose owner
    delivers the packet plain.  A node appears at most once per SI (a shortest way between two
    stops visits a node once, and a stop's proxy changes SI), so (node, SPI, SI) is a key."""
    out = []
    si = NSH_FIRST_SI
    for i, lbl in enumerate(stack):
        node, action = owner[lbl]
        out.append((node, spi, si, lbl, i == len(stack) - 1))
        if action == "proxy":
            si -= 1
    return out


def trace_steps(name: str, stack: list[int], owner: dict[int, str]) -> list[tuple[int, int]]:
    """The steps of ``chain trace`` over a path of encoding ``name``: (TTL, position in
    ``stack``) per step, the TTL the ingress gives the path so that it expires at the owner
    (``owner``: label -> node) of the label at that position.  A label's TTL (and SRv6's hop
    limit, one per SID) drops at every label, so TTL k expires at the k-th label; an NSH
    header's TTL drops once per node (RFC 8300: by each forwarder; a function's proxy lowers
    SI, not TTL), so TTL k expires at the k-th node in a row of the path's labels and the
    step names that node's first label there (a function's proxy label)."""
    if not encap_of(name).ttl_per_node:
        return [(k + 1, k) for k in range(len(stack))]
    steps: list[tuple[int, int]] = []
    for k, lbl in enumerate(stack):
        if k == 0 or owner[lbl] != owner[stack[k - 1]]:
            steps.append((len(steps) + 1, k))
    return steps


def encap_problem(name: str, pad: int, aware: list[tuple[int, str]]
                  ) -> tuple[str, tuple[str | int, ...]] | None:
    """What keeps a chain of encoding ``name`` from being built, and the key it is about
    (relative to the chain), or None: an encoding not built yet; padding where the encoding
    has no stack to pad; an SFC-aware eBPF function (``aware``: (index in ``functions``,
    name) of each) where it does not read the encoding."""
    e = encap_of(name)
    if e.refused:
        return e.refused, ("encap",)
    if pad and not e.pads:
        return (f"pad_labels pads a label stack; an {name} chain has none (use encap mpls)",
                ("pad_labels",))
    if aware and not e.aware_functions:
        i, f = aware[0]
        return (f"{f!r} is an SFC-aware eBPF function, which reads MPLS labels only: a chain "
                f"through it takes encap mpls", ("functions", i))
    return None
