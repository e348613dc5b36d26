"""The kernel side of cgroups (sfclab.kernel.cgroups) on plain directories, without root:
removal refuses a directory without its owner's mark, a program started through
``join_argv`` writes its own PID (the one it keeps) before it runs, and the figures read back
from the controllers' files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sfclab.kernel import cgroups as kcg


def test_remove_takes_only_what_carries_the_mark(tmp_path: Path) -> None:
    mine, other = tmp_path / "sfclab:lab1:fw", tmp_path / "sfclab:lab10:fw"
    mine.mkdir()
    other.mkdir()
    left = kcg.remove([mine, other], "sfclab:lab1:", timeout=0)
    assert not mine.exists()
    assert other.exists() and len(left) == 1 and str(other) in left[0] and "mark" in left[0]
    assert kcg.remove([other], "", timeout=0) and other.exists()  # no mark: nothing goes


def test_remove_reports_a_directory_that_will_not_go(tmp_path: Path) -> None:
    busy = tmp_path / "sfclab:l:n"
    busy.mkdir()
    (busy / "cgroup.procs").write_text("")  # a plain directory with a file: not empty
    left = kcg.remove([busy], "sfclab:l:", timeout=0)
    assert busy.exists() and len(left) == 1 and str(busy) in left[0]


def test_a_joined_program_is_in_the_cgroup_under_its_own_pid(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    argv = kcg.join_argv(["sh", "-c", "echo $$"], [a, b])
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    assert (a / "cgroup.procs").read_text().strip() == out
    assert kcg.pids(b) == [int(out)]
    assert kcg.join_argv(["true"], []) == ["true"]


def test_figures_read_back_from_the_controllers_files(tmp_path: Path) -> None:
    cpu, mem = tmp_path / "cpu", tmp_path / "mem"
    assert kcg.cpu_figures(cpu) is None and kcg.memory_figures(mem) is None
    cpu.mkdir()
    mem.mkdir()
    kcg.set_cpu_quota(cpu, 0.5)
    (cpu / "cpu.stat").write_text("nr_periods 9\nnr_throttled 3\nthrottled_time 700\n")
    assert kcg.cpu_figures(cpu) == {"cgroup": str(cpu), "cores": 0.5, "nr_throttled": 3,
                                    "throttled_ns": 700}
    kcg.set_cpu_quota(cpu, 0.001)  # below the kernel's least quota: the least
    assert (cpu / "cpu.cfs_quota_us").read_text() == str(kcg.MIN_QUOTA_US)
    kcg.set_memory_limit(mem, 64 << 20)
    for f, v in (("usage_in_bytes", 5), ("max_usage_in_bytes", 6), ("failcnt", 1)):
        (mem / f"memory.{f}").write_text(f"{v}\n")
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert kcg.memory_figures(mem) == {"cgroup": str(mem), "limit_bytes": 64 << 20,
                                       "usage_bytes": 5, "max_usage_bytes": 6, "failcnt": 1,
                                       "oom_kills": 2, "under_oom": False}
    assert kcg.memory_limit(mem) == (64 << 20, 5)
    (mem / "memory.limit_in_bytes").write_text(str(kcg.NO_LIMIT))
    assert kcg.memory_limit(mem) == (None, 5)
