"""A function whose behaviour is a program running in its namespace (``dpi``, ``tun``).

:class:`ProcessFunction` starts ``program()`` through :meth:`FunctionContext.spawn` — inside
the node's cgroups when ``cpu`` or ``memory`` is set — with stdout and stderr going to
``<state_dir>/<kind>.log``; ``stop`` ends it by PID and removes the cgroups; ``inspect``
reports whether it still runs and its cgroup figures (including OOM kills).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

from ..errors import RealizeError
from . import cgroups
from .base import NetworkFunction


#: how long a started program must stay up for ``up`` to count it started
START_GRACE_S = 0.05


class ProcessFunction(NetworkFunction):
    """Base of functions that run one program; subclasses define ``program()``."""

    Params: ClassVar[type[cgroups.LimitParams]] = cgroups.LimitParams
    params: cgroups.LimitParams

    def program(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return {}

    @property
    def log_path(self) -> Path:
        return self.ctx.state_dir / f"{self.kind}.log"

    def start(self) -> None:
        self.ctx.state_dir.mkdir(parents=True, exist_ok=True)
        dirs = cgroups.create(self.ctx, self.params)
        argv = cgroups.wrap(self.program(), cgroups.host_dirs(self.ctx) + dirs)
        env = dict(os.environ, SFCLAB_LAB=self.ctx.lab, SFCLAB_NODE=self.ctx.node,
                   SFCLAB_STATE_DIR=str(self.ctx.state_dir), **self.environment())
        with open(self.log_path, "ab") as log:
            self.proc = self.ctx.spawn(argv, stdout=log, stderr=log, env=env)
        try:  # a program that dies as it starts (bad arguments, killed by its limits) fails up
            status = self.proc.wait(timeout=START_GRACE_S)
        except subprocess.TimeoutExpired:
            return
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
        raise RealizeError(f"exited at start with status {status}"
                           + (f": {' / '.join(tail)}" if tail else ""),
                           obj=f"function {self.ctx.node}")

    def stop(self) -> None:
        super().stop()
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.poll()
        cgroups.remove(self.ctx)

    def running_pids(self) -> list[int]:
        return [p for p in self.ctx.recorded_pids() if self.ctx.owns_pid(p)
                and _not_zombie(p)]

    def signal(self, sig: int = signal.SIGUSR1) -> bool:
        """Send ``sig`` to the running program; False if it does not run."""
        sent = False
        for pid in self.running_pids():
            try:
                os.kill(pid, sig)
                sent = True
            except ProcessLookupError:
                pass
        return sent

    def refresh(self, path: Path, timeout: float = 1.0) -> None:
        """Ask the program (SIGUSR1) to rewrite ``path`` and wait until it did (or timeout)."""
        try:
            before = path.stat().st_mtime_ns
        except FileNotFoundError:
            before = None
        if not self.signal(signal.SIGUSR1):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if path.stat().st_mtime_ns != before:
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.02)

    def inspect(self) -> dict[str, Any]:
        pids = self.running_pids()
        out: dict[str, Any] = {"running": bool(pids), "pids": pids, "log": str(self.log_path)}
        out.update(cgroups.usage(self.ctx))
        return out


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
