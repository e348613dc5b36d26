"""cgroup v1 controllers as sfclab uses them: make a cgroup, write its limits, move processes
into it, read its figures, remove it.

A cgroup is a directory ``/sys/fs/cgroup/<controller>/<name>`` (:func:`path`); a process joins
by writing its PID to the directory's ``cgroup.procs``.  The controllers used are ``cpu``
(``cpu.cfs_quota_us`` per ``cpu.cfs_period_us``), ``memory`` (``memory.limit_in_bytes``, and
the same cap on memory and swap where the kernel offers ``memory.memsw.limit_in_bytes``) and
``cpuset`` (``cpuset.cpus``; ``cpuset.mems`` copied from the parent, since a cpuset with none
takes no process).

Every cgroup sfclab makes is named ``sfclab:<lab>:...``: that name is its ownership mark.
:func:`remove` takes the mark its caller expects and leaves alone, with a reason, any
directory whose name does not carry it.  Which cgroups a node or a host gets, and their names,
is decided above (:mod:`sfclab.functions.cgroups`, :mod:`sfclab.hosts.cgroups`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
#: the smallest CPU quota the kernel takes (1 ms per period)
MIN_QUOTA_US = 1000
#: a memory limit at or above this is the kernel's "no limit"
NO_LIMIT = 1 << 62


def path(controller: str, *names: str) -> Path:
    """The directory of cgroup ``names`` (nested, outermost first) under ``controller``."""
    return ROOT.joinpath(controller, *names)


def make(d: Path) -> Path:
    """Make cgroup directory ``d`` (the kernel fills it with its control files)."""
    d.mkdir(exist_ok=True)
    return d


def set_cpu_quota(d: Path, cores: float) -> None:
    """Let the processes of ``d`` use ``cores`` CPUs' worth of time per period."""
    (d / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
    (d / "cpu.cfs_quota_us").write_text(str(max(MIN_QUOTA_US, int(cores * CPU_PERIOD_US))))


def set_memory_limit(d: Path, nbytes: int, with_swap: bool = False) -> None:
    """Cap the memory of ``d``'s processes at ``nbytes``; ``with_swap``: memory and swap
    together too, where the kernel offers it (no swapping around the limit)."""
    (d / "memory.limit_in_bytes").write_text(str(nbytes))
    memsw = d / "memory.memsw.limit_in_bytes"
    if with_swap and memsw.exists():
        with contextlib.suppress(OSError):
            memsw.write_text(str(nbytes))


def set_cpus(d: Path, cpus: list[int]) -> None:
    """Pin cpuset ``d`` to ``cpus``, on its parent's memory nodes."""
    (d / "cpuset.mems").write_text((d.parent / "cpuset.mems").read_text().strip())
    (d / "cpuset.cpus").write_text(",".join(map(str, cpus)))


def join_argv(argv: list[str], dirs: list[Path]) -> list[str]:
    """``argv`` run by a shell that first moves itself into each cgroup in ``dirs`` (so the
    program is inside them from its first instruction); ``argv`` itself without ``dirs``."""
    if not dirs:
        return argv
    joins = " && ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in dirs)
    return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sfclab-cgroup", *argv]


def move(pid: int, d: Path) -> None:
    """Move process ``pid`` into cgroup ``d``."""
    (d / "cgroup.procs").write_text(str(pid))


def pids(d: Path) -> list[int]:
    """The processes in cgroup ``d`` (empty when it is gone)."""
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def move_to_parent(d: Path) -> None:
    """Move the processes still in ``d`` to its parent cgroup (one that outlived its end)."""
    for pid in pids(d):
        with contextlib.suppress(OSError):
            move(pid, d.parent)


def remove(dirs: Iterable[Path], mark: str, timeout: float = 3.0,
           on_busy: Callable[[Path], None] | None = None) -> list[str]:
    """Remove the cgroup directories ``dirs`` whose names start with ``mark`` (their owner's
    mark), each waiting up to ``timeout`` seconds while the kernel still counts a process in
    it (``on_busy(dir)`` before each wait); returns what was left, with the reason."""
    left = []
    for d in dirs:
        if not mark or not d.name.startswith(mark):
            if d.exists():
                left.append(f"{d}: its name does not carry the mark '{mark}'; left alone")
            continue
        deadline = time.monotonic() + timeout
        while d.exists():
            try:
                d.rmdir()
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    left.append(f"{d}: {os.strerror(e.errno or 0)}")
                    break
                if on_busy is not None:
                    on_busy(d)
                time.sleep(0.05)
    return left


def _read(p: Path) -> str | None:
    try:
        return p.read_text()
    except OSError:
        return None


def _pairs(text: str | None) -> dict[str, str]:
    """A ``key value`` per line file (``cpu.stat``, ``memory.oom_control``)."""
    return dict(line.split() for line in (text or "").splitlines() if len(line.split()) == 2)


def _int(p: Path, default: int) -> int:
    return int((_read(p) or str(default)).strip())


def cpu_figures(d: Path) -> dict[str, Any] | None:
    """A ``cpu`` cgroup's quota (cores; None: unlimited) and throttling; None if it is gone."""
    if not d.exists():
        return None
    quota = _int(d / "cpu.cfs_quota_us", -1)
    stat = _pairs(_read(d / "cpu.stat"))
    return {"cgroup": str(d), "cores": None if quota < 0 else quota / CPU_PERIOD_US,
            "nr_throttled": int(stat.get("nr_throttled", 0)),
            "throttled_ns": int(stat.get("throttled_time", 0))}


def memory_figures(d: Path) -> dict[str, Any] | None:
    """A ``memory`` cgroup's limit, use, failures and OOM kills; None if it is gone."""
    if not d.exists():
        return None
    oom = _pairs(_read(d / "memory.oom_control"))
    return {"cgroup": str(d),
            "limit_bytes": _int(d / "memory.limit_in_bytes", 0),
            "usage_bytes": _int(d / "memory.usage_in_bytes", 0),
            "max_usage_bytes": _int(d / "memory.max_usage_in_bytes", 0),
            "failcnt": _int(d / "memory.failcnt", 0),
            "oom_kills": int(oom.get("oom_kill", 0)),
            "under_oom": oom.get("under_oom") == "1"}


def cpus_of(d: Path) -> str:
    """A cpuset's CPUs as the kernel writes them (``"0-1"``); raises OSError if it is gone."""
    return (d / "cpuset.cpus").read_text().strip()


def memory_limit(d: Path) -> tuple[int | None, int]:
    """A memory cgroup's limit (None: none) and use; raises OSError if it is gone."""
    limit = int((d / "memory.limit_in_bytes").read_text())
    return (None if limit >= NO_LIMIT else limit,
            int((d / "memory.usage_in_bytes").read_text()))
