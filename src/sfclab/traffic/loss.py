"""Where lost packets died: per node, per interface and per kernel drop reason.

A :class:`LossLocator` watches every namespace of a lab while traffic runs:

- the kernel's own account of each packet it drops (tracepoint ``skb:kfree_skb`` with its drop
  reason, counted per namespace and interface by an eBPF program, :mod:`sfclab.kernel.droptrace`);
- each interface's ``rx_dropped`` and ``tx_dropped`` (frames a device refused, including XDP
  frames, which never become packets the tracepoint sees), and each root qdisc's drops;
- the CPUs' backlog drops (``/proc/net/softnet_stat``, one machine-wide counter per CPU).

Where a root qdisc's own drop counter grew by more than the tracepoint saw dropped there
(``QDISC_DROP`` on that interface), the difference is located on that node as well and said
apart (``qdisc_untraced``): the qdisc counts every packet it refuses, and on this kernel a few
percent of a TBF's refusals past its rate reach no ``kfree_skb`` the tracepoint sees, more
when the machine is loaded.

``mark()`` takes a snapshot; ``since(mark)`` says what was dropped in between, as a
:class:`LossReport`: ``loss_by_node`` and ``loss_by_reason`` (JSON keys of every trial), the
per-interface detail, and ``located`` (the packets placed on a node).  The caller compares it
with the packets it lost (``unaccounted`` = lost - located).  Drops that are the measurement's
own, not the chain's (a socket receiver's buffer overflowing: ``SOCKET_RCVBUFF`` in the
receiving node) are kept apart in ``receiver_drops``: they are neither located loss nor
unaccounted, and the trial is a measurement of the receiver there, not of the chain.  Drops of packets that are not the
measurement's (a stray ARP) are counted too: the lab has no other traffic, so they are few.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ..kernel import netns
from ..kernel.droptrace import DropCounts, DropTrace
from ..plan.model import Plan

ENV_BINARY = "SFCLAB_DROPTRACE"


def droptrace_binary() -> str:
    """``$SFCLAB_DROPTRACE``, else ``native/build/sfc-droptrace`` of this checkout."""
    env = os.environ.get(ENV_BINARY)
    if env:
        return env
    return str(Path(__file__).resolve().parents[3] / "native" / "build" / "sfc-droptrace")


@dataclass
class Snapshot:
    drops: DropCounts
    counters: dict[tuple[str, str], dict[str, int]]  # (node, ifname) -> counter -> value
    backlog: dict[str, int]  # cpuN -> dropped


@dataclass
class LossReport:
    loss_by_node: dict[str, int] = field(default_factory=dict)
    loss_by_reason: dict[str, int] = field(default_factory=dict)
    #: node -> interface -> what was counted there (drop reasons and device counters)
    interfaces: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    backlog_drops: int = 0
    overflow: int = 0
    #: node -> reason -> packets the receiver dropped itself (the measurement's, not loss)
    receiver_drops: dict[str, dict[str, int]] = field(default_factory=dict)
    #: node -> packets its root qdiscs counted as dropped beyond what the tracepoint saw there
    #: (located on the node all the same, and included in ``loss_by_node``)
    qdisc_untraced: dict[str, int] = field(default_factory=dict)

    @property
    def located(self) -> int:
        return sum(self.loss_by_node.values())

    def to_dict(self, lost: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"loss_by_node": self.loss_by_node,
                               "loss_by_reason": self.loss_by_reason,
                               "loss_by_interface": self.interfaces,
                               "located": self.located, "backlog_drops": self.backlog_drops,
                               "qdisc_untraced": self.qdisc_untraced,
                               "overflow": self.overflow,
                               "receiver_drops": self.receiver_drops}
        if lost is not None:
            own = sum(n for per in self.receiver_drops.values() for n in per.values())
            out["unaccounted"] = max(lost - self.located - own, 0)
        return out


class LossLocator:
    """Watch the namespaces of ``plan`` for drops while the ``with`` block runs."""

    def __init__(self, plan: Plan, binary: str | None = None):
        self.plan = plan
        self.spaces = {ns.node: ns.name for ns in plan.namespaces if netns.exists(ns.name)}
        self.trace = DropTrace({n: netns.path(ns) for n, ns in self.spaces.items()},
                               binary or droptrace_binary())
        self.names: dict[tuple[str, int], str] = {}

    def __enter__(self) -> LossLocator:
        self.trace.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.trace.__exit__(exc_type, exc, tb)

    def mark(self) -> Snapshot:
        return Snapshot(self.trace.counts(), self._counters(), _backlog())

    def since(self, before: Snapshot, ignore: set[tuple[str, str]] | None = None,
              receiver: set[tuple[str, str]] | None = None) -> LossReport:
        """What was dropped since ``before``; drops of a (node, reason) in ``ignore`` are
        someone's intent, not loss (an in-kernel sink drops every probe it counts); those of a
        (node, reason) in ``receiver`` are the receiver's own (``receiver_drops``)."""
        now = self.mark()
        drops = now.drops.minus(before.drops)
        if ignore:
            drops.drops = [d for d in drops.drops if (d.netns, d.reason) not in ignore]
        own: dict[str, dict[str, int]] = {}
        if receiver:
            for d in drops.drops:
                if (d.netns, d.reason) in receiver:
                    per = own.setdefault(d.netns, {})
                    per[d.reason] = per.get(d.reason, 0) + d.packets
            drops.drops = [d for d in drops.drops if (d.netns, d.reason) not in receiver]
        rep = LossReport(loss_by_node=drops.by("netns"), loss_by_reason=drops.by("reason"),
                         overflow=drops.overflow, receiver_drops=own)
        for d in drops.drops:
            ifname = self.names.get((d.netns, d.ifindex), f"if{d.ifindex}" if d.ifindex else "-")
            per = rep.interfaces.setdefault(d.netns, {}).setdefault(ifname, {})
            per[d.reason] = per.get(d.reason, 0) + d.packets
        for (node, ifname), values in now.counters.items():
            old = before.counters.get((node, ifname), {})
            for k, v in values.items():
                grown = v - old.get(k, 0)
                if grown > 0:
                    rep.interfaces.setdefault(node, {}).setdefault(ifname, {})[k] = grown
        _add_untraced(rep)
        rep.backlog_drops = sum(v - before.backlog.get(c, 0) for c, v in now.backlog.items())
        return rep

    def _counters(self) -> dict[tuple[str, str], dict[str, int]]:
        out: dict[tuple[str, str], dict[str, int]] = {}
        for node, ns in self.spaces.items():
            cp = netns.run(ns, ["ip", "-s", "-j", "link", "show"], check=False, timeout=10)
            try:
                links = json.loads(cp.stdout or "[]")
            except ValueError:
                links = []
            for link in links:
                name = link.get("ifname", "?")
                self.names[(node, int(link.get("ifindex", 0)))] = name
                stats = link.get("stats64", {})
                out[(node, name)] = {"rx_dropped": int(stats.get("rx", {}).get("dropped", 0)),
                                     "tx_dropped": int(stats.get("tx", {}).get("dropped", 0))}
            cp = netns.run(ns, ["tc", "-s", "-j", "qdisc", "show"], check=False, timeout=10)
            try:
                qdiscs = json.loads(cp.stdout or "[]")
            except ValueError:
                qdiscs = []
            for q in qdiscs:
                if q.get("root") and q.get("drops"):
                    key = (node, str(q.get("dev", "?")))
                    out.setdefault(key, {})[f"qdisc_{q.get('kind', '')}_drops"] = int(q["drops"])
        return out


def _add_untraced(rep: LossReport) -> None:
    """Locate the drops a root qdisc counted beyond those traced on its interface."""
    for node, per_if in rep.interfaces.items():
        for counted in per_if.values():
            qdisc = sum(v for k, v in counted.items()
                        if k.startswith("qdisc_") and k.endswith("_drops"))
            extra = qdisc - counted.get("QDISC_DROP", 0)
            if extra > 0:
                rep.qdisc_untraced[node] = rep.qdisc_untraced.get(node, 0) + extra
                rep.loss_by_node[node] = rep.loss_by_node.get(node, 0) + extra
                rep.loss_by_reason["QDISC_DROP"] = rep.loss_by_reason.get("QDISC_DROP", 0) + extra


def _backlog() -> dict[str, int]:
    """Per CPU, packets dropped because its input backlog was full (2nd hex field)."""
    out: Counter[str] = Counter()
    try:
        for i, line in enumerate(Path("/proc/net/softnet_stat").read_text().splitlines()):
            fields = line.split()
            if len(fields) > 1:
                out[f"cpu{i}"] = int(fields[1], 16)
    except OSError:
        pass
    return dict(out)
