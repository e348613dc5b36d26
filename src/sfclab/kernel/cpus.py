"""CPUs: which are online, and where a namespace's receive processing runs (RPS).

On one machine a frame sent into a veth is received, and forwarded through every namespace
after it, inside the sender's own system call on the sender's CPU.  Receive packet steering on
the first hop's ingress interface moves that work to the CPUs of a mask, so a generator pinned
to a CPU outside the mask does only its own work.  :func:`steered` sets the mask for a ``with``
block and restores what was there; it touches the interface's own queue in its namespace (read
and written through ``ip netns exec``, whose private ``/sys`` shows that namespace's devices),
never the root namespace's.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ..errors import RealizeError


def online() -> list[int]:
    """The online CPUs, e.g. ``[0, 1]``."""
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def mask(cpus: list[int]) -> str:
    """``[0, 2]`` -> ``"5"``, the hexadecimal mask sysfs takes."""
    return format(sum(1 << c for c in cpus), "x")


def cpu_list(cpus: list[int]) -> str:
    """``[0, 2, 3]`` -> ``"0,2,3"`` (taskset's and sfcgen's ``--cpus``)."""
    return ",".join(str(c) for c in cpus)


def _rps_file(ifname: str, queue: int) -> str:
    return f"/sys/class/net/{ifname}/queues/rx-{queue}/rps_cpus"


def _in_netns(ns: str, argv: list[str], what: str) -> str:
    cp = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                        check=False, timeout=10)
    if cp.returncode != 0:
        raise RealizeError(cp.stderr.strip() or f"exit status {cp.returncode}", obj=what)
    return cp.stdout.strip()


def rps_mask(ns: str, ifname: str, queue: int = 0) -> str:
    return _in_netns(ns, ["cat", _rps_file(ifname, queue)], f"rps_cpus of {ns}/{ifname}")


def set_rps_mask(ns: str, ifname: str, value: str, queue: int = 0) -> None:
    _in_netns(ns, ["sh", "-c", 'echo "$1" > "$2"', "sh", value, _rps_file(ifname, queue)],
              f"rps_cpus of {ns}/{ifname}")


@contextlib.contextmanager
def steered(ns: str, ifname: str, cpus: list[int]) -> Iterator[str]:
    """Receive processing of ``ns``/``ifname`` on ``cpus`` for the block; yields the mask that
    was there before and puts it back afterwards, whatever happens."""
    before = rps_mask(ns, ifname)
    set_rps_mask(ns, ifname, mask(cpus))
    try:
        yield before
    finally:
        with contextlib.suppress(RealizeError, OSError, subprocess.TimeoutExpired):
            set_rps_mask(ns, ifname, before)
