"""This process: the children it answers for, and interrupts it never loses.

**Children.**
A program that is interrupted while it starts a child (SIGINT between ``fork`` and the moment
``subprocess.Popen`` returns) never learns the child's PID, and the child lives on as an
orphan.  :func:`owning_children` closes that gap: it makes this process a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``), so every descendant that loses its parent is re-parented here
rather than to PID 1, and on exit it ends every child this process still has.

Ownership is proven, not assumed: a child's PID cannot be reused until its parent reaps it, so
a process whose parent is this one (checked after a pidfd was opened on it, see
:func:`sfclab.kernel.netns.end_processes`) is ours.  Nothing is found by name or pattern.

**CPU time.**  :func:`reap` waits for a child with ``os.wait4``: its exit status and the CPU
seconds ``rusage`` counted, exact even once it has exited; :func:`process_cpu_seconds` reads
those of a process still running (a measurement's programs are held so, here and by a host's
agent: :mod:`sfclab.realize.runtime.process`).

**Interrupts.**  Python runs a signal's handler at the next bytecode boundary, which may be
inside code whose exceptions the interpreter ignores: an ``os.register_at_fork`` hook (the
``logging`` module's runs after every fork), a ``__del__`` or a weakref callback.  A SIGINT that
lands while a child is being forked then raises its ``KeyboardInterrupt`` there, where it is
printed as "Exception ignored" and lost, and the program goes on as if never interrupted.
:func:`interrupts_never_lost` hands such a lost ``KeyboardInterrupt`` back to the main thread
(``_thread.interrupt_main``, from a thread of its own a few milliseconds later), where it is
raised again at the next boundary outside the hook.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any


PR_SET_CHILD_SUBREAPER = 36
#: how many generations of re-parented descendants :func:`end_children` follows
PASSES = 3


def become_subreaper() -> None:
    """Take this process's orphaned descendants as its children (``PR_SET_CHILD_SUBREAPER``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def parent_of(pid: int) -> int | None:
    """The parent PID of ``pid`` (``None`` once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def children(pid: int | None = None) -> list[int]:
    """The PIDs whose parent is ``pid`` (this process by default), zombies included."""
    me = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and parent_of(int(entry)) == me:
            found.append(int(entry))
    return sorted(found)


def end_children(grace: float = 2.0) -> list[int]:
    """End every child this process still has (SIGTERM, then SIGKILL after ``grace`` s) and
    reap them; each is checked to be ours after its pidfd was opened.  Returns those ended."""
    from . import netns  # light start-up: the CLI installs the interrupt hook on every command

    me = os.getpid()
    ended: list[int] = []
    for _ in range(PASSES):  # an ended child's own children are re-parented here: end them too
        running = [p for p in children() if p not in ended]
        if not running:
            break
        ended += netns.end_processes(running, grace, owned=lambda p: parent_of(p) == me)
    for pid in children():  # reap what has exited (zombies included), never wait for the rest
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return ended


@contextlib.contextmanager
def owning_children(grace: float = 2.0) -> Iterator[None]:
    """For the ``with`` block: this process is a subreaper, and when the block ends (however
    it ends) every child still running is ended by PID."""
    become_subreaper()
    try:
        yield
    finally:
        end_children(grace)


#: clock ticks per second (``/proc/PID/stat``'s unit of CPU time)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_pid_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of ``/proc/PID/stat``.

    The command name (field 2) may hold spaces and parentheses, so split after the last ``)``.
    """
    rest = text.rsplit(")", 1)[1].split()
    # rest[0] is field 3 (state); utime and stime are fields 14 and 15
    return int(rest[11]), int(rest[12])


def process_cpu_seconds(pid: int) -> float | None:
    """utime+stime of ``pid`` in seconds, or None if it is gone (sample before reaping it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ut, st = parse_pid_stat(f.read())
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None
    return (ut + st) / CLK_TCK


def reap(pid: int, *, block: bool = False) -> tuple[int, float] | None:
    """``os.wait4`` a child: ``(exit code, CPU seconds)``, or None if it still runs (non-blocking).

    The exit code follows ``subprocess``: negative for a signal.  Raises ``ChildProcessError``
    if ``pid`` is not our child or was already reaped.
    """
    wpid, status, ru = os.wait4(pid, 0 if block else os.WNOHANG)
    if wpid == 0:
        return None
    return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime


#: how long the re-raised interrupt waits for the main thread to leave the hook
REDELIVER_AFTER_S = 0.005


def _interrupt_main_soon() -> None:
    time.sleep(REDELIVER_AFTER_S)
    _thread.interrupt_main(signal.SIGINT)


def interrupts_never_lost() -> None:
    """From now on, a ``KeyboardInterrupt`` the interpreter would ignore (raised in an at-fork
    hook, a ``__del__`` or a callback) is raised again in the main thread; every other
    unraisable exception is reported as before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # not from here: the handler would run at once, in this hook, and be lost again
            threading.Thread(target=_interrupt_main_soon, daemon=True,
                             name="interrupt-again").start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
