"""What the SFC-aware eBPF functions (``bpf-firewall``, ``bpf-nat``, ``bpf-balancer``) share:
they read and write the label stack themselves, so their program is the node's SFC program
(:attr:`~.base.NetworkFunction.sfc_program`) and their tables live in the lab's data plane,
keyed by the node's ``node_id``.  :meth:`SfcAwareFunction._maps` hands both over, or refuses a
node that is on no chain (then the node has neither)."""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from .base import NetworkFunction


class SfcAwareFunction(NetworkFunction):
    """A network function whose program runs in the lab's SFC data plane."""

    def _maps(self) -> tuple[int, Any]:
        """The node's ``node_id`` and the lab's data-plane maps; a ``SpecError`` at the node
        when it is not a function of a chain."""
        node_id, maps = self.ctx.sfc_node_id, self.ctx.sfc_maps
        if node_id is None or maps is None:
            raise SpecError(f"a {self.kind} reads the label stack: node {self.ctx.node!r} "
                            "must be a function of a chain", place=f"nodes.{self.ctx.node}")
        return node_id, maps
