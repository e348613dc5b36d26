"""CPU use during a measurement: per core from ``/proc/stat``, per process from ``/proc/PID/stat``.

Objects:

* :class:`CpuTimes` - the cumulative jiffies of one ``cpu``/``cpuN`` line of ``/proc/stat``.
* :func:`parse_proc_stat` - text of ``/proc/stat`` -> ``{"cpu": CpuTimes, "cpu0": ..., ...}``.
* :func:`usage` - two samples -> percentages per core and in total (``"all"``):
  ``user`` (user+nice), ``system``, ``irq``, ``softirq``, ``idle`` (idle+iowait), ``steal``,
  ``busy`` (100 - idle).  Guest time is already inside user time in the kernel's accounting, so
  it is not added again.
* :class:`CpuMonitor` - a context manager that samples on entry and exit; ``result`` holds the
  usage dict, ``interval_s`` and ``process_cpu_s`` (label -> CPU seconds of the processes it
  was told about).
* :func:`process_cpu_seconds` - utime+stime of a live (or zombie, not yet reaped) PID
  (:mod:`sfclab.kernel.process`, as :func:`reap` and :func:`parse_pid_stat`: the runtimes
  hold a measurement's programs with them).
* :func:`run_ns` - nanoseconds a thread has run (``/proc/PID/schedstat``), :func:`ksoftirqd` -
  a core's softirq thread: with the first hop's NAPI threads, the chain's own CPU time.
* :func:`reap` (:mod:`sfclab.kernel.process`) - ``os.wait4`` on a child: exit status and its
  CPU seconds from ``rusage``, which is exact even for a process that has already exited
  (``/proc/PID/stat`` is gone once reaped).

The per-core view matters on small machines: softirq time is where veth and OVS forwarding shows
up, and a single saturated core explains a plateau that a host-wide average hides.
"""

from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, fields
from typing import Any

from ..kernel.process import parse_pid_stat, process_cpu_seconds, reap

_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def minus(self, earlier: "CpuTimes") -> "CpuTimes":
        return CpuTimes(**{f.name: max(getattr(self, f.name) - getattr(earlier, f.name), 0)
                           for f in fields(self)})


def parse_proc_stat(text: str) -> dict[str, CpuTimes]:
    """The ``cpu`` lines of ``/proc/stat``: ``"cpu"`` is the sum, ``"cpuN"`` one core each."""
    out: dict[str, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        parts = line.split()
        name, values = parts[0], parts[1:]
        if not values or not all(v.isdigit() for v in values):
            raise ValueError(f"malformed /proc/stat line: {line!r}")
        nums = [int(v) for v in values[: len(_FIELDS)]]
        nums += [0] * (len(_FIELDS) - len(nums))  # very old kernels have fewer columns
        out[name] = CpuTimes(*nums)
    if "cpu" not in out:
        raise ValueError("no aggregate 'cpu' line in /proc/stat text")
    return out


def read_proc_stat(path: str = "/proc/stat") -> dict[str, CpuTimes]:
    with open(path) as f:
        return parse_proc_stat(f.read())


def _percentages(d: CpuTimes) -> dict[str, float]:
    tot = d.total
    if tot <= 0:
        return {k: 0.0 for k in ("user", "system", "irq", "softirq", "idle", "steal", "busy")}
    pct = {
        "user": 100.0 * (d.user + d.nice) / tot,
        "system": 100.0 * d.system / tot,
        "irq": 100.0 * d.irq / tot,
        "softirq": 100.0 * d.softirq / tot,
        "idle": 100.0 * (d.idle + d.iowait) / tot,
        "steal": 100.0 * d.steal / tot,
    }
    pct["busy"] = 100.0 - pct["idle"]
    return pct


def usage(before: dict[str, CpuTimes], after: dict[str, CpuTimes]) -> dict[str, Any]:
    """Percentages between two samples: ``{"all": {...}, "cores": {"cpu0": {...}, ...}}``.

    A core present in only one sample (hot-plugged) is left out.
    """
    cores = {}
    for name in sorted((set(before) & set(after)) - {"cpu"}, key=lambda n: int(n[3:])):
        cores[name] = _percentages(after[name].minus(before[name]))
    return {"all": _percentages(after["cpu"].minus(before["cpu"])), "cores": cores}


def run_ns(pid: int) -> int | None:
    """Nanoseconds ``pid`` (a thread: a kernel thread too) has run on a CPU, from
    ``/proc/PID/schedstat``; None if it is gone.  Softirq work a thread runs when it re-enables
    bottom halves (a NAPI thread's poll, and what that poll hands on) is in it."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def ksoftirqd(cpu: int, proc: str = "/proc") -> int | None:
    """The PID of ``ksoftirqd/CPU`` (where a core's softirqs go when they run long), or None."""
    for d in Path(proc).iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == f"ksoftirqd/{cpu}":
                    return int(d.name)
            except OSError:
                continue
    return None


class CpuMonitor:
    """Sample ``/proc/stat`` around a measurement; record CPU seconds of named processes.

    >>> with CpuMonitor() as mon:            # doctest: +SKIP
    ...     run_traffic()
    ...     mon.add_process("client0", pid, cpu_seconds)
    >>> mon.result["all"]["softirq"]          # doctest: +SKIP
    """

    def __init__(self, path: str = "/proc/stat"):
        self.path = path
        self.before: dict[str, CpuTimes] | None = None
        self.after: dict[str, CpuTimes] | None = None
        self.t0 = self.t1 = 0.0
        self.process_cpu_s: dict[str, float | None] = {}
        self.pids: dict[str, int] = {}

    def __enter__(self) -> "CpuMonitor":
        self.t0 = time.monotonic()
        self.before = read_proc_stat(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        self.after = read_proc_stat(self.path)
        self.t1 = time.monotonic()

    def add_process(self, label: str, pid: int, cpu_seconds: float | None) -> None:
        """Record a process's CPU seconds under ``label`` (PIDs are kept out of the result:
        the store turns every number in ``cpu`` into a metric, and a PID is not one)."""
        self.pids[label] = pid
        self.process_cpu_s[label] = cpu_seconds

    @property
    def result(self) -> dict[str, Any]:
        if self.before is None or self.after is None:
            return {}
        out = usage(self.before, self.after)
        out["interval_s"] = self.t1 - self.t0
        out["process_cpu_s"] = dict(self.process_cpu_s)
        return out


__all__ = ["CpuTimes", "parse_proc_stat", "read_proc_stat", "usage", "parse_pid_stat",
           "process_cpu_seconds", "run_ns", "ksoftirqd", "reap", "CpuMonitor"]
