"""Many rtnetlink requests in one ``sendmsg``: the hot path of ``up``.

Configuring a lab is thousands of small, independent requests (address, link up, route).  Sent
one by one, each costs a round trip; here every request for one namespace is encoded into one
buffer, sent at once, and the kernel's acknowledgements are read back and matched to their
requests by sequence number, so an error still names its object.  The kernel handles the
messages of a buffer in order, so a route placed after the addresses it needs finds them.

Only the few message shapes sfclab needs are encoded (RFC 3549; linux/rtnetlink.h).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

from ..errors import RealizeError

NETLINK_ROUTE = 0
RTM_NEWLINK, RTM_GETLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 18, 20, 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE, NLM_F_DUMP = 0x1, 0x4, 0x200, 0x400, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFF_UP = 0x1
IFLA_IFNAME, IFLA_MTU, IFLA_MASTER, IFLA_LINKINFO, IFLA_IFALIAS, IFLA_NET_NS_FD = 3, 4, 10, 18, 20, 28
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
IFA_F_NODAD = 0x02
RTA_DST, RTA_GATEWAY = 1, 5
RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST = 254, 3, 0, 1


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


class Batch:
    """Requests for one namespace; ``send()`` them over a socket opened in that namespace."""

    def __init__(self) -> None:
        self.msgs: list[tuple[int, int, bytes, str]] = []  # (type, flags, body, description)

    def __len__(self) -> int:
        return len(self.msgs)

    def veth(self, name: str, netns_fd: int, peer: str, peer_netns_fd: int, what: str, *,
             mtu: int | None = None, peer_mtu: int | None = None, index: int = 0,
             peer_index: int = 0) -> None:
        """Create a veth pair with each end directly in the namespace behind its fd (the peer
        gets ``peer_mtu`` if given, else ``mtu``), with interface index ``index`` and
        ``peer_index`` there (0: the kernel's choice).  The kernel takes the peer's index only
        when the first end has one too, so an end with an index and a peer without goes first."""
        peer_mtu = peer_mtu or mtu
        if not index and peer_index:
            name, netns_fd, mtu, index, peer, peer_netns_fd, peer_mtu, peer_index = \
                peer, peer_netns_fd, peer_mtu, peer_index, name, netns_fd, mtu, index

        def end(ifname: str, fd: int, mtu: int | None) -> bytes:
            out = _attr(IFLA_IFNAME, ifname.encode() + b"\0") + _attr(IFLA_NET_NS_FD,
                                                                      struct.pack("I", fd))
            return out + (_attr(IFLA_MTU, struct.pack("I", mtu)) if mtu else b"")
        peer_msg = struct.pack("BxHiII", socket.AF_UNSPEC, 0, peer_index, 0, 0) + end(
            peer, peer_netns_fd, peer_mtu)
        info = _attr(IFLA_INFO_KIND, b"veth\0") + _attr(
            IFLA_INFO_DATA, _attr(VETH_INFO_PEER, peer_msg))
        body = struct.pack("BxHiII", socket.AF_UNSPEC, 0, index, 0, 0) + end(name, netns_fd, mtu)
        self.msgs.append((RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                          body + _attr(IFLA_LINKINFO, info), what))

    def bridge(self, name: str, netns_fd: int, what: str, *, index: int = 0) -> None:
        """Create a Linux bridge in the namespace behind ``netns_fd`` with interface index
        ``index`` there (0: the kernel's choice)."""
        body = struct.pack("BxHiII", socket.AF_UNSPEC, 0, index, 0, 0)
        body += _attr(IFLA_IFNAME, name.encode() + b"\0")
        body += _attr(IFLA_NET_NS_FD, struct.pack("I", netns_fd))
        body += _attr(IFLA_LINKINFO, _attr(IFLA_INFO_KIND, b"bridge\0"))
        self.msgs.append((RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body, what))

    def link(self, index: int, what: str, *, up: bool = True, mtu: int | None = None,
             master: int | None = None, alias: str | None = None) -> None:
        body = struct.pack("BxHiII", socket.AF_UNSPEC, 0, index, IFF_UP if up else 0,
                           IFF_UP if up else 0)
        if mtu:
            body += _attr(IFLA_MTU, struct.pack("I", mtu))
        if master:
            body += _attr(IFLA_MASTER, struct.pack("I", master))
        if alias:
            body += _attr(IFLA_IFALIAS, alias.encode() + b"\0")
        self.msgs.append((RTM_NEWLINK, 0, body, what))

    def addr(self, index: int, cidr: str, what: str) -> None:
        """Add address ``cidr`` (IPv4, or IPv6 flagged ``nodad``: usable at once, no duplicate
        address detection on a lab's own links) to interface ``index``."""
        iface = ipaddress.ip_interface(cidr)
        ip = iface.ip.packed
        six = iface.version == 6
        body = struct.pack("BBBBI", socket.AF_INET6 if six else socket.AF_INET,
                           iface.network.prefixlen, IFA_F_NODAD if six else 0, 0, index)
        body += _attr(IFA_LOCAL, ip) + _attr(IFA_ADDRESS, ip)
        self.msgs.append((RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body, what))

    def route(self, dst: str, gateway: str, what: str) -> None:
        """Add a route to ``dst`` via ``gateway`` (both of one family) to the main table."""
        net = ipaddress.ip_network(dst)
        family = socket.AF_INET6 if net.version == 6 else socket.AF_INET
        body = struct.pack("BBBBBBBBI", family, net.prefixlen, 0, 0, RT_TABLE_MAIN,
                           RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0)
        if net.prefixlen:
            body += _attr(RTA_DST, net.network_address.packed)
        body += _attr(RTA_GATEWAY, ipaddress.ip_address(gateway).packed)
        self.msgs.append((RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body, what))

    def send(self, sock: socket.socket, chunk: int = 100) -> None:
        """Send the requests, ``chunk`` per ``sendmsg`` (so the acknowledgements always fit the
        socket's receive buffer); raise ``RealizeError`` for the first one refused."""
        for start in range(0, len(self.msgs), chunk):
            self._send(sock, start, self.msgs[start:start + chunk])

    def _send(self, sock: socket.socket, base: int,
              msgs: list[tuple[int, int, bytes, str]]) -> None:
        buf = bytearray()
        for seq, (kind, flags, body, _what) in enumerate(msgs, start=base + 1):
            buf += struct.pack("IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags,
                               seq, 0) + body
        sock.sendall(bytes(buf))
        pending = len(msgs)
        first_error: tuple[int, int] | None = None
        while pending:
            data = sock.recv(1 << 20)
            off = 0
            while off + 16 <= len(data):
                length, kind, _flags, seq, _pid = struct.unpack_from("IHHII", data, off)
                if kind == NLMSG_ERROR:
                    (err,) = struct.unpack_from("i", data, off + 16)
                    pending -= 1
                    if err and (first_error is None or seq < first_error[0]):
                        first_error = (seq, -err)
                off += (length + 3) & ~3
                if length == 0:
                    break
        if first_error is not None:
            seq, errno = first_error
            raise RealizeError(os.strerror(errno), obj=self.msgs[seq - 1][3], errno=errno)


def link_indexes(sock: socket.socket) -> list[int]:
    """The index of every interface in the socket's namespace, from one ``RTM_GETLINK`` dump."""
    sock.sendall(struct.pack("IHHII", 32, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
                 + struct.pack("BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0))
    out: list[int] = []
    while True:
        data = sock.recv(1 << 20)
        off = 0
        while off + 16 <= len(data):
            length, kind, _flags, _seq, _pid = struct.unpack_from("IHHII", data, off)
            if kind == NLMSG_DONE or length < 16:
                return out
            if kind == NLMSG_ERROR:
                (err,) = struct.unpack_from("i", data, off + 16)
                raise RealizeError(os.strerror(-err), obj="interface list", errno=-err)
            if kind == RTM_NEWLINK:
                out.append(struct.unpack_from("i", data, off + 20)[0])
            off += (length + 3) & ~3


def open_socket() -> socket.socket:
    """A raw rtnetlink socket in the calling thread's current namespace."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind((0, 0))
    return s
