"""``container``: a function whose image is the function itself (a load balancer, a proxy, a
user's own function), run by podman in the node's namespace and placed in chains like any
function kind.

Lab file keys (besides the node's ``image``, :mod:`sfclab.spec.image`, which it requires)::

    reach: routed        # how packets reach the image's program: routed (default) or nfqueue
    queue: 0             # nfqueue only: the NFQUEUE number the program reads (default 0)
    bypass: true         # nfqueue only: packets pass while no program reads the queue
    cpu: 0.5             # CPU limit in cores, as for tun functions (the container's --cpus)
    memory: 64M          # memory limit, as for tun functions (the container's --memory)

How packets reach it (``reach``):

- ``routed``: the node is a router whose namespace the container shares.  Packets addressed to
  the node's own addresses are delivered to the program (a load balancer or proxy listening
  there, such as HAProxy on the address its clients connect to); packets for others are
  forwarded by the kernel, through whatever the program set up in the namespace (which needs
  ``caps: [NET_ADMIN]`` in ``image``).
- ``nfqueue``: every packet the node forwards is queued to NFQUEUE ``queue`` in its namespace
  (one iptables-legacy rule in the ``mangle`` table's FORWARD chain, as ``dpi`` does: the
  kernel here has no nftables ``queue``; in a lab with IPv6 the same rule in ip6tables-legacy,
  so IPv6 packets reach the same queue), and the program gives each a verdict.  The container
  gets the ``NET_ADMIN`` capability it needs to bind a queue.  With ``bypass``, packets pass
  unqueued while nothing reads the queue (the container has not started, or died).

In labs of ``ip: 6`` or ``dual`` the container joins the node's namespace with its IPv6
addresses and routes (the kind adds nothing of its own for routed reach): a program listening
on ``::`` is reached over IPv6 as over IPv4.

In a chain the proxy takes the label stack off before the function and puts it back after (as
for every function), so the program sees plain IPv4.  Connections the program opens itself
(a proxy's connections to its servers) carry no parked stack and follow the node's routes.

The container's name, labels, journal entry, removal by ID at ``down`` and its state in
``inspect`` (running, exit code, OOM-killed) are those of every node's container
(:mod:`sfclab.realize.containers`); this kind adds the limits, the queue and its counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from ..errors import SpecError
from . import cgroups
from .base import NetworkFunction, register

if TYPE_CHECKING:
    from ..plan.model import ContainerPlan

IPTABLES = "iptables-legacy"
IP6TABLES = "ip6tables-legacy"
COMMENT = "sfclab-container"
#: the capability a program needs to bind an NFQUEUE
QUEUE_CAP = "NET_ADMIN"


class ContainerParams(cgroups.LimitParams):
    reach: Literal["routed", "nfqueue"] = "routed"
    queue: int | None = Field(default=None, ge=0, le=65535)
    bypass: bool | None = None

    @model_validator(mode="after")
    def _queue_with_nfqueue(self) -> "ContainerParams":
        if self.reach != "nfqueue" and (self.queue is not None or self.bypass is not None):
            raise ValueError("'queue' and 'bypass' only with reach: nfqueue")
        return self


@register
class Container(NetworkFunction):
    kind = "container"
    Params = ContainerParams
    params: ContainerParams
    runs_image = True
    families = (4, 6)

    @classmethod
    def plan_container(cls, params: Any, c: ContainerPlan) -> None:
        """The node's container as this function needs it: its ``cpu`` and ``memory`` as the
        container's limits, the queue's capability for ``nfqueue``."""
        p: ContainerParams = params
        for key, mine, theirs in (("cpu", p.cpu, c.cpus), ("memory", p.memory, c.memory)):
            if mine is not None and theirs is not None:
                raise SpecError(f"a limit given twice: give {key!r} once, on the node (as for "
                                "tun functions), not also under 'image'", place=key)
        if p.cpu is not None:
            c.cpus = p.cpu
        if p.memory is not None:
            c.memory = p.memory
        if p.reach == "nfqueue" and QUEUE_CAP not in c.caps and not c.privileged:
            c.caps.append(QUEUE_CAP)

    def check(self) -> None:
        if self.ctx.image is None:  # a lab file's node without one is refused when planned
            raise SpecError("a container function runs its image, and this node has none: "
                            "give it an 'image' key (in the lab file or the chain file)",
                            place="image")

    def _tools(self) -> list[str]:
        """The xtables of its queue rule: iptables for IPv4, ip6tables for IPv6 (none for
        routed reach)."""
        if self.params.reach != "nfqueue":
            return []
        return [t for t, f in ((IPTABLES, 4), (IP6TABLES, 6)) if f in self.ctx.families]

    def programs(self) -> list[str]:
        return [f"{t}-{what}" for t in self._tools() for what in ("restore", "save")]

    def ruleset(self) -> str:
        p = self.params
        bypass = " --queue-bypass" if p.bypass is not False else ""
        return ("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
                ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
                f"-A FORWARD -m comment --comment {COMMENT} -j NFQUEUE "
                f"--queue-num {p.queue or 0}{bypass}\nCOMMIT\n")

    def configure(self) -> None:
        for tool in self._tools():
            self.ctx.run([f"{tool}-restore"], input=self.ruleset())

    def queued(self) -> dict[str, int] | None:
        """Packets and bytes the queue rules saw (bypassed ones too), summed over the
        families' rules."""
        out: dict[str, int] | None = None
        for tool in self._tools():
            cp = self.ctx.run([f"{tool}-save", "-c", "-t", "mangle"], check=False)
            for line in cp.stdout.splitlines():
                if COMMENT in line and line.startswith("["):
                    pk, by = line[1:line.index("]")].split(":")
                    out = out or {"packets": 0, "bytes": 0}
                    out["packets"] += int(pk)
                    out["bytes"] += int(by)
        return out

    def inspect(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reach": self.params.reach}
        if self.params.reach == "nfqueue":
            out["queue"] = dict(number=self.params.queue or 0,
                                bypass=self.params.bypass is not False,
                                hook="forward (iptables mangle NFQUEUE)",
                                counters=self.queued())
        return out
