"""An Open vSwitch instance per host context: ``ovsdb-server`` and ``ovs-vswitchd`` of its own.

A host's OVS runs inside the host's context with its database, sockets, pid files and logs in
the lab's state directory (``.../hosts/<host>/ovs``, given to OVS as ``OVS_RUNDIR`` and the
like), so it shares nothing with this machine's OVS or another host's.  Bridges use the
userspace datapath (``datapath_type=netdev``: this kernel has no openvswitch module), whose
ports need tx checksum offload off or TCP fails.  The daemons run in the context's namespace,
so ``down`` ends them with every other process there (by PID, found through the namespace).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import RealizeError
from ..kernel.ovs import SCHEMA, available
from .context import HostContext


#: the programs a host's OVS runs (a host's check refuses a host without them)
PROGRAMS = ("ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-vswitchd", "ovs-appctl")


def _env(rundir: Path) -> dict[str, str]:
    d = str(rundir)
    return dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d, OVS_SYSCONFDIR=d,
                OVS_PKGDATADIR="/usr/share/openvswitch")


def start(ctx: HostContext, rundir: Path) -> None:
    """Start the host's OVS daemons (its database made fresh)."""
    if not available():
        raise RealizeError("Open vSwitch is not installed (Debian package openvswitch-switch)",
                           obj=f"ovs of host {ctx.name}")
    rundir.mkdir(parents=True, exist_ok=True)
    env = _env(rundir)
    db = rundir / "conf.db"
    ctx.run(["ovsdb-tool", "create", str(db), SCHEMA], env=env)
    sock = rundir / "db.sock"
    ctx.run(["ovsdb-server", str(db), f"--remote=punix:{sock}",
             f"--pidfile={rundir / 'ovsdb-server.pid'}",
             f"--unixctl={rundir / 'ovsdb-server.ctl'}", "--detach", "--no-chdir",
             f"--log-file={rundir / 'ovsdb-server.log'}"], env=env)
    ctx.run(["ovs-vsctl", f"--db=unix:{sock}", "--no-wait", "init"], env=env)
    ctx.run(["ovs-vswitchd", f"unix:{sock}", f"--pidfile={rundir / 'ovs-vswitchd.pid'}",
             f"--unixctl={rundir / 'ovs-vswitchd.ctl'}", "--detach", "--no-chdir",
             f"--log-file={rundir / 'ovs-vswitchd.log'}"], env=env)
    deadline = time.monotonic() + 10
    while not (rundir / "ovs-vswitchd.ctl").exists():
        if time.monotonic() > deadline:
            raise RealizeError("ovs-vswitchd did not start", obj=f"ovs of host {ctx.name}")
        time.sleep(0.05)


def exit_cleanup(rundir: Path) -> list[str]:
    """The command asking the host's ``ovs-vswitchd`` to exit after deleting its datapath and
    the devices it made (``ovs-netdev``, the bridges' internal ports: a userspace datapath's
    tap devices outlive a daemon that is merely ended)."""
    return ["ovs-appctl", f"--target={rundir / 'ovs-vswitchd.ctl'}", "--timeout=10", "exit",
            "--cleanup"]


def vsctl(ctx: HostContext, rundir: Path, commands: list[list[str]], timeout: int = 60) -> str:
    """``commands`` as one transaction of the host's OVS."""
    argv = ["ovs-vsctl", f"--db=unix:{rundir / 'db.sock'}", f"--timeout={timeout}"]
    for c in commands:
        argv += ["--", *c]
    return ctx.run(argv, env=_env(rundir), timeout=timeout + 5)


def bridge(name: str, ports: list[str], lab: str) -> list[list[str]]:
    """The commands making bridge ``name`` (userspace datapath, normal switching) with
    ``ports`` (kernel interfaces of the context), all marked with the lab."""
    out = [["add-br", name], ["set", "bridge", name, "datapath_type=netdev",
                              f"external_ids:sfclab-lab={lab}"]]
    for p in ports:
        out += [["add-port", name, p], ["set", "interface", p, f"external_ids:sfclab-lab={lab}"]]
    return out
