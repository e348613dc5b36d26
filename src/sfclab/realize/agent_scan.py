"""The agent's ``scan`` verb: what a host driven over SSH has to offer (``sfclab host add
--ssh`` scans it before it joins a running lab).

- ``scan`` ``{}``: its online CPUs (``/sys/devices/system/cpu/online``), its memory
  (``MemTotal`` of ``/proc/meminfo``, bytes) and its kernel release.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import LabError


def mem_total(meminfo: Path = Path("/proc/meminfo")) -> int:
    """``MemTotal`` in bytes."""
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                break
            return int(value) << 10
    raise LabError(f"{meminfo} has no MemTotal in kB")


def scan(req: dict[str, Any]) -> dict[str, Any]:
    from ..kernel.cpus import online

    return {"cpus": online(), "memory": mem_total(), "kernel": os.uname().release}


VERBS = {"scan": scan}
