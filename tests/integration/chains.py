"""A three-node lab ``src — fn — dst`` with one function in the middle, built by the lab core.

    src eth0 198.18.1.2/24 ── eth0 198.18.1.1/24  fn  198.18.2.1/24 eth1 ── eth0 198.18.2.2/24 dst

:func:`chain` brings the lab up with :class:`sfclab.api.Lab` (so the function is checked,
configured and started exactly as ``sfclab up`` does it) and always takes it down again (``down``
stops the function from the saved plan in a fresh instance, ends every process in the lab's
namespaces and removes them).  The :class:`Chain` it yields is that lab with a few conveniences
for function tests; it is a plain context manager, so the firewall bench uses it too.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from sfclab.api import Lab
from sfclab.functions.base import NetworkFunction
from sfclab.kernel import netns

ADDRESSES = {("src", "eth0"): "198.18.1.2/24", ("fn", "eth0"): "198.18.1.1/24",
             ("fn", "eth1"): "198.18.2.1/24", ("dst", "eth0"): "198.18.2.2/24"}


def lab_file(name: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    def end(node: str, ifname: str) -> dict[str, Any]:
        return {"node": node, "interface": ifname, "address": ADDRESSES[(node, ifname)]}
    return {"name": name,
            "nodes": {"src": {"kind": "host"}, "fn": {"kind": kind, **params},
                      "dst": {"kind": "host"}},
            "links": [{"endpoints": [end("src", "eth0"), end("fn", "eth0")]},
                      {"endpoints": [end("fn", "eth1"), end("dst", "eth0")]}]}


class Chain:
    """The running lab, as function tests use it."""

    def __init__(self, lab: Lab):
        self.lab_obj = lab
        self.lab = lab.name
        self.procs: list[subprocess.Popen[str]] = []

    def netns(self, node: str) -> str:
        return self.lab_obj.netns(node)

    def address(self, node: str) -> IPv4Address:
        return self.lab_obj.address(node)

    def exec(self, node: str, argv: list[str], check: bool = True, timeout: float | None = 60,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.lab_obj.exec(node, argv, check=check, timeout=timeout, input=input)

    def popen(self, node: str, argv: list[str], **kw: Any) -> subprocess.Popen[str]:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        p = self.lab_obj.popen(node, argv, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def function(self, node: str = "fn") -> NetworkFunction:
        """The node's function, rebuilt from the lab's plan (as ``sfclab inspect`` sees it)."""
        fn = self.lab_obj.function(node)
        assert fn is not None
        return fn

    def wait_stopped(self, node: str = "fn", timeout: float = 10.0) -> None:
        """Wait until the node's function runs no process any more."""
        fn: Any = self.function(node)
        deadline = time.monotonic() + timeout
        while fn.running_pids():
            if time.monotonic() > deadline:
                raise AssertionError(f"the function of {node} still runs {fn.running_pids()}")
            time.sleep(0.05)

    def inspect(self) -> dict[str, Any]:
        """The function's own ``inspect``, under ``nodes.fn``."""
        return {"nodes": {"fn": self.function("fn").inspect()}}


@contextlib.contextmanager
def chain(kind: str, params: dict[str, Any], state_dir: Path | None = None, *,
          name: str | None = None) -> Iterator[Chain]:
    """Bring up ``src — fn — dst`` with a ``kind`` function; always take it down.  The lab is
    named ``name`` (a test that must find what is left of it gives one), else ``f<hex>``.  If
    ``up`` fails (bad parameters are a :class:`~sfclab.errors.SpecError`) the lab core has
    already removed whatever it made.  The lab's state lives where the lab core keeps it
    (``$SFCLAB_STATE_DIR``); ``state_dir`` is accepted for the callers' convenience and not
    needed."""
    lab = Lab.from_dict(lab_file(name or "f" + secrets.token_hex(3), kind, params),
                        source="chain")
    lab.up()
    c = Chain(lab)
    try:
        yield c
    finally:
        for p in c.procs:
            if p.poll() is None:
                netns.end_processes([p.pid])
            with contextlib.suppress(Exception):
                p.communicate(timeout=2)
        lab.down()


# ------------------------------------------------------------------ traffic helpers

UDP_RECEIVER = r"""
import json, select, socket, sys, time
ports = [int(p) for p in sys.argv[1].split(",")]
dur = float(sys.argv[2])
socks = {}
for p in ports:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 12, 1)          # IP_RECVTTL
    s.bind(("0.0.0.0", p))
    socks[s] = p
counts = {p: 0 for p in ports}
ttls, srcs = set(), set()
print("ready", flush=True)
end = time.time() + dur
watch = [*socks, sys.stdin] if sys.argv[3:4] == ["until-eof"] else list(socks)
while time.time() < end:
    for s in select.select(watch, [], [], 0.05)[0]:
        if s is sys.stdin:
            if not sys.stdin.read(1):  # the test has sent everything: 1 s more, then stop
                end, watch = min(end, time.time() + 1.0), list(socks)
            continue
        data, anc, _, addr = s.recvmsg(4096, 64)
        counts[socks[s]] += 1
        srcs.add(addr[0])
        for lvl, typ, d in anc:
            if typ == 2:                              # IP_TTL
                ttls.add(int.from_bytes(d[:4], "little"))
print(json.dumps({"counts": counts, "ttls": sorted(ttls), "sources": sorted(srcs)}), flush=True)
"""

UDP_SENDER = r"""
import socket, sys, time
host, ports, n = sys.argv[1], [int(p) for p in sys.argv[2].split(",")], int(sys.argv[3])
ttl = int(sys.argv[4]) if len(sys.argv) > 4 else 0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if ttl:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
for i in range(n):
    for p in ports:
        s.sendto(b"sfclab %d" % i, (host, p))
    time.sleep(0.002)
"""


def udp_exchange(lab: Chain, sender: str, receiver: str, ports: list[int], n: int,
                 to: str | None = None) -> dict[str, Any]:
    """Send ``n`` datagrams to each port from ``sender`` to ``receiver``; what arrived.  The
    receiver counts until the sender has returned (its standard input closed by
    ``communicate``), then one second more for what is still on its way (60 s at most): no
    fixed window that a sender started late on a loaded machine could send past."""
    plist = ",".join(map(str, ports))
    rx = lab.popen(receiver, [sys.executable, "-c", UDP_RECEIVER, plist, "60", "until-eof"],
                   stdin=subprocess.PIPE)
    assert rx.stdout is not None
    assert rx.stdout.readline().strip() == "ready"
    lab.exec(sender, [sys.executable, "-c", UDP_SENDER, to or str(lab.address(receiver)),
                      plist, str(n)])
    out, err = rx.communicate(timeout=70)
    assert rx.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    res["counts"] = {int(k): v for k, v in res["counts"].items()}
    return res


#: a TCP client that exchanges 100 bytes at a time with :data:`TCP_SERVER` (``HOST PORT
#: UNTIL``: ``UNTIL`` a number of seconds, or a file whose appearance ends it), prints
#: ``connected`` once connected and, at the end, ``{"exchanges": N, "longest_gap": S}`` (the
#: longest time between two completed exchanges); a reset ("closed by peer",
#: ``ConnectionResetError``) or a 5 s stall (``socket.timeout``) ends it with an error
TCP_CLIENT = r"""
import json, os, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print("connected", flush=True)
until = sys.argv[3]
end = None if not until.replace(".", "", 1).isdigit() else time.monotonic() + float(until)
done = (lambda: time.monotonic() >= end) if end is not None else \
    (lambda: os.path.exists(until))
n, gap, last = 0, 0.0, time.monotonic()
while not done():
    s.sendall(b"x" * 100)
    got = b""
    while len(got) < 100:
        chunk = s.recv(100 - len(got))
        if not chunk:
            raise SystemExit("closed by peer")
        got += chunk
    n += 1
    now = time.monotonic()
    gap, last = max(gap, now - last), now
    time.sleep(0.005)
print(json.dumps({"exchanges": n, "longest_gap": round(gap, 4)}), flush=True)
"""

#: the echo server of :data:`TCP_CLIENT` (``PORT``): prints ``ready``, then the address of
#: the one client it accepts (a NAT's shows), and echoes until the client closes
TCP_SERVER = r"""
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1]))); srv.listen(1)
print("ready", flush=True)
c, addr = srv.accept()
print(addr[0], flush=True)
while True:
    d = c.recv(65536)
    if not d:
        break
    c.sendall(d)
"""
