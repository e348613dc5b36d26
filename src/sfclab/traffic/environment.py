"""Where a measurement ran: kernel, CPU, memory and the versions of the tools in the data path.

:func:`environment` returns one dict, gathered once per process (tool versions do not change
under a running benchmark), for the ``environment`` field of every
:class:`~sfclab.traffic.result.Measurement`::

    {"kernel": {"release", "version", "machine"}, "hostname",
     "cpu_model", "cores", "cores_usable", "memory_bytes",
     "versions": {"sfclab", "python", "iperf3", "ovs-vswitchd", "nft", "iptables", "tc"},
     "tool_banners": {tool: first line of its version output}}

A tool that is not installed is reported as ``"absent"``; one that is installed but prints no
version is ``"unknown"``.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from typing import Any

#: tool -> argv that prints its version
VERSION_ARGV: dict[str, list[str]] = {
    "iperf3": ["iperf3", "--version"],
    "ovs-vswitchd": ["ovs-vswitchd", "--version"],
    "nft": ["nft", "--version"],
    "iptables": ["iptables", "--version"],
    "tc": ["tc", "-V"],  # iproute2's tc has no --version
}

_VERSION_RE = re.compile(r"(\d+(?:\.\d+)+)")


def parse_version(banner: str) -> str:
    """The first dotted number in a version banner (``nftables v1.0.6 (...)`` -> ``1.0.6``)."""
    m = _VERSION_RE.search(banner)
    return m.group(1) if m else "unknown"


@functools.lru_cache(maxsize=None)
def tool_banner(tool: str) -> str | None:
    """First non-empty line of ``tool``'s version output; None when the tool is absent."""
    argv = VERSION_ARGV.get(tool, [tool, "--version"])
    if shutil.which(argv[0]) is None:
        return None
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in (cp.stdout + "\n" + cp.stderr).splitlines():
        if line.strip():
            return line.strip()
    return ""


def tool_version(tool: str) -> str:
    banner = tool_banner(tool)
    if banner is None:
        return "absent"
    return parse_version(banner)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def _environment() -> dict[str, Any]:
    from .. import __version__

    u = os.uname()
    banners = {tool: tool_banner(tool) for tool in VERSION_ARGV}
    versions = {"sfclab": __version__, "python": platform.python_version()}
    versions.update({tool: tool_version(tool) for tool in VERSION_ARGV})
    return {
        "kernel": {"release": u.release, "version": u.version, "machine": u.machine},
        "hostname": u.nodename,
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_bytes": _memory_bytes(),
        "versions": versions,
        "tool_banners": {k: ("absent" if v is None else v) for k, v in banners.items()},
    }


def environment() -> dict[str, Any]:
    """The environment dict (cached; a fresh copy each call so callers may annotate it)."""
    env = _environment()
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in env.items()}
