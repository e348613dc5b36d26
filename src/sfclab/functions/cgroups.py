"""Resource limits for functions that run processes: which cgroups a node gets and what
limits they hold (the kernel side is :mod:`sfclab.kernel.cgroups`).

A limited function gets one cgroup named ``sfclab:<lab>:<node>`` under each controller it
needs (``/sys/fs/cgroup/cpu/...`` for ``cpu``, ``/sys/fs/cgroup/memory/...`` for ``memory``).
The name is derived from the lab and node alone, so ``stop()`` in a fresh process finds it,
and it carries the lab's mark ``sfclab:<lab>:``, checked before it is removed.  A process
joins before it executes the function's program: :func:`wrap` prefixes the argv with a
``/bin/sh`` that writes its own PID to each ``cgroup.procs`` and then ``exec``\\ s.

A program killed by the kernel for exceeding ``memory`` does not take the lab down; the kill
shows in :func:`usage` as ``oom_kills`` (from ``memory.oom_control``) and ``failcnt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ..kernel import cgroups as kcg
from .base import FunctionContext, FunctionParams
from .params import Size

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
    return f"{mark(ctx)}{ctx.node}"


def mark(ctx: FunctionContext) -> str:
    """The lab's mark, which every cgroup of its nodes' names begins with (':' is in no lab
    or node name, so never another lab's)."""
    return f"sfclab:{ctx.lab}:"


def paths(ctx: FunctionContext) -> dict[str, Path]:
    """The node's own cgroups; on a host (labs with hosts) its memory cgroup is inside the
    host's, so the host's limit covers it."""
    out = {c: kcg.path(c, name(ctx)) for c in ("cpu", "memory")}
    if ctx.host_cgroup:
        out["memory"] = kcg.path("memory", ctx.host_cgroup, name(ctx))
    return out


def host_dirs(ctx: FunctionContext) -> list[Path]:
    """The cgroups of the node's host that its processes join first (none without hosts)."""
    if not ctx.host_cgroup:
        return []
    return [kcg.path(c, ctx.host_cgroup) for c in ("cpuset", "memory")]


def create(ctx: FunctionContext, limits: LimitParams) -> list[Path]:
    """Make the cgroups ``limits`` asks for and set their limits; returns their directories."""
    made = []
    p = paths(ctx)
    if limits.cpu is not None:
        made.append(kcg.make(p["cpu"]))
        kcg.set_cpu_quota(p["cpu"], limits.cpu)
    if limits.memory is not None:
        made.append(kcg.make(p["memory"]))
        kcg.set_memory_limit(p["memory"], limits.memory, with_swap=True)
    return made


def wrap(argv: list[str], dirs: list[Path]) -> list[str]:
    """``argv`` run by a shell that first moves itself into each cgroup in ``dirs``."""
    return kcg.join_argv(argv, dirs)


def remove(ctx: FunctionContext, timeout: float = 3.0) -> list[str]:
    """Remove the node's cgroups (after its processes ended; any that outlived their end are
    moved to the parent first); returns those it could not."""
    return kcg.remove(paths(ctx).values(), mark(ctx), timeout, on_busy=kcg.move_to_parent)


def usage(ctx: FunctionContext) -> dict[str, Any]:
    """CPU and memory figures of the node's cgroups (empty when it has none)."""
    p = paths(ctx)
    out: dict[str, Any] = {}
    cpu, mem = kcg.cpu_figures(p["cpu"]), kcg.memory_figures(p["memory"])
    if cpu is not None:
        out["cpu"] = cpu
    if mem is not None:
        out["memory"] = mem
    return out
