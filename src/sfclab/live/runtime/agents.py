"""The operations on a running lab of hosts each driven by its agent: what the ``ssh`` and
``kubernetes`` runtimes share (:class:`AgentLive`).  Each host's agent makes its share
(:mod:`.agent_chain`), journaled there; this machine plans and asks, through the realize
layer's :class:`~sfclab.realize.runtime.agents.AgentHosts` (a call is one SSH connection, or one
request to a Kubernetes Node's agent).

``chain add`` (:mod:`sfclab.live.ops.add` decides everything as for emulated hosts: placement
over the hosts' CPUs and memory, wiring, labels, tunnels, the merged plan, saved before
anything is made), each host asked with the merged plan and the addition:

0. ``container-check`` on each host that is to run an instance with a container (before
   anything is journaled: :meth:`AgentLive.image_problem`, :mod:`.agent_containers`): the image
   must be in *that host's* store;
1. ``chain-make`` on every host (a host that ``host add --ssh`` joined gets its empty part
   first), all hosts at once (one call and thread each): its instances (and their
   containers), tunnel ends, attach ends, fitted interfaces, MACs, programs -- each journaled
   there first;
2. ``chain-tables`` on every host: labels, paths and slots (nothing uses them yet);
3. ``chain-tables`` with classifiers on every host: only now does traffic enter the chain.

``chain rm`` (and a rollback) asks every host to take its share out: the classifier entries
on every host first (those ``chain classify`` added since too), a drain, then the tables,
nodes and tunnel ends on every host, collecting errors and going on past an unreachable host
(``down`` still reaches what it left, by the host's journal).

Health: failing an instance over within a second cannot wait for a round trip to this
machine, so the watcher of :mod:`sfclab.live.health.watch` runs *on* each host whose part
holds an instance of a chain or the ingress of a chain direction, started there by the host's
agent (``chain-watch``, :mod:`.agent_health`) in one of the lab's namespaces on that host:
journaled in the host's journal, ended by its PID by the host's ``down`` and by ``chain rm``
once the host holds neither.  It probes the instances placed on its host and rewrites the slot
tables of the directions whose ingress is on its host.  How it learns that *another* host is
lost is the runtime's (:meth:`AgentLive.watch_settings`): over SSH the watchers tell each other
over the underlay (:mod:`sfclab.live.health.peerwatch`: the lab's peers, UDP port and secret,
kept on this machine, given to every host's agent); on Kubernetes by the agents' Leases (each
Node's agent writes which hosts lost their agent:
:mod:`sfclab.realize.runtime.kubernetes_failover`).  Events are written in the record of the
host whose watcher saw them; :meth:`AgentLive.health` merges every host's record with this
machine's (``chain-added``, ``migrated``), each host's event tagged with ``host``.

``chain migrate``: :mod:`sfclab.live.runtime.agents_migrate`; ``chain trace``:
:mod:`sfclab.live.runtime.agents_trace`.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from functools import partial
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RealizeError, SpecError
from ...plan.chainadd import Addition, NewNode, withdraw
from ...plan.model import Plan
from ...plan.sfc import DirectionPlan, PathPlan, SteeringPlan
from ...plan.split import host_part
from ...realize.runtime.agents import AgentHosts
from ...realize.runtime.base import Progress
from . import agents_migrate, agents_trace
from .. import record
from ..chains.classify_maps import ORDER, Classify
from .base import DRAIN_S, LiveRuntime, classified_later

if TYPE_CHECKING:
    from ...plan.migration import Migration
    from ...realize.containers import ImageProblem
    from ...spec.sfc import ClassifierSpec
    from ..chains.moves import Owner
    from ..request import MigrateInstance

TIMEOUT_S = 300
#: seconds a host's watcher has to answer
WATCH_TIMEOUT_S = 60


def part_of(plan: Plan, host: str) -> Plan:
    """Host ``host``'s part of a lab's plan with added instances (the plan models an
    instance's tunnelled link as a veth: across hosts it is no veth of either part)."""
    whole = Plan.from_dict(plan.to_dict())
    where = {n: h.name for h in whole.hosts for n in h.nodes}
    whole.veths = [v for v in whole.veths if where.get(v.a.node) == where.get(v.b.node)]
    return host_part(whole, host)


class AgentLive(AgentHosts, LiveRuntime):
    """Hosts each driven by its agent, each making its share of a running lab's changes."""

    # --- chain add, chain rm ---------------------------------------------------------------
    def check_free(self, plan: Plan, merged: Plan, add: Addition, source: str) -> None:
        """Each ingress host's agent looks in its share's maps."""
        if not plan.steering:
            return None
        base = {"lab": self.state.name, "plan": merged.to_dict(), "addition": add.to_dict()}
        ts = self.targets()
        for got in self.each(ts, lambda t: self.call(t, "chain-check", base, timeout=TIMEOUT_S)):
            if got.get("taken"):
                raise SpecError(got["taken"]["message"], file=source,
                                place=got["taken"]["place"])

    def image_problem(self, nodes: list[NewNode]) -> tuple[str, ImageProblem] | None:
        """Each host an instance with a container is placed on checks those containers
        itself (its agent's ``container-check``, :mod:`.agent_containers`), all hosts at once;
        the first refusal, in the order of ``nodes``."""
        from ...realize.containers import ImageProblem

        wanted: dict[str, list[dict[str, Any]]] = {}
        for n in nodes:
            if n.container is not None:
                wanted.setdefault(n.host, []).append(n.container)
        if not wanted:
            return None
        ts = {h: t for h, t in self.targets().items() if h in wanted}
        got = self.each(ts, lambda t: self.call(t, "container-check",
                                           {"containers": wanted[t.host]}, timeout=TIMEOUT_S))
        problems = {(h, g["problem"]["node"]): ImageProblem(**g["problem"])
                    for h, g in zip(ts, got) if g.get("problem")}
        for n in nodes:
            if (n.host, n.node) in problems:
                return n.host, problems[(n.host, n.node)]
        return None

    def journal_chain(self, plan: Plan, add: Addition) -> None:
        return None  # each host's agent journals what it makes, there

    def make_chain(self, plan: Plan, merged: Plan, add: Addition, say: Progress) -> None:
        self.make_share(plan, merged, add, say)

    def make_share(self, plan: Plan, merged: Plan, add: Addition, say: Progress,
                   slots: bool = True) -> None:
        """Every host's share of ``add`` made by its agent (see the module's docstring);
        ``slots`` False: a migration's clone, whose paths wait for the switch (no slots, no
        classifiers)."""
        ts = self.targets()
        base: dict[str, Any] = {"lab": self.state.name, "plan": merged.to_dict(),
                                "addition": add.to_dict()}
        addresses = {h.name: h.address for h in merged.hosts}
        say(f"hosts {', '.join(ts)}: instances, tunnel ends, programs")
        made = self.each(ts, lambda t: self.call(t, "chain-make", {
            **base, "addresses": addresses, "part": part_of(plan, t.host).to_dict()},
            timeout=TIMEOUT_S))
        macs = {k: v for got in made for k, v in (got.get("macs") or {}).items()}
        say("tables")
        self.each(ts, lambda t: self.call(t, "chain-tables", {
            **base, "classifiers": False, "slots": slots, "macs": macs}, timeout=TIMEOUT_S))
        if not slots:
            return
        say("classifiers: traffic on")
        self.each(ts, lambda t: self.call(t, "chain-tables", {**base, "classifiers": True},
                                     timeout=TIMEOUT_S))

    def undo_chain(self, merged: Plan, add: Addition) -> None:
        self.unmake_share(merged, add, DRAIN_S)

    def remove_chain(self, plan: Plan, add: Addition) -> list[str]:
        return self.unmake_share(plan, add, DRAIN_S, later=classified_later(self.state, add))

    def unmake_share(self, merged: Plan, add: Addition, drain_s: float, *,
                     freed: list[int] | None = None, after: Plan | None = None,
                     clear: list[list[Any]] | None = None,
                     nsh_clear: list[list[str]] | None = None,
                     later: Mapping[int, Sequence[Mapping[str, Any]]] | None = None) -> list[str]:
        """Every host takes its share of ``add`` out; the errors (an unreachable host's too).
        ``freed``, ``after``: the labels to delete and the plan once it is gone (default: as
        ``chain rm`` has them); ``clear``: more path ranges (ingress, base, count) to clear;
        ``nsh_clear``: more ``sfc_nsh`` entries to delete, (node, key in hex), each by the host
        of its node (a migration's old paths);
        ``later``: the entries ``chain classify`` added to the chain since, by direction (each
        ingress's host deletes them with the chain's own)."""
        if after is None:
            after = Plan.from_dict(merged.to_dict())
            freed = withdraw(after, add)
        req = {"lab": self.state.name, "plan": merged.to_dict(), "after": after.to_dict(),
               "addition": add.to_dict(), "freed": list(freed or []), "drain": drain_s,
               "clear": clear or [], "nsh_clear": nsh_clear or [], "later": {str(k): v for k, v in (later or {}).items()}}

        def one(t: Any, phase: str) -> dict[str, Any] | RealizeError:
            try:
                return self.call(t, "chain-unmake", {**req, "phase": phase}, timeout=TIMEOUT_S)
            except RealizeError as e:  # unreachable: down reaches what it left later
                return e

        errors: list[str] = []
        ts = self.targets()
        # classifier entries out on every host, a drain, then the rest on every host
        for phase in ("classifiers", "rest"):
            for name, got in zip(ts, self.each(ts, partial(one, phase=phase))):
                if isinstance(got, RealizeError):
                    errors.append(str(got))
                    continue
                errors += [f"host {name}: {x}" for x in got.get("errors", [])]
            if phase == "classifiers":
                time.sleep(drain_s)  # packets classified just before are on their way
        return errors

    def classify(self, plan: Plan, sp: SteeringPlan, job: Classify) -> tuple[Path, int]:
        """The note saved first; each ingress's host writes its share all or nothing.  The
        note stays (status ``failed``) if a later host refuses, so what an earlier host wrote
        is still recorded for ``chain rm`` and ``down``."""
        note = record.save_classifiers(self.state, job.chain, job.source, job.data,
                                       len(job.rules), job.total, "writing")
        try:
            return note, self.write_rows(plan, job.by_dir, order=ORDER)
        except BaseException:
            record.update_classifiers(note, status="failed")
            raise

    def trace_paths(self, plan: Plan, sp: SteeringPlan, d: DirectionPlan,
                    wanted: list[PathPlan], base: int, spec: ClassifierSpec,
                    src: IPv4Address | IPv6Address, dst: IPv4Address | IPv6Address,
                    wait: float) -> dict[str, Any]:
        return agents_trace.trace_through_agents(self, plan, sp, d, wanted, base, spec, src, dst,
                                                 wait)

    # --- health ----------------------------------------------------------------------------
    def watch(self, plan: Plan, node: str | None = None) -> dict[str, Any]:
        """A watcher on every host holding a chain's ingress or instance (``node`` is not
        needed: each host's agent picks its own)."""
        got = self.start_watchers()
        return {"watcher": got["watchers"], "started": got["started"],
                "instances": got["instances"]}

    @abstractmethod
    def watch_settings(self, ts: dict[str, Any]) -> dict[str, Any]:
        """What every host's ``chain-watch`` is given for its watcher to learn of the other
        hosts (see the module): over SSH the lab's peers, port and secret; on Kubernetes
        nothing (the agents' Leases tell)."""

    def start_watchers(self) -> dict[str, Any]:
        """Every host's agent keeps what :meth:`watch_settings` gives and starts its watcher
        unless it runs or the host holds no ingress and no instance: ``watchers`` (host -> PID,
        hosts with one), ``started`` (whether one was started), ``instances`` (the instances
        some host's watcher probes), ``errors`` (hosts that could not start one: named, not
        raised, as what the command made stands)."""
        ts = self.targets()
        req = {"lab": self.state.name, **self.watch_settings(ts)}

        def one(t: Any) -> dict[str, Any]:
            try:
                return self.call(t, "chain-watch", req, timeout=WATCH_TIMEOUT_S)
            except RealizeError as e:
                return {"error": str(e)}

        got = self.each(ts, one)
        watchers = {h: g["watcher"] for h, g in zip(ts, got) if g.get("watcher")}
        return {"watchers": watchers, "started": any(g.get("started") for g in got),
                "instances": sorted({i for g in got for i in g.get("instances", [])}),
                "errors": [g["error"] for g in got if "error" in g]}

    def health(self, chain: str | None, only: set[str] | None) -> dict[str, Any]:
        """Each host's watcher (``watcher``: host -> PID), the instances some host's watcher
        probes (each with the ``host`` that probes it), and the events of every host's record
        and this machine's, in time order.  A host that does not answer is named in
        ``unreachable``."""
        ts = self.targets()

        def one(t: Any) -> dict[str, Any] | RealizeError:
            try:
                return self.call(t, "chain-health", {"lab": self.state.name}, timeout=WATCH_TIMEOUT_S)
            except RealizeError as e:
                return e

        watchers: dict[str, int] = {}
        health: dict[str, Any] = {}
        events = list(record.events(self.state))
        unreachable: dict[str, str] = {}
        for host, got in zip(ts, self.each(ts, one)):
            if isinstance(got, RealizeError):
                unreachable[host] = str(got)
                continue
            if got.get("watcher"):
                watchers[host] = got["watcher"]
            for i, h in got.get("instances", {}).items():
                health[i] = {**h, "host": host}
            events += [{**e, "host": host} for e in got.get("events", [])]
        if only is not None:
            health = {i: h for i, h in health.items() if i in only}
        if chain is not None:
            events = [e for e in events if e.get("chain") in (None, chain)]
        events.sort(key=lambda e: e.get("time", 0))
        out: dict[str, Any] = {"watcher": watchers, "instances": health,
                               "events": events[-50:]}
        if unreachable:
            out["unreachable"] = unreachable
        return out

    # --- chain migrate ---------------------------------------------------------------------
    def migrate(self, req: MigrateInstance, plan: Plan, own: Owner, m: Migration,
                t0: float) -> dict[str, Any]:
        return agents_migrate.migrate(self, req, plan, own, m, t0)
