"""Open vSwitch: the daemons, one OVSDB transaction per lab, and what a lab owns in OVSDB.

sfclab starts ``ovsdb-server`` and ``ovs-vswitchd`` when they are not running (and leaves them
running: they are shared by every lab and by anything else on the host).  Where the kernel has
no ``openvswitch`` datapath module, bridges use the userspace datapath (``datapath_type=netdev``).
Every bridge a lab makes carries ``external_ids:sfclab-lab=<lab>``; ``down`` deletes only bridges
that are both in the lab's journal and carry that mark.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable

from ..errors import RealizeError, ToolError

RUN_DIR = os.environ.get("OVS_RUNDIR", "/var/run/openvswitch")
DB_SOCK = os.path.join(RUN_DIR, "db.sock")
DB_FILE = os.environ.get("OVS_DBDIR", "/etc/openvswitch") + "/conf.db"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
MARK = "sfclab-lab"


def available() -> bool:
    return shutil.which("ovs-vsctl") is not None and shutil.which("ovs-vswitchd") is not None


def kernel_datapath() -> bool:
    """True when the kernel has the openvswitch datapath (module loaded or built in)."""
    return os.path.isdir("/sys/module/openvswitch")


def default_datapath() -> str:
    return "system" if kernel_datapath() else "netdev"


def _pid_alive(pidfile: str) -> bool:
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def _db_answers() -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            s.connect(DB_SOCK)
        return True
    except OSError:
        return False


def _run(argv: list[str], timeout: float = 30) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(argv, -1, f"no answer in {timeout:.0f} s") from None
    if cp.returncode != 0:
        raise ToolError(argv, cp.returncode, cp.stderr or cp.stdout)
    return cp.stdout


#: held while the daemons are started, so that processes starting them at once (the workers of
#: a test run, two ``up`` runs) start each once
START_LOCK = os.path.join(RUN_DIR, ".sfclab-start.lock")
#: seconds a freshly started ovsdb-server gets to answer on its socket
DB_START_S = 10.0


def _wait_for(ready: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RealizeError(f"{what} did not start in {timeout:.0f} s", obj="ovs")
        time.sleep(0.05)


def ensure_running() -> None:
    """Start ovsdb-server and ovs-vswitchd if they are not running.  The check and the start
    happen under one lock (``START_LOCK``): two processes that both find the daemons stopped
    start them once, and the second finds them running."""
    if not available():
        raise RealizeError("Open vSwitch is not installed (Debian package openvswitch-switch)",
                           obj="ovs")
    vswitchd_pid = os.path.join(RUN_DIR, "ovs-vswitchd.pid")
    if _db_answers() and _pid_alive(vswitchd_pid):
        return
    os.makedirs(RUN_DIR, exist_ok=True)
    os.makedirs("/var/log/openvswitch", exist_ok=True)
    with open(START_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _db_answers():
            real = os.path.realpath(DB_FILE)
            if not os.path.exists(real):
                os.makedirs(os.path.dirname(real), exist_ok=True)
                _run(["ovsdb-tool", "create", real, SCHEMA])
            if not _pid_alive(os.path.join(RUN_DIR, "ovsdb-server.pid")):
                _run(["ovsdb-server", f"--remote=punix:{DB_SOCK}",
                      "--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
                      "--pidfile", "--detach", "--log-file", real])
            _wait_for(_db_answers, "ovsdb-server", DB_START_S)
            _run(["ovs-vsctl", "--no-wait", "init"])
        if not _pid_alive(vswitchd_pid):
            _run(["ovs-vswitchd", f"unix:{DB_SOCK}", "--pidfile", "--detach", "--log-file"])
            _wait_for(lambda: _pid_alive(vswitchd_pid), "ovs-vswitchd", 10)


def vsctl(commands: list[list[str]], timeout: float = 60) -> str:
    """Run ``commands`` as one ovs-vsctl invocation, i.e. one OVSDB transaction."""
    argv = ["ovs-vsctl", f"--timeout={int(timeout)}"]
    for c in commands:
        argv += ["--", *c]
    return _run(argv, timeout=timeout + 5)


def owned_bridges(lab: str) -> list[str]:
    """Names of the bridges whose external_ids carry this lab's mark, asked of the daemons,
    started if they stopped since ``up`` (a crash, a reboot, a killed session): the bridges
    stay in OVSDB's file and come back with them, so a database that does not answer is never
    taken for one without bridges.  Without Open vSwitch installed there are none."""
    if not available():
        return []
    ensure_running()
    out = _run(["ovs-vsctl", "--timeout=10", "--format=json", "--columns=name",
                "find", "Bridge", f"external_ids:{MARK}={lab}"])
    data = json.loads(out)
    return [row[0] for row in data.get("data", [])]


def bridge_info(names: list[str]) -> dict[str, dict]:
    """datapath_type and ports of the named bridges (for inspect)."""
    if not names or not _db_answers():
        return {}
    out = _run(["ovs-vsctl", "--timeout=10", "--format=json", "--columns=name,datapath_type,ports",
                "list", "Bridge", *names])
    data = json.loads(out)
    ports_out = json.loads(_run(["ovs-vsctl", "--timeout=10", "--format=json",
                                 "--columns=_uuid,name", "list", "Port"]))
    port_names = {row[0][1]: row[1] for row in ports_out.get("data", [])}
    info = {}
    for name, dp, ports in data.get("data", []):
        uuids = [p[1] for p in ports[1]] if ports[0] == "set" else [ports[1]]
        info[name] = {"datapath_type": dp or "system",
                      "ports": sorted(port_names.get(u, u) for u in uuids)}
    return info
