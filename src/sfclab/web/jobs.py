"""Measurements started over the API, each run in the background by a worker process.

A :class:`Job` is one measurement on one lab: its request, its status (``running``, ``done``,
``failed``, ``stopped``), the progress events the measurement reported (one per trial), and its
result or error.  :class:`Jobs` allows one running measurement per lab (a second is a clash:
two generators would measure each other), keeps the last result of each lab (the page paints
its per-hop loss), and ``close()`` interrupts every running worker with SIGINT and waits for it
to clean up, which is what ``serve`` does on Ctrl-C or SIGTERM.

A worker is signalled through a pidfd opened when it started (``pidfd_send_signal``), never by
its PID alone: once the worker has ended and been reaped the pidfd still names that process,
so a signal can never reach another one that took its PID.  The worker ends its own tools
(generators, iperf3) by pidfd as it unwinds (:mod:`sfclab.web.worker`).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import Clash, NotFound
from .progress import goals_of, trial_row

#: how long a stopped worker may take to unwind before it is killed
STOP_GRACE = 60.0


@dataclass
class Job:
    id: int
    lab: str
    request: dict[str, Any]
    status: str = "running"
    started: float = field(default_factory=time.time)
    ended: float | None = None
    progress: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per progress event
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    error_status: int | None = None
    stopping: bool = False  # stop() asked it to end
    proc: subprocess.Popen[str] | None = field(default=None, repr=False)
    pidfd: int | None = field(default=None, repr=False)  # the worker's, open while it runs
    pidfd_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self, full: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "lab": self.lab, "type": self.request.get("type"),
                             "request": self.request, "status": self.status,
                             "started": self.started, "ended": self.ended,
                             "trials": len(self.progress), "error": self.error}
        if full:
            d["progress"] = self.progress
            d["rows"] = self.rows
            d["result"] = self.result
        return d


class Jobs:
    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, lab: str, request: dict[str, Any]) -> Job:
        """Start measuring ``request`` (already validated) on ``lab``."""
        with self._lock:
            busy = [j for j in self._jobs.values() if j.lab == lab and j.status == "running"]
            if busy:
                raise Clash(f"measurement {busy[0].id} is still running on lab '{lab}'; stop it "
                            f"(DELETE /api/measurements/{busy[0].id}) or wait for it")
            job = Job(next(self._ids), lab, request)
            job.proc = subprocess.Popen(
                [self.python, "-m", "sfclab.web.worker", lab], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, start_new_session=True)
            job.pidfd = os.pidfd_open(job.proc.pid)  # not yet reaped: this very process
            self._jobs[job.id] = job
        assert job.proc.stdin is not None
        job.proc.stdin.write(json.dumps(request))
        job.proc.stdin.close()
        threading.Thread(target=self._follow, args=(job,), daemon=True,
                         name=f"measurement-{job.id}").start()
        return job

    def _follow(self, job: Job) -> None:
        assert job.proc is not None and job.proc.stdout is not None
        for line in job.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "progress" and isinstance(ev.get("data"), dict):
                job.rows.append(trial_row(ev["data"], job.rows, goals_of(job.request)))
                job.progress.append(ev["data"])
            elif ev.get("event") == "result":
                job.result = ev.get("data")
            elif ev.get("event") == "error":
                job.error, job.error_status = ev.get("body"), ev.get("status")
        code = job.proc.wait()
        job.ended = time.time()
        self._close_pidfd(job)
        if job.result is not None and code == 0:
            job.status = "done"
        elif job.stopping or job.error_status == 499:
            job.status = "stopped"
        else:
            job.status = "failed"
            job.error = job.error or {"error": f"the measurement worker ended with status {code}",
                                      "type": "WorkerError"}

    def get(self, job_id: int) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise NotFound(f"no measurement {job_id}") from None

    def listing(self, lab: str | None = None) -> list[Job]:
        return [j for j in self._jobs.values() if lab is None or j.lab == lab]

    def running(self, lab: str) -> Job | None:
        return next((j for j in self._jobs.values()
                     if j.lab == lab and j.status == "running"), None)

    def last_done(self, lab: str) -> Job | None:
        done = [j for j in self._jobs.values() if j.lab == lab and j.status == "done"]
        return done[-1] if done else None

    def stop(self, job_id: int, wait: float = STOP_GRACE) -> Job:
        """Interrupt a running measurement (SIGINT, as Ctrl-C) and wait until it has unwound."""
        job = self.get(job_id)
        p = job.proc
        if job.status == "running" and p is not None and p.poll() is None:
            if not job.stopping:  # once: a second SIGINT would interrupt the unwinding
                job.stopping = True
                self._signal(job, signal.SIGINT)
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                self._signal(job, signal.SIGKILL)
                p.wait()
        deadline = time.monotonic() + 5
        while job.status == "running" and time.monotonic() < deadline:
            time.sleep(0.02)  # the follower thread records the end
        return job

    def close(self) -> None:
        """Interrupt every running measurement at once, then wait for each to unwind."""
        running = [j for j in self._jobs.values() if j.status == "running"]
        for j in running:
            if j.proc is not None and j.proc.poll() is None:
                j.stopping = True
                self._signal(j, signal.SIGINT)
        for j in running:
            self.stop(j.id)

    @staticmethod
    def _signal(job: Job, sig: int) -> None:
        """Send ``sig`` to the job's worker through its pidfd (nothing once it has ended)."""
        with job.pidfd_lock:
            if job.pidfd is None:
                return
            try:
                signal.pidfd_send_signal(job.pidfd, sig)
            except ProcessLookupError:
                pass  # it has exited; the pidfd never names another process

    @staticmethod
    def _close_pidfd(job: Job) -> None:
        with job.pidfd_lock:
            if job.pidfd is not None:
                os.close(job.pidfd)
                job.pidfd = None

