"""The agent kept running between calls: ``python -m sfclab.live.runtime.agent_verbs --serve``.

A call that starts the agent pays Python's start and the imports of the verb's module (about
50 ms of CPU a call on the development machine, more than the SSH session it now runs in,
:mod:`sfclab.hosts.ssh_pool`).  Served, the agent reads one request per line on stdin,
``{"verb": V, "request": {...}}``, and answers each with one line, ``{"status": S, "out":
"...", "err": "..."}``: what the verb run alone would have exited with and printed on standard
output and error.  It ends at the end of its input (the client closed the session).

Each request runs in a child forked for it, exactly as a run of its own: its own process
(namespaces it enters, files and descriptors it opens, signals it gets are its own and end
with it), standard input empty, output and errors read through pipes.  The server itself
only imports: a verb's module is imported in the server before the first child that runs it
is forked, so later children have it already.  Armed verbs are not served (they talk with the
client between their two phases): the client runs those as commands of their own.
"""

from __future__ import annotations

import io
import json
import os
import select
import sys
import traceback
from collections.abc import Mapping
from typing import Any, BinaryIO

#: the most a request line may hold (a plan of the largest lab is a few hundred KB)
MAX_REQUEST = 64 << 20


def serve(verbs: Mapping[str, Any], armed: Mapping[str, Any], module: str,
          stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Answer requests until the end of ``stdin``; 0, or 2 for a line that is no request."""
    from .agent import main

    rd = stdin if stdin is not None else sys.stdin.buffer
    wr = stdout if stdout is not None else sys.stdout.buffer
    while True:
        line = rd.readline(MAX_REQUEST + 1)
        if not line:
            return 0
        try:
            msg = json.loads(line)
            verb, request = msg["verb"], msg["request"]
            if not isinstance(verb, str) or not isinstance(request, dict):
                raise ValueError("expected a verb and a request object")
        except (ValueError, KeyError, TypeError) as e:
            print(f"agent --serve: bad request line: {e}", file=sys.stderr)
            return 2
        if verb in verbs and verb not in armed:
            verbs[verb]  # noqa: B018  (its module imported here: the children have it)
        answer = run_forked(lambda: main([verb], verbs, armed, module=module),
                            json.dumps(request))
        wr.write(json.dumps(answer).encode() + b"\n")
        wr.flush()


def run_forked(run: Any, request: str) -> dict[str, Any]:
    """``run()`` in a forked child with ``request`` as its standard input; its exit status and
    what it printed (``status`` 255 when a signal ended it)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: one verb, as a run of its own
        status = 1
        try:
            os.close(out_r)
            os.close(err_r)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (null, out_w, err_w):
                os.close(fd)
            sys.stdin = io.StringIO(request)
            # what it prints goes to the pipes (whatever sys.stdout was in the server)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            status = run()
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    os.close(out_w)
    os.close(err_w)
    return _collect(pid, out_r, err_r)


def _collect(pid: int, out_r: int, err_r: int) -> dict[str, Any]:
    """Read the child's output and errors until it has exited and they are drained (a process
    it left running with them open does not hold the answer back); its status."""
    pidfd = os.pidfd_open(pid)
    bufs: dict[int, bytearray] = {out_r: bytearray(), err_r: bytearray()}
    open_fds = [out_r, err_r]
    exited = False
    try:
        while open_fds:
            ready = select.select([*open_fds, *([] if exited else [pidfd])], [], [])[0]
            if pidfd in ready:
                exited = True
                for fd in open_fds:  # what it wrote before it ended, and no more waiting
                    os.set_blocking(fd, False)
            for fd in [f for f in ready if f in bufs]:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    chunk = b""
                if chunk:
                    bufs[fd] += chunk
                else:
                    open_fds.remove(fd)
            if exited:  # drain what is left without blocking, then stop
                for fd in list(open_fds):
                    while True:
                        try:
                            chunk = os.read(fd, 1 << 16)
                        except BlockingIOError:
                            break
                        if not chunk:
                            break
                        bufs[fd] += chunk
                    open_fds.remove(fd)
        _, st = os.waitpid(pid, 0)
    finally:
        os.close(pidfd)
        os.close(out_r)
        os.close(err_r)
    code = os.waitstatus_to_exitcode(st)
    return {"status": code if code >= 0 else 255,
            "out": bufs[out_r].decode(errors="replace"),
            "err": bufs[err_r].decode(errors="replace")}
