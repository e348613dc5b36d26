"""``bpf-nat``: an SFC-aware NAT in eBPF (``bpf/nat.bpf.c``), the kernel ``nat``'s twin for
chains.

Lab file keys (those of ``nat``, so ``kind: nat`` can be swapped for ``kind: bpf-nat``)::

    outside: NODE                                   # the neighbour on the outside
    forward:                                        # at most 32 port forwards
      - {proto: tcp, port: 8080, to: "198.18.3.2:80"}
      - {proto: tcp, port: 8443, to: "[2001:2:0:3::2]:443"}   # IPv6 labs (ip: 6 or dual)

Masquerading rewrites the source of every packet leaving through the interface toward
``outside`` to that interface's address, keeping the source port when the translated flow is
free (as the kernel does), else taking one of 32768-65535; a port forward rewrites the
destination of packets that arrive on that interface for the outside address and ``port`` to
``to``.  Replies are translated back from the same node's connection map (an LRU of the lab's
translations, two entries each), whether they come back labelled (a symmetric chain) or plain.
TCP, UDP and ICMP echo (its identifier as the port) are translated; fragments and other
packets pass unchanged and are counted (:mod:`.bpf_nat_maps`, ``include/sfc_nat.h``).

IPv6 (labs of ``ip: 6`` or ``dual``) is NAT66 by masquerade, as the kernel ``nat`` does it: the
same translations to the outside interface's IPv6 address, ICMPv6 echo as ICMP's, a forward to
an IPv6 ``to`` taking IPv6 packets only; the checksums are TCP's, UDP's and ICMPv6's over the
IPv6 pseudo-header (no IP header checksum; a UDP checksum is never written as 0).

The program is not started by the function: it is the node's SFC program
(:attr:`NetworkFunction.sfc_program`), attached by the data plane in XDP on every interface of
the node in place of the forwarder and the proxy, so the function must be on a chain.  A
routed (unlabelled) packet it masquerades goes on through the kernel with the node's own
address as its source: ``configure`` sets ``accept_local`` in the node's namespace (only
there) so that the kernel forwards it.  At
``start`` (after the data plane is loaded) the outside interface, its address of each family
and the forwards are written into the lab's maps under the node's ``node_id``; until then the
node drops IPv4 and IPv6.
``inspect`` returns the masquerade's (``masquerade6`` for IPv6 in a lab that has it, as the
kernel twin counts its ip6 table's rule) and each forward's packet, byte and translation counters,
the packets not translated, the new flows dropped for want of a port, and the live
translations.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv6Address
from typing import Any

from pydantic import field_validator

from ..errors import SpecError
from ..kernel import bpf
from . import bpf_nat_maps as M
from .base import register
from .sfc_aware import SfcAwareFunction
from .nat import NatParams, PortForward, check_forwards
from .params import neighbour

#: at most this many live translations are listed by ``inspect`` (all are counted)
SHOWN = 64


class BpfNatParams(NatParams):
    @field_validator("forward")
    @classmethod
    def _fits(cls, forward: list[PortForward]) -> list[PortForward]:
        if len(forward) > M.MAX_FORWARDS:
            raise ValueError(f"{len(forward)} port forwards; a bpf-nat holds at most "
                             f"{M.MAX_FORWARDS} (its forward map's entries per node, both "
                             "families together)")
        return forward


@register
class BpfNat(SfcAwareFunction):
    kind = "bpf-nat"
    Params = BpfNatParams
    params: BpfNatParams
    sfc_program = "sfc_nat"
    families = (4, 6)  # NAT44 and NAT66, both by masquerade, as kind nat

    def check(self) -> None:
        out = neighbour(self.ctx, self.params.outside, "outside")
        for family in self.ctx.families:
            if (out.address if family == 4 else out.address6) is None:
                raise SpecError(f"the interface of node {self.ctx.node!r} toward "
                                f"{self.params.outside!r} has no IPv{family} address: "
                                "masquerading needs one of each family the lab carries",
                                place=f"nodes.{self.ctx.node}.outside")
        check_forwards(self.ctx, self.params.forward)

    def configure(self) -> None:
        # a routed packet masqueraded in XDP is handed to the kernel with the node's own
        # address as its source, which the kernel drops as a martian unless told to accept it
        self.ctx.write_sysctl("net.ipv4.conf.all.accept_local", "1")

    def _outside(self) -> tuple[int, IPv4Address | None, IPv6Address | None]:
        """The outside interface's index and its IPv4 and IPv6 addresses (None: the lab's
        ``ip:`` has no such family; check() refused a missing one it has)."""
        out = neighbour(self.ctx, self.params.outside, "outside")
        cp = self.ctx.run(["ip", "-j", "link", "show", "dev", out.name])
        return (int(json.loads(cp.stdout)[0]["ifindex"]), out.address and out.address.ip,
                out.address6 and out.address6.ip)

    def start(self) -> None:
        p = self.params
        node_id, maps = self._maps()
        ifindex, address4, address6 = self._outside()
        with bpf.PinnedMap(str(maps / "sfc_nat_forwards")) as m:
            for i, f in enumerate(p.forward):
                m.update(M.u32(node_id * M.MAX_FORWARDS + i), M.forward_bytes(f))
        with bpf.PinnedMap(str(maps / "sfc_nat_config")) as m:  # last: the forwards are there
            m.update(M.u32(node_id), M.config_bytes(ifindex, address4, address6,
                                                    len(p.forward)))

    def counters(self) -> dict[str, Any]:
        node_id, maps = self._maps()
        try:
            m = bpf.PinnedMap(str(maps / "sfc_nat_counts"))
            conns = bpf.PinnedMap(str(maps / "sfc_nat_conns"))
        except Exception:  # the data plane is gone (a lab half down): no counters
            return {}
        with m, conns:
            def at(slot: int) -> dict[str, int]:
                return M.count_sum(m.lookup(M.u32(node_id * M.SLOTS + slot)))

            six = {"masquerade6": at(M.MASQUERADE6)} if 6 in self.ctx.families else {}
            return {"masquerade": at(M.MASQUERADE), **six,
                    "forwards": [at(M.FORWARD + i) for i in range(len(self.params.forward))],
                    "not_translated": at(M.OTHER), "no_port": at(M.NO_PORT),
                    "translations": M.translations(node_id, conns.items().items())}

    def inspect(self) -> dict[str, Any]:
        p = self.params
        c = self.counters()
        out = neighbour(self.ctx, p.outside, "outside")
        forwards = [dict(c["forwards"][i] if c else {},
                         forward=f.model_dump(mode="json")) for i, f in enumerate(p.forward)]
        live = c.get("translations", [])
        return {"program": f"{self.sfc_program} (XDP, bpf/nat.bpf.c)", "outside": p.outside,
                "interface": out.name, "node_id": self.ctx.sfc_node_id,
                "ports": f"the flow's own if free, else {M.PORT_FIRST}-{M.PORT_LAST}",
                "masquerade": c.get("masquerade"),
                **({"masquerade6": c["masquerade6"]} if "masquerade6" in c else {}),
                "forwards": forwards,
                "not_translated": c.get("not_translated"), "no_port": c.get("no_port"),
                "live_translations": len(live), "translations": live[:SHOWN]}
