"""The kept SSH connections (:mod:`sfclab.hosts.ssh_pool`), with the SSH client faked: a
connection is a plain object over a real TCP socket to a listener of the test's own."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from sfclab.hosts import ssh_pool


class FakeConn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    async def wait_closed(self) -> None:
        return None


@pytest.fixture
def listener() -> Iterator[tuple[str, int]]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield s.getsockname()
    s.close()


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch) -> Iterator[None]:
    monkeypatch.setattr(ssh_pool, "_pool", None)
    yield
    if ssh_pool._pool is not None:
        ssh_pool._pool.close_all()


class Client:
    """Counts connections made; ``fail``: what the next sessions raise, in turn."""

    def __init__(self) -> None:
        self.made: list[FakeConn] = []
        self.fail: list[BaseException] = []

    async def connect(self, sock: socket.socket) -> FakeConn:
        c = FakeConn(sock)
        self.made.append(c)
        return c

    async def session(self, c: ssh_pool.Conn) -> int:
        if self.fail:
            raise self.fail.pop(0)
        return self.made.index(c.conn)

    def call(self, addr: tuple[str, int], key: str = "k") -> int:
        return ssh_pool.with_session((addr[0], key), None, addr[0], addr[1], 2.0, self.connect,
                                     self.session)


def test_calls_to_one_host_share_one_connection_and_others_get_their_own(listener):
    c = Client()
    assert [c.call(listener), c.call(listener), c.call(listener)] == [0, 0, 0]
    assert c.call(listener, key="another user") == 1
    assert len(c.made) == 2 and not any(m.closed for m in c.made)


def test_a_kept_connection_whose_session_does_not_open_is_replaced_once(listener):
    c = Client()
    c.call(listener)
    c.fail = [ssh_pool.SessionNotOpened(ConnectionResetError("gone"))]
    assert c.call(listener) == 1  # made again on a new connection
    assert c.made[0].closed and not c.made[1].closed


def test_a_new_connection_whose_session_does_not_open_fails_the_call(listener):
    c = Client()
    c.fail = [ssh_pool.SessionNotOpened(ConnectionResetError("gone"))]
    with pytest.raises(ssh_pool.SessionNotOpened):
        c.call(listener)
    assert len(c.made) == 1 and c.made[0].closed


def test_a_failure_after_the_session_opened_is_not_retried_and_closes_the_connection(
        listener):
    c = Client()
    c.call(listener)
    c.fail = [TimeoutError("the verb ran too long")]
    with pytest.raises(TimeoutError):
        c.call(listener)
    assert len(c.made) == 1 and c.made[0].closed
    assert c.call(listener) == 1  # the next call: a new connection


def test_idle_connections_are_closed_and_forget_closes_at_once(listener, monkeypatch):
    monkeypatch.setattr(ssh_pool, "IDLE_S", 0.2)
    c = Client()
    c.call(listener)
    deadline = time.monotonic() + 5
    while not c.made[0].closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.made[0].closed
    c.call(listener)
    ssh_pool.forget("198.18.0.99")  # another address: kept
    time.sleep(0.05)
    assert not c.made[1].closed
    ssh_pool.forget(listener[0])
    time.sleep(0.05)
    assert c.made[1].closed


def test_a_refused_connection_raises_what_the_socket_said():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = s.getsockname()
    s.close()  # nothing listens there now
    with pytest.raises(ConnectionRefusedError):
        Client().call(addr)
