"""Example ``tun`` program: forward every packet unchanged and count them.

Usage: ``python -m sfclab.functions.examples.tun_count DEVICE`` (sfclab appends DEVICE).
Attaches to the existing TUN device (``IFF_TUN | IFF_NO_PI``), reads each IP packet and
writes it straight back, so the kernel routes it on.  Writes ``{"packets", "bytes",
"dropped"}`` as JSON to ``$SFCLAB_STATS`` every half second, on SIGUSR1 and on SIGTERM
(then exits).  A packet that cannot be written back is counted as dropped.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def main(argv: list[str]) -> int:
    dev = argv[1] if len(argv) > 1 else os.environ.get("SFCLAB_TUN", "")
    if not dev:
        print("usage: tun_count DEVICE", file=sys.stderr)
        return 2
    stats_path = os.environ.get("SFCLAB_STATS")
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    counts = {"packets": 0, "bytes": 0, "dropped": 0}
    flags = {"dump": False, "stop": False}

    def dump() -> None:
        if not stats_path:
            return
        tmp = stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(counts, time=time.time()), f)
        os.replace(tmp, stats_path)

    signal.signal(signal.SIGUSR1, lambda *_: flags.update(dump=True))
    signal.signal(signal.SIGTERM, lambda *_: flags.update(stop=True))
    dump()
    next_dump = time.monotonic() + 0.5
    while not flags["stop"]:
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)
        except InterruptedError:
            ready = []
        for _ in range(64 if ready else 0):
            try:
                pkt = os.read(fd, 65536)
            except BlockingIOError:
                break
            counts["packets"] += 1
            counts["bytes"] += len(pkt)
            try:
                os.write(fd, pkt)
            except OSError:
                counts["dropped"] += 1
            if not select.select([fd], [], [], 0)[0]:
                break
        if flags["dump"] or time.monotonic() >= next_dump:
            flags["dump"] = False
            dump()
            next_dump = time.monotonic() + 0.5
    dump()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
