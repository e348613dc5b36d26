"""sfclab.kernel.process: a lost Ctrl-C is raised again; every child is ended on exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from sfclab.kernel import process

#: SIGINT lands inside an at-fork hook (where Python ignores exceptions), as when Ctrl-C
#: arrives while a tool is forked (the hooks run for a child with a ``preexec_fn``, as
#: ``netns.popen`` starts every tool in a namespace); then the program would go on as if never
#: interrupted
FORK_INTERRUPTED = """
import os, signal, subprocess, sys, time
from sfclab.kernel import process
if sys.argv[1] == "hook":
    process.interrupts_never_lost()
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    subprocess.run(["true"], preexec_fn=lambda: None)
    time.sleep(0.5)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("mode, said", [("hook", "interrupted"), ("none", "went on")])
def test_an_interrupt_lost_in_an_at_fork_hook_is_raised_again(mode: str, said: str) -> None:
    cp = subprocess.run([sys.executable, "-c", FORK_INTERRUPTED, mode], capture_output=True,
                        text=True, timeout=30)
    assert cp.stdout.strip() == said, cp.stderr
    if mode == "none":  # the control: without the hook Python ignores it, and says so
        assert "Exception ignored" in cp.stderr


def test_other_unraisable_exceptions_are_still_reported() -> None:
    code = textwrap.dedent("""
        from sfclab.kernel import process
        process.interrupts_never_lost()
        class Bad:
            def __del__(self):
                raise ValueError("in del")
        Bad()
        print("went on")
    """)
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert cp.stdout.strip() == "went on"
    assert "ValueError: in del" in cp.stderr


#: a child forgotten by its parent, and an orphaned grandchild (its parent exits at once)
ORPHANS = """
import os, subprocess, sys
from sfclab.kernel import process
with process.owning_children():
    forgotten = subprocess.Popen(["sleep", "60"])
    sh = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
                        capture_output=True, text=True)
    print(forgotten.pid, sh.stdout.strip(), flush=True)
    del forgotten
    print(sorted(process.children()), flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_owning_children_ends_a_forgotten_child_and_an_orphaned_grandchild() -> None:
    cp = subprocess.run([sys.executable, "-c", ORPHANS], capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 0, cp.stderr
    first, listed = cp.stdout.splitlines()
    forgotten, grandchild = (int(p) for p in first.split())
    # both were this process's children: the grandchild re-parented to the subreaper
    assert str(forgotten) in listed and str(grandchild) in listed
    deadline = time.monotonic() + 5
    while (_alive(forgotten) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(forgotten) and not _alive(grandchild)


def test_end_children_leaves_processes_that_are_not_its_children() -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        code = "from sfclab.kernel import process; print(process.end_children(0.2))"
        cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30)
        assert cp.stdout.strip() == "[]"
        assert other.poll() is None  # ours (the test's), not the child process's
    finally:
        other.kill()
        other.wait()


def test_parent_of_names_the_parent() -> None:
    assert process.parent_of(os.getpid()) == os.getppid()
    assert os.getpid() in process.children(os.getppid())
