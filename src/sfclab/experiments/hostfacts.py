"""Facts about the host a reproduction ran on, beyond :mod:`sfclab.traffic.environment`'s.

:func:`host_facts` returns one dict for the bundle's environment record (everything is read,
nothing on the host is changed)::

    {"cpu_frequency_mhz": [per core], "cpu_governor": [per core, or "none" without cpufreq],
     "hypervisor": {"cpu_flag": bool, "detect_virt": "kvm" | "none" | "absent" | ...},
     "sysctls": {name: value | "absent"},       # the root namespace's, read from /proc/sys
     "ovs": {"other_config": "...", "dpdk_initialized": ...} | "not running" | "absent",
     "packages": {Debian package: version | "absent"}}

``root`` (default ``/``) is where ``proc`` and ``sys`` are read, so the readers run on a copied
tree in tests.  Per-interface settings (RPS masks, offloads, GRO) belong to the lab's own
interfaces, which exist only during a run: they are kept per run in the bundle's
``trials/*.json`` where the measurement recorded them, not here.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import Any

#: sysctls that change what a chain of namespaces forwards (read, never written)
SYSCTLS = ("net.core.netdev_max_backlog", "net.core.netdev_budget",
           "net.core.netdev_budget_usecs", "net.core.rmem_max", "net.core.wmem_max",
           "net.core.rps_sock_flow_entries", "net.core.bpf_jit_enable",
           "net.core.default_qdisc", "net.ipv4.tcp_congestion_control",
           "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.ip_forward",
           "kernel.sched_autogroup_enabled")

#: Debian packages of the tools in the data path and the build
PACKAGES = ("iperf3", "openvswitch-switch", "nftables", "iptables", "iproute2", "ethtool",
            "clang-14", "libbpf1", "bpftool", "xdp-tools", "podman", "linux-perf")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _run(argv: list[str]) -> tuple[int, str]:
    if shutil.which(argv[0]) is None:
        return -1, ""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return -2, ""
    return cp.returncode, cp.stdout.strip()


def cpu_frequencies(root: str = "/") -> tuple[list[float], list[str]]:
    """Each core's current frequency (MHz) and governor; without cpufreq (common in VMs) the
    frequencies of /proc/cpuinfo and governor "none"."""
    cores = sorted(glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*")),
                   key=lambda p: int(os.path.basename(p)[3:]))
    freqs: list[float] = []
    govs: list[str] = []
    for c in cores:
        cur = _read(os.path.join(c, "cpufreq/scaling_cur_freq"))
        gov = _read(os.path.join(c, "cpufreq/scaling_governor"))
        if cur is not None and cur.isdigit():
            freqs.append(int(cur) / 1000.0)
        if gov is not None:
            govs.append(gov)
    if not freqs:
        info = _read(os.path.join(root, "proc/cpuinfo")) or ""
        for line in info.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "cpu MHz":
                try:
                    freqs.append(float(v))
                except ValueError:
                    pass
    return freqs, govs or ["none"]


def hypervisor(root: str = "/") -> dict[str, Any]:
    """Whether the CPU says it runs under a hypervisor, and systemd-detect-virt's name."""
    info = _read(os.path.join(root, "proc/cpuinfo")) or ""
    flag = any(line.startswith("flags") and " hypervisor" in line for line in info.splitlines())
    rc, out = _run(["systemd-detect-virt"])
    name = "absent" if rc == -1 else (out or "none")
    return {"cpu_flag": flag, "detect_virt": name}


def sysctls(root: str = "/", names: tuple[str, ...] = SYSCTLS) -> dict[str, str]:
    out = {}
    for n in names:
        v = _read(os.path.join(root, "proc/sys", *n.split(".")))
        out[n] = "absent" if v is None else " ".join(v.split())
    return out


def ovs_settings() -> dict[str, str] | str:
    """Open vSwitch's global ``other_config`` (datapath settings), or why there is none."""
    rc, out = _run(["ovs-vsctl", "--timeout=5", "get", "Open_vSwitch", ".", "other_config"])
    if rc == -1:
        return "absent"
    if rc != 0:
        return "not running"
    _, dp = _run(["ovs-vsctl", "--timeout=5", "get", "Open_vSwitch", ".", "datapath_types"])
    return {"other_config": out, "datapath_types": dp}


def packages(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed Debian package versions (dpkg-query), "absent" when not installed."""
    rc, out = _run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status} ${Version}\\n",
                    *names])
    found: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "installed":
            found[parts[0]] = parts[2]
    return {n: found.get(n, "absent") for n in names}


def host_facts(root: str = "/") -> dict[str, Any]:
    freqs, govs = cpu_frequencies(root)
    return {"cpu_frequency_mhz": freqs, "cpu_governor": govs, "hypervisor": hypervisor(root),
            "sysctls": sysctls(root), "ovs": ovs_settings(), "packages": packages()}
