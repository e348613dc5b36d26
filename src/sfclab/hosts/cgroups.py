"""A host's CPUs and memory: one cgroup named ``sfclab:<lab>:@<host>`` under the cpuset
controller (``cpuset.cpus``: the host's CPUs) and the memory controller (``memory.limit_in_bytes``
when the host has ``memory``).  The processes of the nodes placed on the host join both before
they run their program (:func:`sfclab.functions.cgroups.wrap`); a node's own memory cgroup is
made inside its host's, so the host's limit covers it (hierarchical accounting)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..functions.cgroups import CGROUP_ROOT, remove_dirs

CONTROLLERS = ("cpuset", "memory")


def paths(cgroup: str) -> dict[str, Path]:
    return {c: CGROUP_ROOT / c / cgroup for c in CONTROLLERS}


def create(cgroup: str, cpus: list[int], memory: int | None) -> list[Path]:
    """Make the host's cgroups; return their directories."""
    p = paths(cgroup)
    cs = p["cpuset"]
    cs.mkdir(exist_ok=True)
    (cs / "cpuset.mems").write_text((cs.parent / "cpuset.mems").read_text().strip())
    (cs / "cpuset.cpus").write_text(",".join(map(str, cpus)))
    mem = p["memory"]
    mem.mkdir(exist_ok=True)
    if memory is not None:
        (mem / "memory.limit_in_bytes").write_text(str(memory))
    return [cs, mem]


def remove(cgroup: str, timeout: float = 3.0) -> list[str]:
    """Remove the host's cgroups (their processes ended); return those it could not."""
    return remove_dirs(paths(cgroup).values(), timeout)


def usage(cgroup: str) -> dict[str, object]:
    p = paths(cgroup)
    out: dict[str, object] = {}
    with contextlib.suppress(OSError):
        out["cpus"] = (p["cpuset"] / "cpuset.cpus").read_text().strip()
    with contextlib.suppress(OSError, ValueError):
        limit = int((p["memory"] / "memory.limit_in_bytes").read_text())
        out["memory_limit_bytes"] = None if limit >= 1 << 62 else limit
        out["memory_usage_bytes"] = int((p["memory"] / "memory.usage_in_bytes").read_text())
    return out
