"""Reaching a real host over SSH (asyncssh): one agent command per call, JSON in and out.

A call reaches the host's underlay address as ``user`` with ``key``, on a connection kept from
an earlier call (:mod:`.ssh_pool`) or a new one that checks the host's key against
``known_hosts`` (no unknown host is ever trusted).  There the agent,
``SFCLAB_STATE_DIR=<state> <python> -m sfclab.live.runtime.agent_verbs --serve``, started by an
earlier call and kept idle on the connection or started now, runs the verb with the request in
a process of its own (:mod:`sfclab.realize.agent_serve`) and the call returns its JSON answer.
Armed verbs (:func:`call_armed`) run as ``... agent_verbs <verb>``, one agent each, the request
as JSON on stdin.  The connection leaves from namespace
``netns`` of this machine when one is given (sockets stay in the namespace they were opened
in), so a test's SSH traffic never leaves the lab's underlay.

:func:`run_attached` runs a command line there with standard input, output and error passed
through (``sfclab exec`` of a node on that host) and returns its exit status.

An unreachable host (refused, timed out, unknown host key, authentication refused) raises
:class:`HostUnreachable`; an agent that answers with a failure raises :class:`AgentError` with
its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import stat
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import RealizeError
from ..kernel import netns as kernel_netns
from . import ssh_pool

AGENT_MODULE = "sfclab.live.runtime.agent_verbs"


class HostUnreachable(RealizeError):
    """A host that could not be reached over SSH (its part is left for a later retry).

    ``reason`` says why in one word: ``refused`` (nothing listens), ``timeout`` (no answer in
    time), ``auth`` (the key was refused), ``host-key`` (its host key is not trusted),
    ``network`` (no route, host or network unreachable) or ``ssh`` (another SSH failure)."""

    def __init__(self, message: str, *, host: str = "", address: str = "",
                 reason: str = "ssh"):
        self.host = host
        self.address = address
        self.reason = reason
        super().__init__(message)


class AgentError(RealizeError):
    """A host's agent that answered with a failure."""


@dataclass
class SshTarget:
    """Where and how to reach one host (everything a later ``down`` needs: journaled)."""

    host: str
    address: str
    user: str = "root"
    key: str | None = None
    port: int = 22
    python: str = "python3"
    state: str = "/run/sfclab"
    netns: str | None = None
    known_hosts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SshTarget:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def command(self, verb: str, module: str = AGENT_MODULE) -> str:
        return (f"SFCLAB_STATE_DIR={shlex.quote(self.state)} {shlex.quote(self.python)} "
                f"-m {module} {shlex.quote(verb)}")


def call(t: SshTarget, verb: str, request: dict[str, Any], *, timeout: float = 120,
         connect_timeout: float = 10, module: str = AGENT_MODULE) -> dict[str, Any]:
    """Run agent ``verb`` on host ``t`` with ``request``; its JSON answer.  ``module``: the
    agent's module (default: the one table of every verb,
    :mod:`sfclab.live.runtime.agent_verbs`)."""
    status, out, err = _served(t, verb, request, module, timeout, connect_timeout)
    if status != 0:
        msg = (err or out).strip().splitlines()
        raise AgentError(f"host {t.host}: agent {verb} failed (exit {status}): "
                         f"{msg[-1] if msg else 'no message'}")
    return _answer(t, verb, out)


def _answer(t: SshTarget, verb: str, out: str) -> dict[str, Any]:
    """Agent ``verb``'s answer on host ``t``: a JSON object, else :class:`AgentError`."""
    try:
        answer = json.loads(out)
    except json.JSONDecodeError:
        raise AgentError(f"host {t.host}: agent {verb} answered no JSON: {out[:200]!r}") \
            from None
    if not isinstance(answer, dict):
        raise AgentError(f"host {t.host}: agent {verb} answered {type(answer).__name__}")
    return answer


def call_armed(ts: dict[str, SshTarget], verb: str, request: dict[str, Any], *,
               timeout: float = 120, connect_timeout: float = 10,
               module: str = AGENT_MODULE) -> tuple[dict[str, dict[str, Any]], float]:
    """Armed verb ``verb`` on every host of ``ts`` at once, in two phases: each host's agent
    makes everything ready and answers ``armed``; once all have, each is told ``go`` (within a
    thread switch of the others) and acts.  The answers by host, and the seconds from ``go``
    to the last answer (what the hosts' changes are apart, at most).  If a host cannot be
    reached or fails to arm, the others are never told ``go``: their input is closed and they
    change nothing; its failure is raised (:class:`HostUnreachable` or :class:`AgentError`).
    """
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor, wait

    t_go: list[float] = []
    gate = threading.Barrier(len(ts), action=lambda: t_go.append(time.perf_counter()))
    line = json.dumps(request) + "\n"

    def one(t: SshTarget) -> tuple[dict[str, Any], float]:
        ctx = kernel_netns.entered(t.netns) if t.netns else contextlib.nullcontext()
        try:
            with ctx:  # the socket is opened in this thread, so in the namespace
                return asyncio.run(_armed(t, t.command(verb, module), line, gate, timeout,
                                          connect_timeout))
        except BaseException:
            gate.abort()  # the others close their agents' input: nothing changes there
            raise

    if not ts:
        return {}, 0.0
    with ThreadPoolExecutor(max_workers=len(ts)) as ex:
        futures = {h: ex.submit(one, t) for h, t in ts.items()}
        wait(futures.values())
    failed = [f.exception() for f in futures.values() if f.exception() is not None]
    real = [e for e in failed if not isinstance(e, threading.BrokenBarrierError)]
    if failed:
        raise (real or failed)[0]  # type: ignore[misc]
    done = {h: f.result() for h, f in futures.items()}
    return {h: a for h, (a, _) in done.items()}, max(d for _, d in done.values()) - t_go[0]


async def _armed(t: SshTarget, command: str, line: str, gate: Any, timeout: float,
                 connect_timeout: float) -> tuple[dict[str, Any], float]:
    """One host's side of :func:`call_armed`: its answer and when it came."""
    import time

    import asyncssh  # light start-up: only labs with real hosts load it

    def failed(what: str, err: str) -> AgentError:
        msg = err.strip().splitlines()
        return AgentError(f"host {t.host}: agent {what} (armed): "
                          f"{msg[-1] if msg else 'no message'}")

    try:
        async with asyncssh.connect(t.address, **_options(t, connect_timeout)) as conn:
            proc = await conn.create_process(command)
            proc.stdin.write(line)
            first = await asyncio.wait_for(proc.stdout.readline(), timeout)
            if first.strip() != json.dumps({"armed": True}):
                proc.stdin.write_eof()
                raise failed("did not arm", first + await proc.stderr.read())
            try:
                await asyncio.get_running_loop().run_in_executor(None, gate.wait, timeout)
            except BaseException:
                proc.stdin.write_eof()  # not told to go: it changes nothing
                await proc.wait()
                raise
            proc.stdin.write("go\n")
            answer = await asyncio.wait_for(proc.stdout.readline(), timeout)
            at = time.perf_counter()
            proc.stdin.write_eof()
            r = await proc.wait()
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
        raise HostUnreachable(f"host {t.host} ({t.user}@{t.address}:{t.port}) unreachable "
                              f"over SSH: {e or type(e).__name__}", host=t.host,
                              address=t.address, reason=reason_of(e)) from None
    if r.exit_status != 0:
        raise failed(f"failed (exit {r.exit_status})", str(r.stderr or ""))
    return _answer(t, "(armed)", answer), at


def run_captured(t: SshTarget, argv: list[str], *, input: str | None = None,
                 timeout: float = 60, connect_timeout: float = 10) -> tuple[int, str, str]:
    """Run ``argv`` (a command line of host ``t``) there with ``input``; its exit status,
    standard output and standard error."""
    return _run(t, shlex.join(argv), input or "", timeout, connect_timeout)


def run_attached(t: SshTarget, argv: list[str], *, connect_timeout: float = 10) -> int:
    """Run ``argv`` (a command line of host ``t``) there with this process's standard output
    and error passed through as they come, and its standard input when that is a pipe, socket
    or file; the command's exit status (255 if it gave none).  When standard input and output
    are a terminal, the command gets a terminal there (as ``ssh -t``: interactive programs
    work, its output and errors both come through the terminal), this one raw meanwhile and
    restored after."""
    ctx = kernel_netns.entered(t.netns) if t.netns else contextlib.nullcontext()
    with ctx:  # the socket is opened in this thread, so in the namespace
        if os.isatty(0) and os.isatty(1):
            with _raw_terminal():
                return asyncio.run(_attached(t, shlex.join(argv), connect_timeout, True))
        return asyncio.run(_attached(t, shlex.join(argv), connect_timeout, False))


@contextlib.contextmanager
def _raw_terminal() -> Iterator[None]:
    """This process's terminal raw (keys go to the remote terminal as typed, Ctrl-C too), its
    modes and the descriptors' flags (asyncio makes them non-blocking) restored after."""
    import fcntl
    import termios
    import tty

    saved = termios.tcgetattr(0)
    flags = {fd: fcntl.fcntl(fd, fcntl.F_GETFL) for fd in (0, 1, 2)}
    tty.setraw(0, termios.TCSANOW)  # keep what was typed ahead
    try:
        yield
    finally:
        for fd, fl in flags.items():
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETFL, fl)
        termios.tcsetattr(0, termios.TCSADRAIN, saved)


async def _attached(t: SshTarget, command: str, connect_timeout: float, terminal: bool) -> int:
    import asyncssh  # light start-up: only labs with real hosts load it

    sys.stdout.flush()
    sys.stderr.flush()
    # asyncssh closes what it is handed: duplicates of this process's descriptors.  Standard
    # input is passed on from a terminal (with a terminal there), a pipe, socket or file; not
    # from another device (/dev/null: nothing to wait for, and a device cannot be polled)
    mode = os.fstat(0).st_mode
    stdin: Any = os.dup(0) if terminal or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or \
        stat.S_ISREG(mode) else asyncssh.DEVNULL
    term: dict[str, Any] = {}
    if terminal:
        size = os.get_terminal_size(1)
        term = {"term_type": os.environ.get("TERM") or "xterm",
                "term_size": (size.columns, size.lines)}
    try:
        async with asyncssh.connect(t.address, **_options(t, connect_timeout)) as conn:
            r = await conn.run(command, stdin=stdin, stdout=os.dup(1), stderr=os.dup(2),
                               encoding=None, check=False, **term)
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
        raise HostUnreachable(f"host {t.host} ({t.user}@{t.address}:{t.port}) unreachable "
                              f"over SSH: {e or type(e).__name__}", host=t.host,
                              address=t.address, reason=reason_of(e)) from None
    return r.exit_status if r.exit_status is not None else 255


def _options(t: SshTarget, connect_timeout: float) -> dict[str, Any]:
    options: dict[str, Any] = {
        "port": t.port, "username": t.user, "connect_timeout": connect_timeout,
        "agent_path": None, "config": None,
        # a kept connection to a host gone silent is found dead within about 10 s (three
        # unanswered keepalives 3 s apart), as a new one would time out
        "keepalive_interval": 3, "keepalive_count_max": 3,
    }
    if t.known_hosts:  # else asyncssh's default: ~/.ssh/known_hosts
        options["known_hosts"] = t.known_hosts
    if t.key:
        options["client_keys"] = [t.key]
    return options


def reason_of(e: BaseException) -> str:
    """Why a connection failed, in one word (see :class:`HostUnreachable`)."""
    import asyncssh  # light start-up: only labs with real hosts load it

    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(e, asyncssh.HostKeyNotVerifiable):
        return "host-key"
    if isinstance(e, asyncssh.PermissionDenied):
        return "auth"
    if isinstance(e, OSError):
        return "network"
    return "ssh"


def _run(t: SshTarget, command: str, stdin: str, timeout: float,
         connect_timeout: float) -> tuple[int, str, str]:
    """``command`` on host ``t`` with ``stdin``, in a session of a kept connection
    (:mod:`.ssh_pool`); its exit status, output and errors."""
    import asyncssh  # light start-up: only labs with real hosts load it

    async def session(c: ssh_pool.Conn) -> Any:
        try:
            proc = await asyncio.wait_for(c.conn.create_process(command), connect_timeout)
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
            raise ssh_pool.SessionNotOpened(e) from e
        try:
            proc.stdin.write(stdin)
            proc.stdin.write_eof()
        except BrokenPipeError:  # the command ended before reading it: its status says why
            pass
        return await proc.wait(check=False, timeout=timeout)

    r = _pooled(t, connect_timeout, session)
    out = r.stdout if isinstance(r.stdout, str) else (r.stdout or b"").decode()
    err = r.stderr if isinstance(r.stderr, str) else (r.stderr or b"").decode()
    status = r.exit_status if r.exit_status is not None else 255
    return status, out, err


def _served(t: SshTarget, verb: str, request: dict[str, Any], module: str, timeout: float,
            connect_timeout: float) -> tuple[int, str, str]:
    """Plain verb ``verb`` by a served agent on host ``t`` (one kept idle on the connection,
    or a new one: :mod:`sfclab.realize.agent_serve`); its exit status, output and errors, as
    a run of its own would give them."""
    import asyncssh  # light start-up: only labs with real hosts load it

    command = t.command("--serve", module)
    line = json.dumps({"verb": verb, "request": request}) + "\n"

    async def session(c: ssh_pool.Conn) -> tuple[int, str, str]:
        proc: Any = c.take_agent(command)
        if proc is None:
            try:
                proc = await asyncio.wait_for(c.conn.create_process(command), connect_timeout)
            except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
                raise ssh_pool.SessionNotOpened(e) from e
        answered = False
        try:
            try:
                proc.stdin.write(line)
            except (BrokenPipeError, ConnectionError):
                pass  # it ended before it read (it could not start): its status says why
            got = await asyncio.wait_for(proc.stdout.readline(), timeout)
            if not got:  # it ended before it answered (it could not start): why, as a run
                r = await proc.wait(check=False, timeout=5.0)  # of the verb alone would say
                msg = str(r.stderr or "").strip().splitlines()
                status = r.exit_status if r.exit_status is not None else 255
                raise AgentError(f"host {t.host}: agent {verb} failed (exit {status}): "
                                 f"{msg[-1] if msg else 'no message'}")
            a = json.loads(got)
            answered = True
            return int(a["status"]), str(a["out"]), str(a["err"])
        finally:
            if answered:
                c.put_agent(command, proc)
            else:
                proc.close()

    return _pooled(t, connect_timeout, session)


def _pooled(t: SshTarget, connect_timeout: float, session: Any) -> Any:
    """``session`` on a kept connection to host ``t`` (:func:`.ssh_pool.with_session`); a
    connection refused, timed out or failed is :class:`HostUnreachable`."""
    import asyncssh  # light start-up: only labs with real hosts load it

    async def connect(sock: Any) -> Any:
        return await asyncssh.connect(t.address, sock=sock, **_options(t, connect_timeout))

    key = (t.address, t.port, t.user, t.key, t.known_hosts, t.netns)
    try:
        return ssh_pool.with_session(key, t.netns, t.address, t.port, connect_timeout, connect,
                                     session)
    except (OSError, asyncio.TimeoutError, asyncssh.Error, ssh_pool.SessionNotOpened) as e:
        cause = e.args[0] if isinstance(e, ssh_pool.SessionNotOpened) and e.args else e
        raise HostUnreachable(f"host {t.host} ({t.user}@{t.address}:{t.port}) unreachable "
                              f"over SSH: {cause or type(cause).__name__}", host=t.host,
                              address=t.address, reason=reason_of(cause)) from None
