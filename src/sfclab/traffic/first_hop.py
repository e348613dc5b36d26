"""The chain's first hop off the generator's core: threaded NAPI on its ingress veth, pinned.

A frame the generator sends into a veth is received by the peer in the sender's own context:
by the backlog (moved elsewhere by RPS, :func:`sfclab.kernel.cpus.steered`) or, when the peer
runs NAPI (an XDP program is attached, as on a steered lab's first hop, or GRO is on), by the
peer's NAPI poll on the sender's core, before RPS could move anything.  Threaded NAPI runs that
poll in a kernel thread ``napi/IF-ID`` instead, which is pinned like any thread.

:class:`FirstHopPinning` is a context manager over the first hop's ingress interfaces
(``(node, namespace, interface)``, from :meth:`~.measure.Endpoints.first_hop_ingress`).  For
each veth it turns threaded NAPI on (GRO first, when the veth has no NAPI yet), finds the new
kernel thread (the ``napi/IF-`` threads that were not there before, one per receive queue;
with any other number, another lab's interface of the same name was made threaded at the same
moment and none is pinned), pins it to the chain's
cores with a real-time priority (``SCHED_FIFO`` 1, as prompt as the softirq it replaces), and
records a :class:`NapiChange`.  On exit (normal, exception or Ctrl-C) it undoes
exactly what it changed, in reverse order, and lists it in ``restored``.  Interfaces that are
not veths, or already threaded, are left as they are and said so in ``notes``.  Everything is
read and written inside the lab's namespaces (``ip netns exec``, whose private ``/sys`` shows
that namespace's devices); the root namespace is never touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

#: a kernel thread's name is cut to this many bytes (TASK_COMM_LEN - 1)
COMM_MAX = 15
KTHREADD_PID = 2
#: real-time priority of a pinned NAPI thread (SCHED_FIFO; the lowest: above every normal thread)
NAPI_PRIORITY = 1


@dataclass
class NapiChange:
    """What was changed on one interface, so that it can be undone."""

    node: str
    netns: str
    ifname: str
    gro_turned_on: bool = False
    threaded_turned_on: bool = False
    kthreads: list[int] = field(default_factory=list)  # PIDs of napi/IF-* pinned
    cpus: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"interface": f"{self.node}/{self.ifname}", "how": "threaded-napi",
                "kthreads": list(self.kthreads), "cpus": list(self.cpus),
                "gro_turned_on": self.gro_turned_on}


def _in_netns(ns: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          check=False, timeout=10)


def _sys(ifname: str, attr: str) -> str:
    return f"/sys/class/net/{ifname}/{attr}"


def _read(ns: str, ifname: str, attr: str) -> str | None:
    cp = _in_netns(ns, ["cat", _sys(ifname, attr)])
    return cp.stdout.strip() if cp.returncode == 0 else None


def _write(ns: str, ifname: str, attr: str, value: str) -> str | None:
    """None on success, else the error the kernel gave."""
    cp = _in_netns(ns, ["sh", "-c", 'echo "$1" > "$2"', "sh", value, _sys(ifname, attr)])
    return None if cp.returncode == 0 else (cp.stderr.strip() or f"status {cp.returncode}")


def _is_veth(ns: str, ifname: str) -> bool:
    cp = _in_netns(ns, ["ethtool", "-i", ifname])
    return cp.returncode == 0 and "driver: veth" in cp.stdout


def _rx_queues(ns: str, ifname: str) -> int:
    cp = _in_netns(ns, ["ls", f"/sys/class/net/{ifname}/queues"])
    return sum(1 for q in cp.stdout.split() if q.startswith("rx-"))


def _gro(ns: str, ifname: str, on: bool) -> str | None:
    cp = _in_netns(ns, ["ethtool", "-K", ifname, "gro", "on" if on else "off"])
    return None if cp.returncode == 0 else (cp.stderr.strip() or f"status {cp.returncode}")


def napi_threads(proc: str = "/proc") -> dict[int, str]:
    """PID -> name of every kernel thread named ``napi/...`` (children of kthreadd)."""
    out: dict[int, str] = {}
    for d in Path(proc).iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        rest = stat[stat.rfind(")") + 1:].split()
        if name.startswith("napi/") and len(rest) > 1 and rest[1] == str(KTHREADD_PID):
            out[int(d.name)] = name
    return out


def threads_of(ifname: str, before: dict[int, str], after: dict[int, str]) -> list[int]:
    """The ``napi/IFNAME-ID`` threads in ``after`` that were not in ``before``."""
    prefix = f"napi/{ifname}-"[:COMM_MAX]
    return sorted(pid for pid, name in after.items()
                  if pid not in before and name.startswith(prefix))


class FirstHopPinning:
    """Threaded NAPI of the first hop's ingress veths on ``cpus`` for a ``with`` block."""

    def __init__(self, targets: list[tuple[str, str, str]], cpus: list[int]):
        self.targets = targets
        self.cpus = list(cpus)
        self.changes: list[NapiChange] = []
        self.notes: list[str] = []
        self.restored: list[str] = []

    def __enter__(self) -> FirstHopPinning:
        try:
            for node, ns, ifname in self.targets:
                self._pin(node, ns, ifname)
        except BaseException:
            self._restore()
            raise
        return self

    def _pin(self, node: str, ns: str, ifname: str) -> None:
        where = f"{node}/{ifname}"
        if not _is_veth(ns, ifname):
            self.notes.append(f"{where}: not a veth, receive processing steered by RPS only")
            return
        threaded = _read(ns, ifname, "threaded")
        if threaded is None:
            self.notes.append(f"{where}: the kernel offers no threaded NAPI; RPS only")
            return
        if threaded != "0":
            self.notes.append(f"{where}: NAPI already threaded (not ours), left as it is")
            return
        ch = NapiChange(node, ns, ifname, cpus=self.cpus)
        before = napi_threads()
        err = _write(ns, ifname, "threaded", "1")
        if err is not None:  # no NAPI yet (no XDP program, GRO off): GRO gives it one
            gro_err = _gro(ns, ifname, True)
            if gro_err is not None:
                self.notes.append(f"{where}: cannot turn GRO on for threaded NAPI ({gro_err}); "
                                  "RPS only")
                return
            ch.gro_turned_on = True
            self.changes.append(ch)
            err = _write(ns, ifname, "threaded", "1")
            if err is not None:
                self.notes.append(f"{where}: cannot make NAPI threaded ({err}); RPS only")
                return
        else:
            self.changes.append(ch)
        ch.threaded_turned_on = True
        found = threads_of(ifname, before, napi_threads())
        queues = _rx_queues(ns, ifname)
        if len(found) != queues:
            # another lab's interface of the same name made threaded at the same moment: the
            # names cannot tell them apart, so pin none rather than someone else's
            self.notes.append(f"{where}: threaded NAPI on, but {len(found)} new napi/{ifname}-* "
                              f"threads for {queues} receive queue(s); not pinned")
            return
        ch.kthreads = found
        for pid in ch.kthreads:
            os.sched_setaffinity(pid, self.cpus)
            # as prompt as the softirq it replaces: a normal thread waits behind the core's
            # other processes while the veth's 256-frame ring overflows
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NAPI_PRIORITY))

    def _restore(self) -> None:
        """Undo every change, newest first; each undo is tried even if an earlier one failed."""
        while self.changes:
            ch = self.changes.pop()
            where = f"{ch.node}/{ch.ifname}"
            if ch.threaded_turned_on:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    err = _write(ch.netns, ch.ifname, "threaded", "0")
                    self.restored.append(f"{where}: threaded NAPI off" if err is None else
                                         f"{where}: threaded NAPI NOT turned off: {err}")
            if ch.gro_turned_on:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    err = _gro(ch.netns, ch.ifname, False)
                    self.restored.append(f"{where}: GRO off" if err is None else
                                         f"{where}: GRO NOT turned off: {err}")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        placed = [c.to_dict() for c in self.changes]
        self._restore()
        self.placed = placed
        if exc is not None and self.restored:
            log.warning("restored after %s: %s", exc_type.__name__ if exc_type else "an error",
                        "; ".join(self.restored))

    def describe(self) -> list[dict[str, Any]]:
        """Where the first hop ran: one entry per pinned interface."""
        return [c.to_dict() for c in self.changes] or list(getattr(self, "placed", []))
