"""A core's network softirq time, to the nanosecond, and a sink's frames: a path's cost per frame.

On these machines every hop of a chain between namespaces runs in the network softirqs of the
core that receives its frames (RPS hands them there), so what a path costs per frame is that
core's NET_RX/NET_TX softirq time over a trial divided by the frames forwarded, and its capacity
is one over that.  This kernel has no IRQ time accounting (/proc/stat only samples softirq
time), so :class:`SoftirqClock` times them with eBPF on irq:softirq_entry/exit
(``native/build/sfc-softirq``, ``bpf/softirq_time.bpf.c``).  Other programs' network softirqs
on that core count too (a small error on a busy machine); their user and system time do not,
nor does any time the core was not run: unlike a zero-loss rate, the figure does not move with
the machine's stalls.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sfclab.kernel import netns  # noqa: E402


class SoftirqClock:
    """Per-CPU time in the network softirqs so far (``read()``: CPU -> ns), for the life of a
    ``with`` block (the BPF programs are held by the ``sfc-softirq`` process)."""

    def __init__(self) -> None:
        binary = Path(__file__).resolve().parents[1] / "native" / "build" / "sfc-softirq"
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin and self.proc.stdout
        if self.proc.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("sfc-softirq did not start (run `make -C native`)")

    def read(self) -> dict[int, int]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return {int(c): int(ns) for c, ns in
                (x.split(":") for x in self.proc.stdout.readline().split())}

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)

    def __enter__(self) -> SoftirqClock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rx_packets(ns: str, ifname: str = "eth0") -> int:
    """Frames ``ifname`` took in (/proc/net/dev, read inside namespace ``ns``)."""
    for line in netns.run(ns, ["cat", "/proc/net/dev"]).stdout.splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == ifname:
            return int(counters.split()[1])
    raise RuntimeError(f"no {ifname} in {ns}")
