"""``dpi``: deep packet inspection with nDPI, in-line on the node's forwarding path.

Lab file keys::

    queue: 0             # NFQUEUE number inside the node's namespace (default 0)
    interval: 1.0        # seconds between flow-table writes (default 1)
    max_packets: 64      # packets per flow given to nDPI before it must guess
    cpu: 0.5             # optional cgroup limits
    memory: 64M

``configure`` loads one rule on the forward path of the node's ``mangle`` table:
``-j NFQUEUE --queue-num Q --queue-bypass`` — packets go to the ``sfc-dpi`` program
(native/sfc-dpi.c), which classifies each flow and accepts every packet; bypass lets packets
through when the program is not (or no longer) running, so a crashed classifier never cuts the
chain.  The rule is an iptables (legacy) rule because this kernel lacks nftables' ``queue``
expression (``CONFIG_NFT_QUEUE`` is off) while the xtables NFQUEUE target is present.
In a lab with IPv6 (``ip: 6`` or ``dual``) the same rule goes into ip6tables' ``mangle`` table
too, to the same queue: the program classifies IPv4 and IPv6 flows alike (``totals.ipv6``
counts the IPv6 packets, ``totals.non_ip`` what was neither and passed unclassified).
The program writes ``<state_dir>/dpi-flows.json``; ``inspect`` asks it for a fresh copy
(SIGUSR1) and returns per-flow protocol, packets and bytes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field

from ..errors import SpecError
from . import cgroups
from .base import register
from .process import ProcessFunction

IPTABLES = "iptables-legacy"
IP6TABLES = "ip6tables-legacy"
BINARY = "sfc-dpi"


def binary_path() -> Path | None:
    """``$SFCLAB_DPI``, else native/build/sfc-dpi of this checkout, else ``sfc-dpi`` in PATH."""
    env = os.environ.get("SFCLAB_DPI")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "native" / "build" / BINARY
        if cand.is_file():
            return cand
    found = shutil.which(BINARY)
    return Path(found) if found else None


class DpiParams(cgroups.LimitParams):
    queue: int = Field(default=0, ge=0, le=65535)
    interval: float = Field(default=1.0, gt=0, le=3600)
    max_packets: int = Field(default=64, ge=1, le=10_000)


@register
class Dpi(ProcessFunction):
    kind = "dpi"
    Params = DpiParams
    params: DpiParams
    families = (4, 6)

    @property
    def flows_path(self) -> Path:
        return self.ctx.state_dir / "dpi-flows.json"

    def check(self) -> None:
        b = binary_path()
        if b is None or not os.access(b, os.X_OK):
            raise SpecError(f"the {BINARY} program is not built (make -C native sfc-dpi) "
                            "or SFCLAB_DPI does not name it", place="kind")

    def _tools(self) -> list[str]:
        """The xtables of the lab's families: iptables for IPv4, ip6tables for IPv6."""
        return [t for t, f in ((IPTABLES, 4), (IP6TABLES, 6)) if f in self.ctx.families]

    def programs(self) -> list[str]:
        return [f"{t}-{what}" for t in self._tools() for what in ("restore", "save")]

    def ruleset(self) -> str:
        return ("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
                ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
                f"-A FORWARD -m comment --comment sfclab-dpi -j NFQUEUE "
                f"--queue-num {self.params.queue} --queue-bypass\nCOMMIT\n")

    def configure(self) -> None:
        for tool in self._tools():
            self.ctx.run([f"{tool}-restore"], input=self.ruleset())

    def queued(self) -> dict[str, int] | None:
        """Packets and bytes the queue rules saw (also those bypassed while nothing listened),
        summed over the families' rules."""
        out: dict[str, int] | None = None
        for tool in self._tools():
            cp = self.ctx.run([f"{tool}-save", "-c", "-t", "mangle"], check=False)
            for line in cp.stdout.splitlines():
                if "sfclab-dpi" in line and line.startswith("["):
                    pk, by = line[1:line.index("]")].split(":")
                    out = out or {"packets": 0, "bytes": 0}
                    out["packets"] += int(pk)
                    out["bytes"] += int(by)
        return out

    def program(self) -> list[str]:
        b = binary_path()
        if b is None:
            raise SpecError(f"the {BINARY} program is not built", place="kind")
        p = self.params
        return [str(b), "-q", str(p.queue), "-o", str(self.flows_path),
                "-i", str(p.interval), "-n", str(p.max_packets)]

    def flows(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.flows_path.read_text())
        except (OSError, ValueError):
            return None

    def inspect(self) -> dict[str, Any]:
        out = super().inspect()
        if out["running"]:
            self.refresh(self.flows_path, timeout=1.0)
        table = self.flows()
        out["flows_file"] = str(self.flows_path)
        out["queue"] = dict(number=self.params.queue, hook="forward (iptables mangle NFQUEUE)",
                            counters=self.queued())
        out["flows"] = table["flows"] if table else []
        out["totals"] = ({k: table[k] for k in ("packets", "bytes", "flow_count", "untracked",
                                                "ipv6", "non_ip")} if table else None)
        out["protocols"] = sorted({f["protocol"] for f in out["flows"]})
        return out
