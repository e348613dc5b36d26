"""A paced UDP stream that runs until it is told to stop, for traffic that must span an
operation of unknown length (run inside a lab namespace, ``python3 -m ...``)::

    udp-stream DST SPORT DPORT PPS
    udp-echo PORT

``udp-stream`` sends numbered datagrams from SPORT to DST:DPORT at PPS (as far as the machine
keeps up), counts the distinct ones the echo sends back, prints ``ready`` once sending, and on
SIGTERM stops sending, waits up to 2 s for the last answers and prints one JSON line:
``sent``, ``answered``, ``lost`` (sent and never answered), ``gaps`` (the first runs of lost
sequence numbers, ``[first, last]``) and ``seconds``.  ``udp-echo`` answers every datagram to
PORT until SIGTERM.  Both sockets take an 8 MiB receive buffer (``SO_RCVBUFFORCE``), so a
process the loaded machine does not run for a few seconds loses nothing at its socket.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import sys
import threading
import time

WAIT_S = 2.0
RCVBUF = 8 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux's value; Python names it late
#: gaps reported at most
GAPS = 20


def _socket(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.1)
    return s


def echo(port: int) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    s = _socket(port)
    print("ready", flush=True)
    while not stop.is_set():
        try:
            d, a = s.recvfrom(2048)
        except socket.timeout:
            continue
        s.sendto(d, a)


def gaps(seen: set[int], sent: int) -> list[list[int]]:
    """The runs of sequence numbers below ``sent`` missing from ``seen`` (the first few)."""
    out: list[list[int]] = []
    start = None
    for k in range(sent + 1):
        if k < sent and k not in seen:
            start = k if start is None else start
        elif start is not None:
            out.append([start, k - 1])
            start = None
            if len(out) >= GAPS:
                break
    return out


def stream(dst: str, sport: int, dport: int, pps: float) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    s = _socket(sport)
    seen: set[int] = set()
    done = threading.Event()

    def receive() -> None:
        while not done.is_set():
            try:
                d, _ = s.recvfrom(2048)
            except socket.timeout:
                continue
            if len(d) >= 8:
                seen.add(struct.unpack("!Q", d[:8])[0])

    rx = threading.Thread(target=receive)
    rx.start()
    print("ready", flush=True)
    t0 = time.monotonic()
    sent = 0
    while not stop.is_set():
        due = t0 + sent / pps
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
            continue
        s.sendto(struct.pack("!Q", sent) + b"sfclab stream", (dst, dport))
        sent += 1
    seconds = time.monotonic() - t0
    end = time.monotonic() + WAIT_S
    while len(seen) < sent and time.monotonic() < end:
        time.sleep(0.05)
    done.set()
    rx.join()
    answered = len(seen)
    print(json.dumps({"sent": sent, "answered": answered, "lost": sent - answered,
                      "gaps": gaps(seen, sent), "seconds": round(seconds, 3)}), flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:] or [""]
    if cmd == "udp-stream" and len(args) == 4:
        stream(args[0], int(args[1]), int(args[2]), float(args[3]))
    elif cmd == "udp-echo" and len(args) == 1:
        echo(int(args[0]))
    else:
        sys.exit(__doc__)
