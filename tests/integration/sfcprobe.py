"""Packet helpers for the SFC tests, run inside a lab namespace (``python3 -m ...``):

    capture IFACE SECONDS [until-eof]
                               every frame seen on IFACE (AF_PACKET), as JSON lines:
                               direction, length, ethertype, MPLS labels (label, bottom, TTL),
                               an SRv6 outer header and SRH (``srh``), the inner 5-tuple
    udp-send DST SPORT DPORT N  N datagrams from SPORT to DST:DPORT
    udp-flows DST DPORT SPORT0 N  N flows of one datagram each (source ports SPORT0 ...)
    udp-echo PORT SECONDS [until-eof]
                               answer every datagram to PORT, print how many

``until-eof``: also end one second after standard input closes (the test has sent everything),
so the test waits for what is on its way, not for the rest of SECONDS (then only a bound).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time

#: what a probe run ``until-eof`` still waits for once its standard input closed (seconds)
DRAIN_S = 1.0


def _until(seconds: float, until_eof: bool):
    """``done()``: whether the probe should end (``seconds`` passed, or ``until_eof`` and its
    standard input closed :data:`DRAIN_S` ago); it waits up to 0.1 s on standard input."""
    end = time.monotonic() + seconds
    watch = [sys.stdin] if until_eof else []

    def done() -> bool:
        nonlocal end, watch
        if watch and select.select(watch, [], [], 0)[0] and not sys.stdin.read(1):
            end, watch = min(end, time.monotonic() + DRAIN_S), []
        return time.monotonic() >= end
    return done


def parse(frame: bytes) -> dict:
    out: dict = {"ethertype": struct.unpack_from(">H", frame, 12)[0], "labels": [],
                 "len": len(frame)}
    off = 14
    if out["ethertype"] == 0x8847:
        while off + 4 <= len(frame):
            v = struct.unpack_from(">I", frame, off)[0]
            off += 4
            out["labels"].append([v >> 12, (v >> 8) & 1, v & 0xff])
            if (v >> 8) & 1:
                break
    if out["ethertype"] == 0x894F and len(frame) >= off + 8:  # NSH: base and path header
        base, sph = struct.unpack_from(">II", frame, off)
        out["nsh"] = {"ver": base >> 30, "ttl": (base >> 22) & 0x3f, "len": (base >> 16) & 0x3f,
                      "md": (base >> 8) & 0xf, "np": base & 0xff, "spi": sph >> 8,
                      "si": sph & 0xff}
        off += 8
    if (out["ethertype"] == 0x86DD and len(frame) >= off + 48 and frame[off + 6] == 43
            and frame[off + 42] == 4):
        # an SRv6 frame: the outer header and the SRH, then what it carries
        n = frame[off + 44] + 1
        out["srh"] = {"hop_limit": frame[off + 7], "segments_left": frame[off + 43],
                      "next_header": frame[off + 40],
                      "dst": socket.inet_ntop(socket.AF_INET6, frame[off + 24:off + 40]),
                      "segments": [socket.inet_ntop(socket.AF_INET6,
                                                    frame[off + 48 + 16 * i:off + 64 + 16 * i])
                                   for i in range(n)]}
        off += 48 + 8 * frame[off + 41]
    if len(frame) >= off + 40 and frame[off] >> 4 == 6:
        out["proto"] = frame[off + 6]
        out["src"] = socket.inet_ntop(socket.AF_INET6, frame[off + 8:off + 24])
        out["dst"] = socket.inet_ntop(socket.AF_INET6, frame[off + 24:off + 40])
        if out["proto"] in (6, 17) and len(frame) >= off + 44:
            out["sport"], out["dport"] = struct.unpack_from(">HH", frame, off + 40)
        return out
    if len(frame) >= off + 20 and frame[off] >> 4 == 4:
        ihl = (frame[off] & 15) * 4
        out["proto"] = frame[off + 9]
        out["src"] = socket.inet_ntoa(frame[off + 12:off + 16])
        out["dst"] = socket.inet_ntoa(frame[off + 16:off + 20])
        if out["proto"] in (6, 17) and len(frame) >= off + ihl + 4:
            out["sport"], out["dport"] = struct.unpack_from(">HH", frame, off + ihl)
    return out


def capture(iface: str, seconds: float, until_eof: bool = False) -> None:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    s.settimeout(0.1)
    print("ready", flush=True)
    done = _until(seconds, until_eof)
    while not done():
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        d = parse(frame)
        d["out"] = addr[2] == socket.PACKET_OUTGOING
        print(json.dumps(d), flush=True)


def udp_send(dst: str, sport: int, dport: int, n: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", sport))
    got, wait = 0, 0.5
    for _ in range(n):
        s.sendto(b"sfclab probe", (dst, dport))
        s.settimeout(wait)
        try:
            s.recvfrom(2048)
            got += 1
        except socket.timeout:
            wait = 0.1  # one went unanswered (dropped on purpose, or late): the rest wait less
    # a reply later than the wait (a loaded machine) was counted for the next datagram: the
    # last ones' replies may still be on their way; every datagram is answered at most once.
    # Up to 5 s for each (a test where all came back does not wait; one where a reply was
    # lost waits 5 s more to fail): CI once saw 29 of 30 under a load average of 20.  When
    # none came back at all (a test of drops), 2 s for the first
    s.settimeout(5.0 if got else 2.0)
    while got < n:
        try:
            s.recvfrom(2048)
            got += 1
        except socket.timeout:
            break
    print(got)


def udp_flows(dst: str, dport: int, sport0: int, n: int) -> None:
    """n flows (source ports sport0 ...), one datagram each, answered or not: how many were."""
    got = 0
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", sport0 + i))
        s.settimeout(0.3)
        s.sendto(b"sfclab flow", (dst, dport))
        try:
            s.recvfrom(2048)
            got += 1
        except socket.timeout:
            pass
        s.close()
    print(got)


def udp_echo(port: int, seconds: float, until_eof: bool = False) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.1)
    print("ready", flush=True)
    done, n = _until(seconds, until_eof), 0
    while not done():
        try:
            d, a = s.recvfrom(2048)
        except socket.timeout:
            continue
        s.sendto(d, a)
        n += 1
    print(n, flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "capture":
        capture(args[0], float(args[1]), args[2:3] == ["until-eof"])
    elif cmd == "udp-send":
        udp_send(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "udp-flows":
        udp_flows(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "udp-echo":
        udp_echo(int(args[0]), float(args[1]), args[2:3] == ["until-eof"])
