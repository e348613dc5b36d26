"""A three-node chain ``src — fn — dst`` for testing one function kind before the lab core.

    src eth0 198.18.1.2/24 ── eth0 198.18.1.1/24  fn  198.18.2.1/24 eth1 ── eth0 198.18.2.2/24 dst

Namespaces are ``sfct-fn-<hex>-<node>``; ``src`` and ``dst`` route by default through ``fn``,
which forwards.  The function is built from ``FunctionContext`` and its ``Params``, then
``check``, ``configure`` and ``start`` run as the lab core will run them.  On exit ``stop`` runs
on a *fresh* instance (as ``sfclab down`` does), every process left in the namespaces is ended
and the namespaces are deleted.  The :class:`Chain` methods mirror the coming ``sfclab.api.Lab``
(``netns``, ``address``, ``exec``, ``popen``, ``function``, ``inspect``) so tests can switch.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path
from typing import Any

from sfclab.functions import get
from sfclab.functions.base import FunctionContext, Interface, NetworkFunction
from sfclab.kernel import netns

ADDR = {
    ("src", "eth0"): "198.18.1.2/24",
    ("fn", "eth0"): "198.18.1.1/24",
    ("fn", "eth1"): "198.18.2.1/24",
    ("dst", "eth0"): "198.18.2.2/24",
}
PEERS = {("fn", "eth0"): "src", ("fn", "eth1"): "dst"}


@dataclass
class Chain:
    lab: str
    names: dict[str, str]
    function_node: str = "fn"
    fn: NetworkFunction | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)

    def netns(self, node: str) -> str:
        return self.names[node]

    def address(self, node: str) -> IPv4Address:
        return IPv4Interface(ADDR[(node, "eth0")]).ip

    def exec(self, node: str, argv: list[str], check: bool = True,
             timeout: float | None = 60, input: str | None = None):
        return netns.run(self.names[node], argv, check=check, timeout=timeout, input=input)

    def popen(self, node: str, argv: list[str], **kw: Any) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        p = netns.popen(self.names[node], argv, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def function(self, node: str = "fn") -> NetworkFunction:
        assert node == self.function_node and self.fn is not None
        return self.fn

    def inspect(self) -> dict[str, Any]:
        assert self.fn is not None
        return {"nodes": {self.function_node: self.fn.inspect()}}


def _veth(ipr_ns: str, ifname: str, peer_ns: str, peer_ifname: str) -> None:
    fd = os.open(netns.path(peer_ns), os.O_RDONLY)
    try:
        with netns.iproute(ipr_ns) as ipr:
            ipr.link("add", ifname=ifname, kind="veth",
                     peer={"ifname": peer_ifname, "net_ns_fd": fd})
    finally:
        os.close(fd)


def _address_and_up(ns: str, ifname: str, cidr: str) -> None:
    iface = IPv4Interface(cidr)
    with netns.iproute(ns) as ipr:
        idx = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=idx, address=str(iface.ip), prefixlen=iface.network.prefixlen)
        ipr.link("set", index=idx, state="up")
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")


def build_context(lab: str, names: dict[str, str], state_dir: Path) -> FunctionContext:
    ifaces = [Interface(name=i, peer=PEERS[("fn", i)], address=IPv4Interface(ADDR[("fn", i)]))
              for i in ("eth0", "eth1")]
    return FunctionContext(lab=lab, node="fn", netns=names["fn"], interfaces=ifaces,
                           state_dir=state_dir)


@contextlib.contextmanager
def chain(kind: str, params: dict[str, Any], state_dir: Path, *,
          start: bool = True) -> Iterator[Chain]:
    """Build the chain with a ``kind`` function in the middle; always tear everything down."""
    lab = "sfct-fn-" + secrets.token_hex(3)
    names = {n: f"{lab}-{n}" for n in ("src", "fn", "dst")}
    cls = get(kind)
    fparams = cls.Params.model_validate(params)
    ctx = build_context(lab, names, state_dir)
    c = Chain(lab=lab, names=names)
    made: list[str] = []
    try:
        fn = cls(ctx, fparams)
        fn.check()
        for ns in names.values():
            netns.create(ns).close()
            made.append(ns)
        _veth(names["fn"], "eth0", names["src"], "eth0")
        _veth(names["fn"], "eth1", names["dst"], "eth0")
        for (node, ifname), cidr in ADDR.items():
            _address_and_up(names[node], ifname, cidr)
        for node, gw in (("src", "198.18.1.1"), ("dst", "198.18.2.1")):
            with netns.iproute(names[node]) as ipr:
                ipr.route("add", dst="0.0.0.0/0", gateway=gw)
        netns.write_sysctl(names["fn"], "net.ipv4.ip_forward", "1")
        c.fn = fn
        fn.configure()
        if start:
            fn.start()
        yield c
    finally:
        try:
            if c.fn is not None:
                cls(ctx, fparams).stop()       # a fresh instance, as `sfclab down` does
        finally:
            for p in c.procs:
                if p.poll() is None:
                    netns.end_processes([p.pid])
                with contextlib.suppress(Exception):
                    p.communicate(timeout=2)
            left = netns.pids_in(made)
            netns.end_processes(list(left))
            proc = getattr(c.fn, "proc", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.wait(timeout=2)
            for ns in made:
                netns.delete(ns)


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
while time.time() < end:
    for s in select.select(list(socks), [], [], 0.05)[0]:
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
                 duration: float = 3.0, to: str | None = None) -> dict[str, Any]:
    """Send ``n`` datagrams to each port from ``sender`` to ``receiver``; what arrived."""
    import json
    import sys

    plist = ",".join(map(str, ports))
    rx = lab.popen(receiver, [sys.executable, "-c", UDP_RECEIVER, plist, str(duration)])
    assert rx.stdout is not None
    assert rx.stdout.readline().strip() == "ready"
    lab.exec(sender, [sys.executable, "-c", UDP_SENDER, to or str(lab.address(receiver)),
                      plist, str(n)])
    out, err = rx.communicate(timeout=duration + 10)
    assert rx.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    res["counts"] = {int(k): v for k, v in res["counts"].items()}
    return res
