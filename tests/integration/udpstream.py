"""A paced UDP stream that runs until it is told to stop, for traffic that must span an
operation of unknown length (run inside a lab namespace, ``python3 -m ...``)::

    udp-stream DST SPORT DPORT PPS

sends numbered datagrams from SPORT to DST:DPORT at PPS (as far as the machine keeps up),
counts the distinct ones an echo (:mod:`.sfcprobe`'s ``udp-echo``) sends back, prints
``ready`` once sending, and on SIGTERM stops sending, waits up to 2 s for the last answers and
prints one JSON line: ``sent``, ``answered``, ``lost`` (sent and never answered) and
``seconds``.
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


def stream(dst: str, sport: int, dport: int, pps: float) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", sport))
    s.settimeout(0.1)
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
                      "seconds": round(seconds, 3)}), flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd != "udp-stream" or len(args) != 4:
        sys.exit(__doc__)
    stream(args[0], int(args[1]), int(args[2]), float(args[3]))
