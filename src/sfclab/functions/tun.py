"""``tun``: the node's transit traffic goes through a user-space program via a TUN device.

Lab file keys::

    exec: PATH [ARGS...]     # a string (split like a shell) or a list; PATH searched in $PATH;
                             # {python}: the Python running sfclab (sys.executable)
    device: sfctun0          # TUN device name (default sfctun0)
    table: 100               # routing table used for the detour (default 100)
    cpu: 0.5                 # optional cgroup limits (see sfclab.functions.cgroups)
    memory: 64M

Objects made in the node's namespace at configure:

- the TUN device (persistent, no packet-information header), up, reverse-path filter off;
  in a lab of ``ip: 4`` IPv6 off on it, in a lab with IPv6 IPv6 on but with no address of its
  own (``addr_gen_mode`` none: no link-local address, so the kernel sends no router
  solicitation, neighbour or MLD packet of its own into the program);
- routing table ``table`` with ``default dev <device>``, for each family of the lab;
- one rule per lab interface and family ``iif <interface> lookup <table>`` (preference 1000).

So packets arriving from the lab go into the TUN; the program reads them and writes back the
ones it wants forwarded; those arrive with ``iif <device>``, match no rule and are routed by the
main table.  Packets for the node's own addresses are delivered locally (the ``local`` table
comes first).  The program's contract is in docs/functions.md: it gets the device name as the
last argument (or wherever ``{tun}`` appears in ``exec``) and in ``SFCLAB_TUN``, and writes a
JSON object of counters to ``SFCLAB_STATS``, which ``inspect`` reports under ``program``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import Field, field_validator

from ..errors import RealizeError, SpecError
from ..kernel import netns
from ..spec.names import ifname_problem
from . import cgroups
from .base import register
from .params import Argv, resolve_executable
from .process import ProcessFunction

RULE_PREF = 1000
#: how long ``up`` waits for the program to open its TUN device
ATTACH_WAIT_S = 10.0


class TunParams(cgroups.LimitParams):
    exec_: Argv = Field(alias="exec")
    device: str = "sfctun0"
    table: int = Field(default=100, ge=1, le=2**31 - 1)

    @field_validator("device")
    @classmethod
    def _ifname(cls, v: str) -> str:
        problem = ifname_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("table")
    @classmethod
    def _table(cls, v: int) -> int:
        if v in (253, 254, 255):
            raise ValueError("tables 253-255 are the kernel's (default, main, local)")
        return v


@register
class Tun(ProcessFunction):
    kind = "tun"
    Params = TunParams
    params: TunParams
    families = (4, 6)

    @property
    def stats_path(self):
        return self.ctx.state_dir / "tun-stats.json"

    def check(self) -> None:
        resolve_executable(self.params.exec_[0], "exec")
        taken = sorted(i.name for i in self.ctx.interfaces)
        if self.params.device in taken:
            raise SpecError(f"expected a device name the node does not use already (its "
                            f"interfaces: {', '.join(taken)}), got {self.params.device!r}",
                            place="device")

    def programs(self) -> list[str]:
        return ["ip"]

    def ip_batch(self, family: int = 4) -> str:
        """The ``ip -<family> -batch`` of the detour in one family (the device is set up in
        IPv4's, or in IPv6's for a lab of ``ip: 6``)."""
        p = self.params
        lines = [f"link set dev {p.device} up"] if family == self.ctx.families[0] else []
        lines.append(f"route replace default dev {p.device} table {p.table}")
        lines += [f"rule add iif {i.name} lookup {p.table} pref {RULE_PREF}"
                  for i in self.ctx.interfaces]
        return "\n".join(lines) + "\n"

    def configure(self) -> None:
        dev = self.params.device
        self.ctx.run(["ip", "tuntap", "add", "dev", dev, "mode", "tun"])
        if 6 in self.ctx.families:
            # IPv6 on, but no address of the device's own (set before it is up): the kernel
            # then sends nothing of its own (router solicitations, MLD) into the program
            self.ctx.write_sysctl(f"net.ipv6.conf.{dev}.addr_gen_mode", "1")
            self.ctx.write_sysctl(f"net.ipv6.conf.{dev}.accept_ra", "0")
        else:
            # no IPv6 on the device: the kernel's own router solicitations would reach it
            self.ctx.write_sysctl(f"net.ipv6.conf.{dev}.disable_ipv6", "1")
        for fam in self.ctx.families:
            self.ctx.run(["ip", f"-{fam}", "-batch", "-"], input=self.ip_batch(fam))
        # packets written back come in on the TUN with lab sources: no reverse-path check there
        self.ctx.write_sysctl(f"net.ipv4.conf.{self.params.device}.rp_filter", "0")
        if self.ctx.read_sysctl("net.ipv4.conf.all.rp_filter") == "1":
            self.ctx.write_sysctl("net.ipv4.conf.all.rp_filter", "2")

    def start(self) -> None:
        super().start()
        self._wait_attached()

    def _wait_attached(self) -> None:
        """Until the program has opened the device, at most :data:`ATTACH_WAIT_S`: a TUN device
        that no program holds drops every packet routed into it (its carrier is off until one
        opens it), so ``up`` returns only once the detour carries traffic.  A program that ends
        first, or does not open the device in time, fails ``up``.  (CI lost the first 4 to 8
        of 20 datagrams sent right after ``up``, while a Python program still started.)"""
        dev = self.params.device
        deadline = time.monotonic() + ATTACH_WAIT_S
        with netns.iproute(self.ctx.netns) as ipr:
            while True:
                links = ipr.link("get", ifname=dev)
                if links and links[0].get_attr("IFLA_CARRIER") == 1:
                    return
                status = self.proc.poll()
                if status is not None:
                    raise RealizeError(f"exited at start with status {status}, before it "
                                       f"opened its TUN device {dev}",
                                       obj=f"function {self.ctx.node}")
                if time.monotonic() > deadline:
                    raise RealizeError(f"did not open its TUN device {dev} within "
                                       f"{ATTACH_WAIT_S:g} s", obj=f"function {self.ctx.node}")
                time.sleep(0.01)

    def program(self) -> list[str]:
        argv = list(self.params.exec_)
        argv[0] = resolve_executable(argv[0], "exec")
        if any("{tun}" in a for a in argv[1:]):
            return [argv[0]] + [a.replace("{tun}", self.params.device) for a in argv[1:]]
        return argv + [self.params.device]

    def environment(self) -> dict[str, str]:
        return {"SFCLAB_TUN": self.params.device, "SFCLAB_STATS": str(self.stats_path)}

    def inspect(self) -> dict[str, Any]:
        out = super().inspect()
        if out["running"]:
            self.refresh(self.stats_path, timeout=1.0)
        try:
            out["program"] = json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            out["program"] = None
        out["device"] = self.params.device
        return out
