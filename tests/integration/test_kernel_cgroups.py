"""Real cgroups through sfclab.kernel.cgroups: a CPU quota and a memory limit are written and
read back, a program started through ``join_argv`` runs inside both, and removal refuses a
cgroup that does not carry the mark it is given, then removes it once its process ended."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sfclab.kernel import cgroups as kcg


@pytest.fixture
def marked(lab_name: str) -> Iterator[tuple[str, dict[str, Path]]]:
    mark = f"sfclab:{lab_name}:"
    dirs = {c: kcg.path(c, f"{mark}probe") for c in ("cpu", "memory")}
    yield mark, dirs
    assert kcg.remove(dirs.values(), mark) == []


def test_limits_a_joined_program_and_removes_only_with_the_mark(
        marked: tuple[str, dict[str, Path]]) -> None:
    mark, dirs = marked
    kcg.make(dirs["cpu"])
    kcg.make(dirs["memory"])
    kcg.set_cpu_quota(dirs["cpu"], 0.25)
    kcg.set_memory_limit(dirs["memory"], 32 << 20, with_swap=True)
    cpu, mem = kcg.cpu_figures(dirs["cpu"]), kcg.memory_figures(dirs["memory"])
    assert cpu is not None and cpu["cores"] == 0.25
    assert mem is not None and mem["limit_bytes"] == 32 << 20
    proc = subprocess.Popen(kcg.join_argv(["sleep", "30"], list(dirs.values())))
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in kcg.pids(dirs["memory"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert kcg.pids(dirs["cpu"]) == [proc.pid] and kcg.pids(dirs["memory"]) == [proc.pid]
        # another lab's mark: left alone, with the reason, though it could be removed
        left = kcg.remove(dirs.values(), "sfclab:other:", timeout=0)
        assert len(left) == 2 and all("mark" in x for x in left)
        # still busy: the kernel refuses, and the process is where it was
        left = kcg.remove([dirs["cpu"]], mark, timeout=0.1)
        assert len(left) == 1 and dirs["cpu"].exists()
    finally:
        proc.kill()
        proc.wait()
    assert kcg.remove(dirs.values(), mark) == []
    assert not dirs["cpu"].exists() and not dirs["memory"].exists()
