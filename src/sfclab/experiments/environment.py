"""The host environment recorded with every experiment invocation, so results can be compared
across machines: kernel, CPU model, cores, memory and the versions of the tools that shape the
numbers (sfclab, iperf3, Open vSwitch, nftables).  A tool that is missing is recorded as None;
probing never fails."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

from .. import __version__

#: tool name -> argv printing its version on the first line
TOOLS: dict[str, list[str]] = {
    "iperf3": ["iperf3", "--version"],
    "openvswitch": ["ovs-vsctl", "--version"],
    "nftables": ["nft", "--version"],
}


def _first_line(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_environment() -> dict[str, Any]:
    """A JSON-ready description of this host and its tools."""
    uname = platform.uname()
    return {
        "hostname": uname.node,
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "versions": {"sfclab": __version__,
                     **{name: _first_line(argv) for name, argv in TOOLS.items()}},
    }
