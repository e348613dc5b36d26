"""Resource limits for functions that run processes, through cgroup v1 controllers.

A limited function gets one cgroup named ``sfclab:<lab>:<node>`` under each controller it
needs (``/sys/fs/cgroup/cpu/...`` for ``cpu``, ``/sys/fs/cgroup/memory/...`` for ``memory``).
The name is derived from the lab and node alone, so ``stop()`` in a fresh process finds it.
A process joins before it executes the function's program: :func:`wrap` prefixes the argv
with a ``/bin/sh`` that writes its own PID to each ``cgroup.procs`` and then ``exec``\\ s.

A program killed by the kernel for exceeding ``memory`` does not take the lab down; the kill
shows in :func:`usage` as ``oom_kills`` (from ``memory.oom_control``) and ``failcnt``.
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

from pydantic import Field, field_validator

from .base import FunctionContext, FunctionParams
from .params import Size

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
#: the smallest memory limit accepted: below it the program is killed as it starts
MIN_MEMORY = 8 * 1024 * 1024


class LimitParams(FunctionParams):
    """Keys of every function that runs a process: ``cpu`` (cores, e.g. 0.5) and ``memory``."""

    cpu: float | None = Field(default=None, gt=0, le=1024,
                              description="CPU quota in cores (0.5 = half of one core)")
    memory: Size | None = Field(default=None, description="memory limit, e.g. '64M'")

    @field_validator("memory")
    @classmethod
    def _enough_memory(cls, v: int | None) -> int | None:
        if v is not None and v < MIN_MEMORY:
            raise ValueError("a memory limit of at least 8M (a process cannot start below it)")
        return v

    def limited(self) -> bool:
        return self.cpu is not None or self.memory is not None


def name(ctx: FunctionContext) -> str:
    return f"sfclab:{ctx.lab}:{ctx.node}"  # ':' is in no name: never another lab's


def paths(ctx: FunctionContext) -> dict[str, Path]:
    """The node's own cgroups; on a host (labs with hosts) its memory cgroup is inside the
    host's, so the host's limit covers it."""
    out = {c: CGROUP_ROOT / c / name(ctx) for c in ("cpu", "memory")}
    if ctx.host_cgroup:
        out["memory"] = CGROUP_ROOT / "memory" / ctx.host_cgroup / name(ctx)
    return out


def host_dirs(ctx: FunctionContext) -> list[Path]:
    """The cgroups of the node's host that its processes join first (none without hosts)."""
    if not ctx.host_cgroup:
        return []
    return [CGROUP_ROOT / c / ctx.host_cgroup for c in ("cpuset", "memory")]


def create(ctx: FunctionContext, limits: LimitParams) -> list[Path]:
    """Make the cgroups ``limits`` asks for and set their limits; returns their directories."""
    made = []
    p = paths(ctx)
    if limits.cpu is not None:
        d = p["cpu"]
        d.mkdir(exist_ok=True)
        made.append(d)
        (d / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (d / "cpu.cfs_quota_us").write_text(str(max(1000, int(limits.cpu * CPU_PERIOD_US))))
    if limits.memory is not None:
        d = p["memory"]
        d.mkdir(exist_ok=True)
        made.append(d)
        (d / "memory.limit_in_bytes").write_text(str(limits.memory))
        memsw = d / "memory.memsw.limit_in_bytes"
        if memsw.exists():   # no swapping around the limit: the same cap on memory+swap
            with contextlib.suppress(OSError):
                memsw.write_text(str(limits.memory))
    return made


def wrap(argv: list[str], dirs: list[Path]) -> list[str]:
    """``argv`` run by a shell that first moves itself into each cgroup in ``dirs``."""
    if not dirs:
        return argv
    joins = " && ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in dirs)
    return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sfclab-cgroup", *argv]


def remove(ctx: FunctionContext, timeout: float = 3.0) -> list[str]:
    """Remove the node's cgroups (after its processes ended); returns those it could not."""
    return remove_dirs(paths(ctx).values(), timeout, on_busy=_move_out)


def remove_dirs(dirs: Iterable[Path], timeout: float = 3.0,
                on_busy: Callable[[Path], None] | None = None) -> list[str]:
    """Remove cgroup directories, waiting up to ``timeout`` seconds each while the kernel still
    counts a process in one (``on_busy(dir)`` called before each wait); returns what could not
    be removed, with the reason."""
    left = []
    for d in dirs:
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


def _move_out(d: Path) -> None:
    """Move tasks that outlived their end (should not happen) to the parent cgroup."""
    with contextlib.suppress(OSError):
        for pid in (d / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (d.parent / "cgroup.procs").write_text(pid)


def _read(p: Path) -> str | None:
    try:
        return p.read_text()
    except OSError:
        return None


def usage(ctx: FunctionContext) -> dict[str, Any]:
    """CPU and memory figures of the node's cgroups (empty when it has none)."""
    out: dict[str, Any] = {}
    p = paths(ctx)
    cpu = p["cpu"]
    if cpu.exists():
        quota = int((_read(cpu / "cpu.cfs_quota_us") or "-1").strip())
        stat = dict(line.split() for line in (_read(cpu / "cpu.stat") or "").splitlines()
                    if len(line.split()) == 2)
        out["cpu"] = {"cgroup": str(cpu),
                      "cores": None if quota < 0 else quota / CPU_PERIOD_US,
                      "nr_throttled": int(stat.get("nr_throttled", 0)),
                      "throttled_ns": int(stat.get("throttled_time", 0))}
    mem = p["memory"]
    if mem.exists():
        oom = dict(line.split() for line in (_read(mem / "memory.oom_control") or "").splitlines()
                   if len(line.split()) == 2)
        out["memory"] = {
            "cgroup": str(mem),
            "limit_bytes": int((_read(mem / "memory.limit_in_bytes") or "0").strip()),
            "usage_bytes": int((_read(mem / "memory.usage_in_bytes") or "0").strip()),
            "max_usage_bytes": int((_read(mem / "memory.max_usage_in_bytes") or "0").strip()),
            "failcnt": int((_read(mem / "memory.failcnt") or "0").strip()),
            "oom_kills": int(oom.get("oom_kill", 0)),
            "under_oom": oom.get("under_oom") == "1",
        }
    return out
