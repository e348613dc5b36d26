"""The library's front door: a lab you can build, use and remove from Python.

    from sfclab.api import Lab
    with Lab.from_file("scenarios/chain5.yaml") as lab:      # up on enter, down on exit
        lab.exec("src", ["ping", "-c", "1", str(lab.address("dst"))])
        print(lab.inspect()["nodes"]["r1"])
"""

from __future__ import annotations

import subprocess
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Literal, overload

from .functions.base import NetworkFunction
from .plan.model import Plan
from .kernel import netns
from .realize import lifecycle
from .realize.functions import instantiate
from .realize.state import LabState
from .spec.lab import Lab as LabSpec
from .realize.kinds import load_lab, load_lab_dict


class Lab:
    """A lab description that can be brought up and down; a context manager."""

    def __init__(self, spec: LabSpec):
        self.spec = spec
        self.plan: Plan | None = None

    @classmethod
    def from_file(cls, path: str) -> "Lab":
        return cls(load_lab(path))

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "<dict>") -> "Lab":
        return cls(load_lab_dict(d, source))

    @property
    def name(self) -> str:
        return self.spec.name

    def up(self, progress=None) -> "Lab":
        self.plan = lifecycle.up(self.spec, progress=progress)
        return self

    def down(self):
        if self.plan is None and not LabState(self.name).exists:
            return None
        self.plan = None
        return lifecycle.down(self.name)

    def __enter__(self) -> "Lab":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def _plan(self) -> Plan:
        if self.plan is None:
            self.plan = lifecycle.load_plan(self.name)[1]
        return self.plan

    def netns(self, node: str) -> str:
        return lifecycle.node_netns(self.name, node)

    @overload
    def address(self, node: str, family: Literal[4] = 4) -> IPv4Address: ...
    @overload
    def address(self, node: str, family: Literal[6]) -> IPv6Address: ...

    def address(self, node: str, family: int = 4) -> IPv4Address | IPv6Address:
        """The node's first address of ``family`` (4, or 6 in a lab of ``ip: 6`` or ``dual``)."""
        return self._plan().address_of(node, family)

    def exec(self, node: str, argv: list[str], *, check: bool = True,
             timeout: float | None = 60, input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` in the node's namespace (on a host reached over SSH: there) and wait."""
        return lifecycle.run_in(self.name, node, argv, check=check, timeout=timeout,
                                input=input)

    def popen(self, node: str, argv: list[str], **kw: Any) -> subprocess.Popen:
        return netns.popen(self.netns(node), argv, **kw)

    def function(self, node: str) -> NetworkFunction | None:
        return instantiate(LabState(self.name), self._plan(), node)

    def inspect(self) -> dict[str, Any]:
        from .realize.inspect import inspect  # light start-up: pyroute2 only to inspect

        return inspect(self.name)
