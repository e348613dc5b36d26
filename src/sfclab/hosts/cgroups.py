"""A host's CPUs and memory: one cgroup named ``sfclab:<lab>:@<host>`` under the cpuset
controller (``cpuset.cpus``: the host's CPUs) and the memory controller (``memory.limit_in_bytes``
when the host has ``memory``).  The processes of the nodes placed on the host join both before
they run their program (:func:`sfclab.functions.cgroups.wrap`); a node's own memory cgroup is
made inside its host's, so the host's limit covers it (hierarchical accounting).  The kernel
side is :mod:`sfclab.kernel.cgroups`; the callers check the name is their lab's
(:func:`sfclab.realize.ownership.cgroup_problem`) before :func:`remove`, which itself refuses
any name without sfclab's mark."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..kernel import cgroups as kcg
from ..plan.names import NETNS_PREFIX

CONTROLLERS = ("cpuset", "memory")


def paths(cgroup: str) -> dict[str, Path]:
    return {c: kcg.path(c, cgroup) for c in CONTROLLERS}


def create(cgroup: str, cpus: list[int], memory: int | None) -> list[Path]:
    """Make the host's cgroups; return their directories."""
    p = paths(cgroup)
    cs = kcg.make(p["cpuset"])
    kcg.set_cpus(cs, cpus)
    mem = kcg.make(p["memory"])
    if memory is not None:
        kcg.set_memory_limit(mem, memory)
    return [cs, mem]


def remove(cgroup: str, timeout: float = 3.0) -> list[str]:
    """Remove the host's cgroups (their processes ended); return those it could not."""
    return kcg.remove(paths(cgroup).values(), NETNS_PREFIX, timeout)


def usage(cgroup: str) -> dict[str, object]:
    p = paths(cgroup)
    out: dict[str, object] = {}
    with contextlib.suppress(OSError):
        out["cpus"] = kcg.cpus_of(p["cpuset"])
    with contextlib.suppress(OSError, ValueError):
        limit, used = kcg.memory_limit(p["memory"])
        out["memory_limit_bytes"] = limit
        out["memory_usage_bytes"] = used
    return out
