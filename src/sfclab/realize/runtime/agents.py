"""Hosts each driven by its agent: what the ``ssh`` and ``kubernetes`` runtimes share.

On both, this machine makes nothing of the lab: each host's agent runs the host agent's verbs
(:mod:`sfclab.live.runtime.agent_verbs`) on its own part, journaled there.  The two differ only
in how a verb reaches a host, which each implements (:meth:`AgentHosts.targets`,
:meth:`AgentHosts.call`, :meth:`AgentHosts.call_armed`):

- ``ssh`` (:mod:`.ssh`): one SSH connection per call, the request on the agent's input;
- ``kubernetes`` (:mod:`.kubernetes_runtime`): one ``LabRequest`` per call, answered by the
  agent of the host's Node (:mod:`.kubernetes_requests`).

Everything above that is written once, here and in :mod:`sfclab.live.runtime.agents`: the
chains' data plane as every host's share merged (:class:`Snapshot`: a node's counters on its
host, a path's on its ingress's host), classifier entries written by each ingress's host
(:meth:`AgentHosts.write_rows`), one ``chain trace`` step at the ingress
(:meth:`AgentHosts.probe`), a long-running program in a node's namespace there
(:meth:`AgentHosts.spawn`: :class:`~.process.AgentProcess`) and programs started together
and held as one there (:meth:`AgentHosts.spawn_all`: :class:`~.process.AgentPrograms`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Protocol, Self

from ...errors import LabError
from ...plan.model import Plan
from .base import HostRuntime
from .process import AgentProcess, AgentPrograms

if TYPE_CHECKING:
    from ...plan.classifier_rows import Row

#: seconds a call waits for its agent unless told otherwise
CALL_TIMEOUT_S = 120.0


class Target(Protocol):
    """One host as its agent is reached: its name and its underlay address."""

    @property
    def host(self) -> str: ...

    @property
    def address(self) -> str: ...


class AgentHosts(HostRuntime):
    """A lab whose hosts are each driven by its agent (see the module)."""

    @abstractmethod
    def targets(self) -> dict[str, Any]:
        """Each host of the lab as its agent is reached (a :class:`Target`), by name."""

    @abstractmethod
    def call(self, t: Any, verb: str, request: dict[str, Any], *,
             timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        """Agent ``verb`` with ``request`` on host ``t``; its JSON answer
        (:class:`~sfclab.errors.RealizeError` when the host is not reached or fails)."""

    @abstractmethod
    def call_armed(self, ts: dict[str, Any], verb: str, request: dict[str, Any], *,
                   timeout: float = CALL_TIMEOUT_S) -> tuple[dict[str, dict[str, Any]], float]:
        """Armed verb ``verb`` on every host of ``ts`` (:func:`sfclab.hosts.ssh.call_armed`:
        all make ready, then all act): the answers by host, and the seconds from ``go`` to the
        last answer."""

    def each(self, ts: dict[str, Any], fn: Callable[[Any], Any]) -> list[Any]:
        """``fn`` on every host of ``ts`` at once (one thread each); the results in host
        order, or the first host's failure once all have answered."""
        with ThreadPoolExecutor(max_workers=max(1, len(ts))) as ex:
            futures = [ex.submit(fn, t) for t in ts.values()]
            wait(futures)
        return [f.result() for f in futures]

    def target(self, host: str | None) -> Any:
        t = self.targets().get(host or "")
        if t is None:
            raise LabError(f"lab '{self.state.name}' has no host {host!r} reached by its agent")
        return t

    # --- programs in a node's namespace ----------------------------------------------------
    def spawn(self, host: str | None, ns: str, argv: list[str]) -> AgentProcess:
        t = self.target(host)
        return AgentProcess(lambda verb, req, timeout: self.call(t, verb, req, timeout=timeout),
                            self.state.name, ns, argv)

    def spawn_all(self, host: str | None, ns: str, argvs: list[list[str]], *,
                  listen: list[int] | None = None, timeout: float = 5.0) -> AgentPrograms:
        t = self.target(host)
        return AgentPrograms(lambda verb, req, wait: self.call(t, verb, req, timeout=wait),
                             self.state.name, ns, argvs, listen, timeout)

    def tools(self, host: str | None) -> dict[str, Any]:
        return self.call(self.target(host), "tools", {}, timeout=60)

    # --- the chains' data plane ------------------------------------------------------------
    def data_plane(self, node_ids: dict[str, int]) -> Snapshot:
        return Snapshot(self, node_ids)

    def write_rows(self, plan: Plan, by_dir: dict[int, list[Row]], order: int) -> int:
        """Each ingress node's entries written by its host's agent; the number written."""
        ts = self.targets()
        per_host: dict[str, dict[str, list[Row]]] = {}
        for di, rows in by_dir.items():
            for r in rows:
                per_host.setdefault(_host_of(plan, r[0]), {}).setdefault(str(di), []).append(r)
        written = 0
        for host, rows_of in per_host.items():
            got = self.call(ts[host], "sfc-classify", {"lab": self.state.name, "rows": rows_of,
                                                       "order": order})
            written += int(got["entries"])
        return written

    def probe(self, plan: Plan, request: dict[str, Any]) -> None:
        """One trace step (``sfc-probe``) at the host of ingress node ``request['node']``."""
        ts = self.targets()
        self.call(ts[_host_of(plan, str(request["node"]))], "sfc-probe",
                  {"lab": self.state.name, **request})


class Snapshot:
    """Every host's counters, read once (all hosts at once): ``counters(node_id)`` and
    ``path_count(index)`` as :class:`~sfclab.realize.dataplane.DataPlane` has them."""

    def __init__(self, rt: AgentHosts, node_ids: dict[str, int]):
        ts = rt.targets()
        got = rt.each(ts, lambda t: rt.call(t, "sfc-read", {"lab": rt.state.name}))
        by_node: dict[str, dict[str, int]] = {}
        self.paths: dict[int, int] = {}
        for g in got:
            by_node.update(g["counters"])
            for k, v in g["paths"].items():
                self.paths[int(k)] = self.paths.get(int(k), 0) + int(v)
        self.by_id = {i: by_node.get(n) for n, i in node_ids.items()}

    def counters(self, node_id: int) -> dict[str, int]:
        got = self.by_id.get(node_id)
        if got is None:
            raise LabError(f"no host answered for chain node {node_id}")
        return got

    def path_count(self, index: int) -> int:
        return self.paths.get(index, 0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _host_of(plan: Plan, node: str) -> str:
    h = plan.host_of(node)
    if h is None:
        raise LabError(f"node {node} is on no host")
    return h.name
