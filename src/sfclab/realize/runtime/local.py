"""The ``local`` runtime: a lab in this machine's kernel, its hosts (if any) emulated.

Everything is made here, in-process, by the lab's part table (:mod:`sfclab.realize.kinds`)
through the :class:`~sfclab.realize.build.Builder`, journaled in this machine's journal
first; ``down`` removes what that journal names.  An emulated host is a namespace of this
machine (its context) with cgroups for its CPUs and memory.  The agent of a real host runs
this same runtime there, for its own part.
"""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING, Any

from ...errors import LabError, RealizeError, SpecError
from ...kernel import netns, ovs
from ...plan.model import HostPlan, Plan
from ...plan.names import STAGING_NODE, netns_name
from .. import change
from ..kinds import TABLE
from ..teardown import TeardownReport, teardown
from .base import HostRuntime, Progress
from .process import LocalProcess, LocalPrograms

if TYPE_CHECKING:
    from ...spec.lab import Lab
    from ..dataplane import DataPlane


class LocalRuntime(HostRuntime):
    """This machine, and hosts emulated in it."""

    kind = "local"
    here = True

    def check_node(self, plan: Plan, node: str) -> None:
        from ..functions import instantiate  # light start-up: pydantic only when checking

        instantiate(self.state, plan, node).check()

    def up(self, lab: Lab, plan: Plan, say: Progress) -> None:
        import yaml  # light start-up: down/ls/inspect never write YAML

        from .. import journal  # light start-up: only up journals
        from ..build import Builder  # light start-up: only up builds

        state = self.state
        if plan.ovs_bridges:
            ovs.ensure_running()
        _preflight(plan)
        state.begin(plan.to_dict(), yaml.safe_dump(lab.to_dict(), sort_keys=False), lab.source)
        state.record(journal.entries(plan))
        builder = Builder(plan, TABLE.parts(), state, say)
        t0 = time.monotonic()
        try:
            builder.build()
        except BaseException as e:
            builder.close()
            say("rolling back")
            rep = teardown(state)
            state.remove()
            if isinstance(e, (RealizeError, SpecError, KeyboardInterrupt)):
                raise
            if rep.errors:
                raise RealizeError(f"{e} (rollback: {'; '.join(rep.errors)})") from e
            raise RealizeError(str(e) or type(e).__name__) from e
        builder.close()
        state.set_meta(status="up", pid=None, up_seconds=round(time.monotonic() - t0, 4))

    def down(self) -> TeardownReport:
        return teardown(self.state)

    def left(self) -> list[str]:
        return []

    def inspect(self, plan: Plan, found: dict[str, Any]) -> None:
        for part in TABLE.parts():
            part.inspect(self.state, plan, found)

    def inspect_far(self, out: dict[str, Any]) -> None:
        return None  # all of it was read here

    def context(self, host: HostPlan) -> str | None:
        return host.netns

    def reached_as(self, host: HostPlan | None) -> str | None:
        return None

    def run(self, host: str | None, ns: str | None, argv: list[str], *, check: bool,
            input: str | None, timeout: float | None) -> subprocess.CompletedProcess:
        assert ns is not None
        return netns.run(ns, argv, check=check, timeout=timeout, input=input)

    def exec(self, host: str | None, ns: str | None, argv: list[str]) -> int:
        assert ns is not None
        try:
            proc = netns.popen(ns, argv)
        except FileNotFoundError:
            raise LabError(f"command not found: {argv[0]}") from None
        except OSError as e:  # not executable, a directory ...
            raise LabError(f"cannot run {argv[0]}: {e.strerror}") from None
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            return proc.wait()

    def spawn(self, host: str | None, ns: str, argv: list[str]) -> LocalProcess:
        return LocalProcess(ns, argv)

    def spawn_all(self, host: str | None, ns: str, argvs: list[list[str]], *,
                  listen: list[int] | None = None, timeout: float = 5.0) -> LocalPrograms:
        return LocalPrograms(ns, argvs, listen, timeout)

    def tools(self, host: str | None) -> dict[str, Any]:
        return {}  # this machine's own

    def data_plane(self, node_ids: dict[str, int]) -> DataPlane:
        from ..dataplane import DataPlane  # light start-up: only labs with chains read it

        return DataPlane(self.state.name)

    def leave(self, host: HostPlan) -> list[str]:
        """Remove an emulated host ``host add`` made: the plan diff of one host (its context
        namespace and cgroups, as the hosts' part journaled and made them), taken out by the
        same parts as at ``down`` (:func:`sfclab.realize.change.remove`), each once its mark
        is checked; the errors, naming what was left and why."""
        gone = Plan(self.state.name, "", hosts=[host])
        return change.remove(self.state, gone, gone)


def _preflight(plan: Plan) -> None:
    extra = [h.netns for h in plan.hosts] + ([plan.underlay.netns] if plan.underlay else [])
    for ns in [n.name for n in plan.namespaces] + [netns_name(plan.lab, STAGING_NODE)] + extra:
        if netns.exists(ns):
            raise LabError(f"namespace {ns} already exists and no lab of sfclab owns it; "
                           "sfclab will not adopt it")
    # everything that is or passes through the root namespace: root ends, OVS-made ports
    roots = [i.name for i in plan.interfaces if i.netns is None]
    roots += [p.name for b in plan.ovs_bridges for p in b.ports]
    roots += [b.name for b in plan.ovs_bridges]
    if roots:
        from pyroute2 import IPRoute  # light start-up: pyroute2 only for labs with OVS

        with IPRoute() as ipr:
            for name in roots:
                if ipr.link_lookup(ifname=name):
                    raise LabError(f"interface {name} already exists in the root namespace; "
                                   "sfclab will not adopt it")
