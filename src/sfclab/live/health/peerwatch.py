"""Health watchers of hosts driven over SSH talking to each other over the hosts' underlay.

**Model.**  On a lab of hosts driven over SSH a watcher (:mod:`sfclab.live.health.watch`) runs on
every host that holds an instance of a chain or a direction's ingress.  Each probes its *own*
instances and sends what it sees (:class:`~.peermsg.Report`) to every other host of the lab: at once
on a change, and every :data:`~.peertable.HEARTBEAT_S` as a heartbeat.  A host holding a
direction's ingress (its slot table) takes an instance of another host out when that host
reports it dead, or when that host goes silent for :data:`~.peertable.PEER_TIMEOUT_S` (all the
instances it reported), and puts it back when it is reported alive again
(:class:`~.peertable.PeerTable`).

**Where.**  Datagrams go between the hosts' underlay addresses (those the VXLAN tunnels
between hosts use, :class:`sfclab.plan.model.HostPlan` ``address``), to the lab's UDP port (one
of :data:`PORTS`, chosen at the lab's first ``chain add``/``chain watch``).  The socket is made
by the host's agent in its own context (where the underlay address is: a real host's root
namespace, an emulated machine's context namespace), bound to the host's underlay address, and
handed to the watcher as an inherited file descriptor; the watcher itself runs in one of the
lab's namespaces.  No socket, address or route is made in this machine's root namespace.

**Trust.**  Every datagram carries the lab's name and an HMAC-SHA256 under the lab's secret
(32 random bytes, made on this machine with the port, kept in its state as
``peerwatch.json``, sent to each host's agent over SSH with ``chain-watch`` and kept there
as ``peers.json``, mode 0600); anything else is ignored (:func:`~.peermsg.decode`).

Objects: :class:`Settings` (port and secret, this machine's), :class:`PeerLink` (a watcher's
socket, its peers' addresses, its :class:`~.peertable.PeerTable`).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ...realize.state import LabState
from .peermsg import Report, decode, encode
from .peertable import HEARTBEAT_S, Clock, MonotonicClock, PeerTable

#: the range a lab's port is chosen from (below Linux's ephemeral ports, 32768 and up)
PORTS = range(24700, 24800)
SETTINGS = "peerwatch.json"  # this machine's
CONFIG = "peers.json"  # a host's


@dataclass(frozen=True)
class Settings:
    port: int
    secret: str


def settings(state: LabState) -> Settings:
    """The lab's port and secret, made (and kept, mode 0600) the first time."""
    f = state.dir / SETTINGS
    try:
        d = json.loads(f.read_text())
        return Settings(int(d["port"]), str(d["secret"]))
    except (FileNotFoundError, ValueError, KeyError):
        pass
    s = Settings(secrets.choice(PORTS), secrets.token_hex(32))
    write_private(f, {"port": s.port, "secret": s.secret})
    return s


def write_private(f: Path, d: dict) -> None:
    tmp = f.with_name(f.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(d))
    os.replace(tmp, f)


def bare(address: str) -> str:
    return address.split("/")[0]


def open_socket(address: str, port: int) -> socket.socket:
    """A UDP socket on ``address``:``port`` in the caller's namespace (the agent's: the
    host's context), inheritable (for the watcher)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((bare(address), port))
    except OSError:
        s.close()
        raise
    s.set_inheritable(True)
    return s


class PeerLink:
    """A watcher's end: ``sock`` (inherited), the host's ``peers.json`` (``host``: its own
    name, ``peers``: host -> underlay address, ``port``, ``secret``; read again when it
    changes), and what it heard."""

    def __init__(self, lab: str, sock: socket.socket, config: Path,
                 clock: Clock | None = None):
        self.lab = lab
        self.sock = sock
        self.sock.setblocking(False)
        self.config = config
        self.table = PeerTable(clock or MonotonicClock())
        self.epoch = time.time_ns()
        self.seq = 0
        self.last_sent = float("-inf")
        self.mtime = 0.0
        self.host = ""
        self.peers: dict[str, str] = {}
        self.port = 0
        self.secret = ""
        self.refused = 0  # datagrams ignored (not the lab's, not signed, replayed)

    def fileno(self) -> int:
        return self.sock.fileno()

    def reload(self) -> None:
        try:
            m = self.config.stat().st_mtime
            if m == self.mtime:
                return
            d = json.loads(self.config.read_text())
        except (FileNotFoundError, ValueError):
            return
        self.mtime = m
        self.host, self.port, self.secret = str(d["host"]), int(d["port"]), str(d["secret"])
        self.peers = {h: bare(a) for h, a in dict(d["peers"]).items() if h != self.host}
        self.table.forget(set(self.peers))

    def receive(self) -> int:
        """Take in every datagram waiting; how many were accepted."""
        n = 0
        while True:
            try:
                data, _ = self.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return n
            except OSError:  # an ICMP error queued on the socket: read on
                continue
            r = decode(data, self.lab, self.secret, set(self.peers))
            if r is not None and self.table.heard(r):
                n += 1
            else:
                self.refused += 1

    def due(self) -> bool:
        return self.table.clock.now() - self.last_sent >= HEARTBEAT_S

    def send(self, kind: str, alive: list[str], dead: list[str]) -> None:
        """Report ``alive`` and ``dead`` (this host's instances) to every other host."""
        if not self.secret:
            return
        self.seq += 1
        data = encode(Report(self.lab, self.host, self.epoch, self.seq, kind, alive, dead),
                      self.secret)
        for address in self.peers.values():
            try:
                self.sock.sendto(data, (address, self.port))
            except OSError:  # that host unreachable now: its heartbeats tell
                pass
        self.last_sent = self.table.clock.now()

    def close(self) -> None:
        self.sock.close()
