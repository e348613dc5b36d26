"""``bpf-balancer``: an SFC-aware load balancer in eBPF (``bpf/balancer.bpf.c``), the
``balancer`` kind's twin for chains.

Lab file keys: those of :mod:`.balancer_params` (``vip``, ``proto``, ``ports``, ``backends``,
``sticky``): an IPv4 or IPv6 VIP (labs of ``ip: 6`` or ``dual``) with backends of its family,
as the kernel ``balancer``.  Backends are chosen by a Maglev table (:mod:`sfclab.plan.maglev`,
computed here and written to the node's table) over their addresses, weighted; a connection
map (LRU) remembers each connection's backend both ways, so its replies get the VIP back as
their source and it keeps its backend when the table changes.

As for the ``bpf-firewall``, the program is the node's SFC program
(:attr:`NetworkFunction.sfc_program`), attached by the data plane in XDP on every interface in
place of the forwarder and the proxy, so the function must be on a chain.  At ``start`` the
backends, the table and last the configuration are written under the node's ``node_id``
(:mod:`.bpf_balancer_maps`); until then packets pass unchanged.  :meth:`BpfBalancer.set_live`
takes backends out and back in on a running lab (only the flows of those out move);
:meth:`BpfBalancer.forget_connections` empties the node's connection entries.
``inspect`` returns each backend's packet and byte counters, whether it is in, and its share
of the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import LabError, SpecError
from ..kernel import bpf
from . import bpf_balancer_maps as M
from .balancer_params import BalancerParams, vip_family_problem
from .base import register
from .sfc_aware import SfcAwareFunction


class BpfBalancerParams(BalancerParams):
    pass


@register
class BpfBalancer(SfcAwareFunction):
    kind = "bpf-balancer"
    Params = BpfBalancerParams
    params: BpfBalancerParams
    sfc_program = "sfc_lb"
    families = (4, 6)  # one per node: its VIP's

    def check(self) -> None:
        problem = vip_family_problem(self.params.vip, self.ctx.families)
        if problem:
            raise SpecError(problem, place="vip")

    def start(self) -> None:
        p = self.params
        node_id, maps = self._maps()
        self.set_live(None)
        with bpf.PinnedMap(str(maps / "sfc_lb_config")) as m:  # last: the rest is there
            m.update(M.u32(node_id), M.config_bytes(p.vip, p.ports, p.proto, len(p.backends),
                                                    p.sticky))

    def set_live(self, live: Sequence[bool] | None) -> None:
        """Take backends out (False) or in (True), in the order of ``backends``; None: all
        in.  The table keeps every slot of a backend in; a backend out gets address 0, so its
        connections choose again and no new flow chooses it.  ``LabError`` when the flags do
        not name every backend, or leave none in."""
        p = self.params
        node_id, maps = self._maps()
        flags = list(live) if live is not None else [True] * len(p.backends)
        if len(flags) != len(p.backends) or not any(flags):
            raise LabError(f"bpf-balancer {self.ctx.node}: expected one flag per backend "
                           f"({len(p.backends)}), at least one in; got {flags}")
        slots = M.table([str(b.address) for b in p.backends], [b.weight for b in p.backends],
                        flags)
        with bpf.PinnedMap(str(maps / "sfc_lb_tables")) as m:  # first: no slot names one out
            m.update(M.u32(node_id), M.table_bytes(slots))
        with bpf.PinnedMap(str(maps / "sfc_lb_backends")) as m:
            for i, b in enumerate(p.backends):
                m.update(M.u32(node_id * M.MAX_BACKENDS + i),
                         M.backend_bytes(b.address if flags[i] else None))

    def forget_connections(self) -> int:
        """Remove this node's entries from the connection map (both ways), so every flow is
        placed by the table again; how many entries went."""
        node_id, maps = self._maps()
        with bpf.PinnedMap(str(maps / "sfc_lb_conns")) as m:
            mine = [k for k in m.keys() if k[:4] == M.u32(node_id)]
            return sum(m.delete(k) for k in mine)

    def _live(self, node_id: int, maps: Any) -> list[bool]:
        with bpf.PinnedMap(str(maps / "sfc_lb_backends")) as m:
            out = M.backend_bytes(None)
            return [(m.lookup(M.u32(node_id * M.MAX_BACKENDS + i)) or out) != out
                    for i in range(len(self.params.backends))]

    def counters(self) -> dict[str, Any]:
        node_id, maps = self._maps()
        try:
            m = bpf.PinnedMap(str(maps / "sfc_lb_counts"))
        except Exception:  # the data plane is gone (a lab half down): no counters
            return {}
        with m:
            def at(slot: int) -> dict[str, int]:
                return M.count_sum(m.lookup(M.u32(node_id * M.SLOTS + slot)))

            return {"backends": [at(i) for i in range(len(self.params.backends))],
                    "replies": at(M.REPLIES), "other": at(M.OTHER),
                    "live": self._live(node_id, maps)}

    def inspect(self) -> dict[str, Any]:
        p = self.params
        c = self.counters()
        live = c.get("live") or [True] * len(p.backends)
        slots = M.table([str(b.address) for b in p.backends], [b.weight for b in p.backends],
                        live) if any(live) else []
        backends = [dict(c["backends"][i] if c else {}, address=str(b.address), weight=b.weight,
                         up=live[i], slots=slots.count(i))
                    for i, b in enumerate(p.backends)]
        return {"program": f"{self.sfc_program} (XDP, bpf/balancer.bpf.c)", "vip": str(p.vip),
                "proto": p.proto, "ports": f"{p.ports[0]}-{p.ports[1]}", "sticky": p.sticky,
                "table": M.TABLE_SIZE, "node_id": self.ctx.sfc_node_id, "backends": backends,
                "replies": c.get("replies"), "other": c.get("other")}
