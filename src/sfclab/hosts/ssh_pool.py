"""SSH connections kept open between calls, one per host, for a few seconds of quiet.

An agent call used to open its own SSH connection: TCP, key exchange, host key check and
public-key authentication, about 90 ms of a 140 ms call to an emulated host, and as much CPU
again on both sides, for each of the hundreds of calls a ``chain migrate`` or a ``trace`` makes.
As OpenSSH's ``ControlPersist`` does, a connection here stays open after its call and the next
call to the same host (same address, port, user, key, known-hosts file and namespace) opens a
new session (an SSH channel) on it.  Sessions of one connection run side by side (sshd allows
10 at once by default: :data:`MAX_SESSIONS`); a connection with that many open is not shared
further, a new one is opened.

- **Where connections live:** one event loop on a thread of its own (``sfclab-ssh``); callers
  on any thread hand it their coroutine and wait.  The TCP socket is opened by the calling
  thread, inside the namespace the target names (sockets stay in the namespace they were
  opened in), and handed to the SSH client.
- **How long:** a connection no call used for :data:`IDLE_S` seconds is closed, and every one
  when the process exits; :func:`forget` closes those to one address now (a host removed or
  stopped).  A process that forks gets a fresh pool (a connection is never shared by two
  processes).
- **A connection found dead** (the host restarted, the peer closed it) fails when its next
  session is opened, before any command ran there: it is dropped and the call is made once more
  on a new connection.  A failure after the session opened is never retried (the command may
  have run); the connection is closed, as one that timed out is.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..kernel import netns as kernel_netns

T = TypeVar("T")

#: a connection unused this long is closed
IDLE_S = 5.0
#: sessions one connection carries at once (OpenSSH's ``MaxSessions`` default)
MAX_SESSIONS = 10


class SessionNotOpened(Exception):
    """A session could not be opened on a kept connection: no command ran there."""


#: served agents (:mod:`sfclab.realize.agent_serve`) kept idle on one connection, at most
MAX_IDLE_AGENTS = 4


@dataclass
class Conn:
    """One kept connection: ``conn`` (asyncssh's), the sessions using it now, and the served
    agents idle on it (by the command that started them), for the next calls.  The agents are
    taken and put back by sessions, on the pool's loop only (so without a lock)."""

    conn: Any  # asyncssh.SSHClientConnection
    key: tuple[Any, ...]
    users: int = 0
    last: float = field(default_factory=time.monotonic)
    idle: dict[str, list[Any]] = field(default_factory=dict)

    def take_agent(self, command: str) -> Any | None:
        """An idle served agent started by ``command`` that has not ended, or None."""
        procs = self.idle.get(command, [])
        while procs:
            p = procs.pop()
            if p.exit_status is None and not p.is_closing() and not p.stdout.at_eof():
                return p
            p.close()
        return None

    def put_agent(self, command: str, proc: Any) -> None:
        """``proc`` idle again; closed if :data:`MAX_IDLE_AGENTS` wait already."""
        procs = self.idle.setdefault(command, [])
        if len(procs) < MAX_IDLE_AGENTS:
            procs.append(proc)
            return
        proc.close()



class Pool:
    """The kept connections of this process, and the loop that drives them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.lock = threading.Lock()
        self.conns: list[Conn] = []
        self.thread = threading.Thread(target=self._serve, name="sfclab-ssh", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_later(IDLE_S, self._sweep)
        self.loop.run_forever()

    def submit(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the pool's loop; its result (or exception) here."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    def _sweep(self) -> None:
        """Close the connections idle for :data:`IDLE_S` (on the loop)."""
        now = time.monotonic()
        with self.lock:
            idle = [c for c in self.conns if c.users == 0 and now - c.last >= IDLE_S]
            self.conns = [c for c in self.conns if c not in idle]
        for c in idle:
            c.conn.close()
        self.loop.call_later(1.0, self._sweep)

    def take(self, key: tuple[Any, ...]) -> Conn | None:
        """A kept, open connection for ``key`` with a session free, now counted as used."""
        with self.lock:
            for c in self.conns:
                if c.key == key and c.users < MAX_SESSIONS and not c.conn.is_closed():
                    c.users += 1
                    return c
        return None

    def add(self, key: tuple[Any, ...], conn: Any) -> Conn:
        c = Conn(conn, key, users=1)
        with self.lock:
            self.conns.append(c)
        return c

    def give_back(self, c: Conn, ok: bool) -> None:
        """The call on ``c`` is over; a failed one's connection is closed (not kept)."""
        with self.lock:
            c.users -= 1
            c.last = time.monotonic()
            if ok:
                return
            if c in self.conns:
                self.conns.remove(c)
        self.close([c])

    def close(self, conns: list[Conn], wait_peers: float = 0.0) -> None:
        """Close ``conns`` on the loop, and wait until that is done (and up to ``wait_peers``
        seconds until the peers saw it)."""

        async def close() -> None:
            for c in conns:
                c.conn.close()
            if wait_peers:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.gather(*(c.conn.wait_closed()
                                                            for c in conns)), wait_peers)

        if conns and self.thread.is_alive():
            self.submit(close())

    def forget(self, address: str) -> None:
        """Close every kept connection to ``address`` (those in use end with their calls)."""
        with self.lock:
            gone = [c for c in self.conns if c.key[0] == address]
            self.conns = [c for c in self.conns if c not in gone]
        self.close(gone)

    def close_all(self) -> None:
        """Every kept connection closed (at exit: up to 1 s for the peers to see it)."""
        with self.lock:
            gone, self.conns = self.conns, []
        with contextlib.suppress(Exception):
            self.close(gone, wait_peers=1.0)


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """This process's pool (a new one after a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool()
            atexit.register(_pool.close_all)
        return _pool


def forget(address: str) -> None:
    """Close this process's kept connections to ``address``."""
    if _pool is not None and _pool.pid == os.getpid():
        _pool.forget(address)


def with_session(key: tuple[Any, ...], netns: str | None, address: str, port: int,
                 connect_timeout: float, connect: Callable[[socket.socket], Awaitable[Any]],
                 session: Callable[[Conn], Awaitable[T]]) -> T:
    """``session(c)`` on a kept connection ``c`` for ``key`` when one is open, else on a new one
    (``connect(sock)`` over a TCP socket to ``address``:``port`` opened in namespace
    ``netns``).  ``session`` raises :class:`SessionNotOpened` when its channel could not be
    opened: on a kept connection the call is made once more on a new one."""
    p = pool()
    c = p.take(key)
    if c is not None:
        try:
            out = p.submit(session(c))
        except SessionNotOpened:
            p.give_back(c, False)  # dead: dropped; a new connection below
        except BaseException:
            p.give_back(c, False)
            raise
        else:
            p.give_back(c, True)
            return out
    ctx = kernel_netns.entered(netns) if netns else contextlib.nullcontext()
    with ctx:  # the socket is opened in this thread, so in the namespace
        sock = socket.create_connection((address, port), timeout=connect_timeout)
    try:
        conn = p.submit(connect(sock))
    except BaseException:
        sock.close()
        raise
    c = p.add(key, conn)
    try:
        out = p.submit(session(c))
    except BaseException:
        p.give_back(c, False)
        raise
    p.give_back(c, True)
    return out
