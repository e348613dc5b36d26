"""Network functions: one module per kind, each a :class:`~sfclab.functions.base.NetworkFunction`
subclass registered by name.  A function node forwards like a router and adds its behaviour.

:data:`KINDS` is the list of function kinds, one line each: kind -> module.  A module is
imported the first time its kind is asked for (``get``), so commands that never touch a function
(``down`` of a plain chain, ``ls``) do not pay for loading them.  To add a function kind, write
its module here and add one line to :data:`KINDS`.

- :mod:`.base`      the network-function model: context, parameters, lifecycle hooks
- :mod:`.params`    parameter types the kinds share: rates, sizes, prefixes, port ranges, argv
- :mod:`.router`    ``router``: forwarding and the lab's static routes, per-namespace settings
- :mod:`.firewall`  ``firewall``: a router whose forward (and input) path is filtered, with
                    :mod:`.rules` (rule lists as text for one-batch loading)
- :mod:`.sfc_aware` the base of the SFC-aware eBPF kinds: their node's number and the lab's
                    data-plane maps, or a refusal of a node on no chain
- :mod:`.bpf_firewall` ``bpf-firewall``: the firewall in eBPF, SFC-aware (reads the label stack
                    itself, no proxy), with :mod:`.bpf_firewall_maps` (its maps as bytes)
- :mod:`.balancer` ``balancer``: a load balancer in nftables (DNAT by jhash over weighted
                    entries); :mod:`.bpf_balancer` ``bpf-balancer``: its eBPF twin, SFC-aware,
                    by a Maglev table, with :mod:`.bpf_balancer_maps` (its maps as bytes); both
                    take the keys of :mod:`.balancer_params`
- :mod:`.bpf_pipeline` ``bpf-pipeline``: several eBPF functions on one node, by tail calls
- :mod:`.nat`       ``nat``: masquerade toward one neighbour, port forwards inward
- :mod:`.bpf_nat`   ``bpf-nat``: the nat in eBPF, SFC-aware (reads the label stack itself, no
                    proxy), with :mod:`.bpf_nat_maps` (its maps as bytes)
- :mod:`.shaper`    ``shaper``: a router whose egress is rate-limited by HTB or TBF
- :mod:`.process`   a function whose behaviour is a program in its namespace (``dpi``, ``tun``),
                    limited by :mod:`.cgroups` (which cgroups a node gets, and their limits)
- :mod:`.dpi`       ``dpi``: deep packet inspection with nDPI on the forwarding path
- :mod:`.tun`       ``tun``: transit traffic through a user-space program via a TUN device;
                    :mod:`.examples` holds example programs for it
- :mod:`.container` ``container``: the node's container image is the function (routed to it,
                    or NFQUEUE), with the limits of ``tun``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import NetworkFunction

#: every function kind and the module that registers it
KINDS: dict[str, str] = {
    "router": "router",
    "firewall": "firewall",
    "bpf-firewall": "bpf_firewall",
    "balancer": "balancer",
    "bpf-balancer": "bpf_balancer",
    "bpf-pipeline": "bpf_pipeline",
    "nat": "nat",
    "bpf-nat": "bpf_nat",
    "shaper": "shaper",
    "dpi": "dpi",
    "tun": "tun",
    "container": "container",
}


def get(kind: str) -> type[NetworkFunction]:
    """The class of function kind ``kind`` (``KeyError`` if there is none)."""
    from .base import REGISTRY  # light start-up: pydantic only once a function is needed

    if kind not in REGISTRY:
        importlib.import_module(f"{__name__}.{KINDS[kind]}")  # registers it
    return REGISTRY[kind]


def kinds() -> list[str]:
    return sorted(KINDS)


__all__ = ["KINDS", "get", "kinds"]
