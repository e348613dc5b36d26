"""The ``local`` runtime's operations on a running lab (:class:`LocalLive`): this machine
makes everything, in its own kernel, journaled in its journal.

- ``chain add``: the added nodes' objects journaled and made by the build engine of ``up``
  (:mod:`sfclab.realize.change`: namespaces, veths, addresses, routes, functions, through the
  node and link tables; a node on another emulated host than its attach node gets its tunnel
  from :mod:`sfclab.live.chains.wire` and :mod:`sfclab.live.hosts.underlay`), then programs,
  labels, paths and slots (:mod:`sfclab.live.chains.tables`), then classifier entries;
  ``chain rm`` and a rollback the other way, the nodes last: the plan diff from the lab with
  them to the lab without them, taken out by the engine's parts as ``down`` takes out a lab
  (:func:`sfclab.live.chains.wire.remove_nodes`);
- health: one watcher for the lab (:mod:`sfclab.live.health.watcher`), its findings in the
  lab's state;
- ``chain migrate``: :mod:`sfclab.live.runtime.local_migrate`;
- hosts: an emulated host joins (:mod:`sfclab.live.ops.hostops` makes it); a machine (``--ssh``) cannot.
"""

from __future__ import annotations

import json
import shutil
import time
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import LabError
from ...plan.chainadd import Addition, NewNode, apply, withdraw
from ...plan.model import Plan
from ...plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ...realize import dataplane
from ...realize.dataplane import DataPlane
from ...realize.runtime.base import Progress
from ...realize.runtime.local import LocalRuntime
from ...realize.state import LabState
from ..chains import classify_maps, tables, trace, wire
from . import local_migrate as live_local_migrate
from .. import record
from ..health import watcher
from ..chains.classify_maps import Classify
from ..record import steering_of
from .base import DRAIN_S, LiveRuntime, classified_later

if TYPE_CHECKING:
    from ...realize.containers import ImageProblem
    from ...spec.sfc import ClassifierSpec
    from ...plan.migration import Migration
    from ..chains.moves import Owner
    from ..request import MigrateInstance




class LocalLive(LocalRuntime, LiveRuntime):
    """This machine makes everything of a running lab's changes, in its kernel."""

    def check_free(self, plan: Plan, merged: Plan, add: Addition, source: str) -> None:
        if not plan.steering:
            return None  # the lab has no maps yet: no entry is taken
        with DataPlane(self.state.name) as dp:  # refuse entries another chain holds
            tables.check_room(dp, add.directions, source)
            for d in add.directions:
                tables.check_free(dp, steering_of(merged), d, source)

    def image_problem(self, nodes: list[NewNode]) -> tuple[str, ImageProblem] | None:
        """None: every host is this machine, and the chain file's images were checked
        against it when the file was read (:mod:`sfclab.live.request`)."""
        return None

    def journal_chain(self, plan: Plan, add: Addition) -> None:
        merged = Plan.from_dict(plan.to_dict())
        apply(merged, add)
        wire.journal_nodes(self.state, merged, add.nodes)
        if not plan.steering:
            self.state.record([{"op": "bpffs", "path": str(dataplane.lab_dir(plan.lab))}])

    def make_chain(self, plan: Plan, merged: Plan, add: Addition, say: Progress) -> None:
        state, msp = self.state, steering_of(merged)
        if not plan.steering:
            dataplane.make_dir(plan.lab)
        say(f"function nodes: {len(add.nodes)}")
        wire.make_nodes(state, merged, add.nodes, say)
        for node, ifname, mtu in add.mtu:
            wire.set_link(merged, node, ifname, mtu=mtu)
        for node, ifname, offl in add.offloads:
            wire.set_link(merged, node, ifname, offloads=offl)
        for node, ifname in add.single_segment:
            wire.set_link(merged, node, ifname, gso_max_segs=1)
        say("eBPF programs")
        for node, progs in add.attach_progs.items():
            wire.load_programs(merged, node, msp.node_ids[node], progs)
        for _host, ctx, port in wire.napi_ports(merged, msp):
            wire.napi_on(port, ctx)
        nodes = {n for d in add.directions for p in d.paths for n in p.nodes}
        nodes |= {h.node for h in add.hops} | {h.next for h in add.hops if h.next}
        netns_of = {n.node: n.name for n in merged.namespaces}
        ifaces = tables.interfaces(netns_of, nodes)
        say("tables")
        with DataPlane(plan.lab) as dp:
            tables.write_labels(dp, msp, add.hops, ifaces, netns_of)
            for d in add.directions:
                assert d.path_base is not None
                tables.write_paths(dp, d, d.path_base, ifaces, msp)
                tables.write_slots(dp, d, tables.slot_paths(msp, d))
            say("classifiers: traffic on")
            for d in add.directions:
                tables.write_classifiers(dp, msp, d)


    def undo_chain(self, merged: Plan, add: Addition) -> None:
        _unmake(self.state, merged, add)
        _forget_nodes(self.state, add)

    def remove_chain(self, plan: Plan, add: Addition) -> list[str]:
        return _unmake(self.state, plan, add)

    def classify(self, plan: Plan, sp: SteeringPlan, job: Classify) -> tuple[Path, int]:
        """Checked against the live maps (room, entries other chains hold), the note saved,
        then every row written in batches, all or nothing."""
        with DataPlane(self.state.name) as dp:
            undo = classify_maps.check_live(dp, job.rules, job.fwd, job.back, job.total,
                                            job.masks, job.source)
            classify_maps.refuse_shadowing(dp, sp, {d.index for d in job.dirs}, job.by_dir,
                                           job.rules, job.back, job.source,
                                           undo.before or {})
            note = record.save_classifiers(self.state, job.chain, job.source, job.data,
                                           len(job.rules), job.total, "writing")
            return note, classify_maps.write(dp, sp, job.by_dir, note, undo)

    def trace_paths(self, plan: Plan, sp: SteeringPlan, d: DirectionPlan,
                    wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                    src: IPv4Address | IPv6Address, dst: IPv4Address | IPv6Address,
                    wait: float) -> dict[str, Any]:
        return trace.trace_here(self.state.name, plan, sp, d, wanted, base, spec, src, dst,
                                wait)

    def watch(self, plan: Plan, node: str | None = None) -> dict[str, Any]:
        """The lab's one watcher; by default in the namespace of the first forwarding node
        on a chain's path."""
        sp = steering_of(plan)
        if node is None:
            fwd = {n.node for n in plan.namespaces if n.forwards}
            node = next((n for d in sp.directions for p in d.paths for n in p.nodes
                         if n in fwd), next(iter(sp.node_ids)))
        running = watcher.watcher_pid(self.state)
        pid = running or watcher.ensure_watcher(self.state, plan, node)
        return {"watcher": pid, "started": not running, "instances": watcher.instances(sp)}

    def health(self, chain: str | None, only: set[str] | None) -> dict[str, Any]:
        state = self.state
        try:
            health = json.loads((state.dir / "health.json").read_text())
        except (FileNotFoundError, ValueError):
            health = {}
        if only is not None:
            health = {i: h for i, h in health.items() if i in only}
        ev = record.events(state)
        if chain is not None:
            ev = [e for e in ev if e.get("chain") in (None, chain)]
        return {"watcher": watcher.watcher_pid(state), "instances": health, "events": ev[-50:]}

    def migrate(self, req: MigrateInstance, plan: Plan, own: Owner, m: Migration,
                t0: float) -> dict[str, Any]:
        return live_local_migrate.migrate(self.state, req, plan, own, m, t0)

    def refuse_emulated_join(self) -> None:
        return None  # emulated hosts join emulated hosts' underlay

    def refuse_machine_join(self, plan: Plan) -> None:
        raise _no_machines(self.state.name)

    def join_machine(self, plan: Plan, name: str, ssh: str, key: str | None,
                     port: int | None, cpus: int | None, memory: int | None,
                     agent_state: str | None) -> dict[str, Any]:
        raise _no_machines(self.state.name)


def _no_machines(lab: str) -> LabError:
    return LabError(f"lab '{lab}' runs on emulated hosts: its underlay is a network sfclab "
                    "made inside this machine, which no real machine can join, so --ssh is "
                    "refused; add an emulated host with --cpus N --memory SIZE")


def _unmake(state: LabState, merged: Plan, add: Addition) -> list[str]:
    """Take ``add``'s chain off the data plane and remove its nodes (tolerates halves; the
    caller holds the slot lock)."""
    errors: list[str] = []
    msp = steering_of(merged)
    try:
        dp = DataPlane(merged.lab)
    except Exception as e:
        dp = None
        errors.append(str(e))
    later = classified_later(state, add)
    if dp is not None:
        with dp:
            for d in add.directions:
                try:
                    tables.delete_classifiers(dp, msp, d, later.get(d.index))
                except Exception as e:
                    errors.append(f"classifiers of direction {d.index}: {e}")
            time.sleep(DRAIN_S)  # packets classified just before are on their way
            for d in add.directions:
                try:
                    tables.clear_direction(dp, d, msp)
                except Exception as e:
                    errors.append(f"direction {d.index}: {e}")
    # the labels go once the plan says which ones nobody else uses
    probe = Plan.from_dict(merged.to_dict())
    freed = withdraw(probe, add)
    if dp is not None:
        try:
            with DataPlane(merged.lab) as dp2:
                tables.delete_labels(dp2, freed)
        except Exception as e:
            errors.append(f"labels: {e}")
    return errors + wire.remove_nodes(state, merged, probe, add.nodes)


def _forget_nodes(state: LabState, add: Addition) -> None:
    """A refused addition's nodes leave no state behind: each one's folder in the lab's state
    (pids, the function's log) goes.  The nodes are the addition's own: the plan refused any
    name the lab already had, so no other node's folder is touched."""
    for n in add.nodes:
        d = state.node_dir(n.node)
        if d.parent == state.dir / "nodes" and d.is_dir() and not d.is_symlink():
            shutil.rmtree(d)
    record.rmdir_if_empty(state.dir / "nodes")
