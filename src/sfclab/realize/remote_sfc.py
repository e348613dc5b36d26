"""This machine's side of the chains' data plane of a lab on hosts driven over SSH.

Each host holds its share (:mod:`sfclab.plan.sfc_hosts`); this machine reads and changes it
through the hosts' agents (:mod:`sfclab.realize.agent_sfc`): :class:`Snapshot` merges every
host's counters (a node's on its host, a path's on its ingress's host) into what a local
:class:`~sfclab.realize.dataplane.DataPlane` answers, :func:`classify` sends each ingress
host its classifier entries, :func:`probe` runs one ``chain trace`` step at the ingress.
"""

from __future__ import annotations

from typing import Any, Self

from ..errors import LabError
from ..hosts.ssh import SshTarget, call
from ..plan.model import Plan
from ..plan.classifier_rows import Row
from . import remote
from .state import LabState


def is_remote(state: LabState) -> bool:
    """The lab's parts are on hosts driven over SSH."""
    return bool(remote.journaled(state))


def targets(state: LabState) -> dict[str, SshTarget]:
    return {e["host"]: SshTarget.from_dict(e["target"]) for e in remote.journaled(state)}


class Snapshot:
    """Every host's counters, read once (all hosts at once): ``counters(node_id)`` and
    ``path_count(index)`` as :class:`~sfclab.realize.dataplane.DataPlane` has them."""

    def __init__(self, state: LabState, node_ids: dict[str, int]):
        ts = targets(state)
        got = remote._each(ts, lambda t: call(t, "sfc-read", {"lab": state.name}))
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


def classify(state: LabState, plan: Plan, by_dir: dict[int, list[Row]], order: int) -> int:
    """Each ingress node's entries written by its host's agent; the number written."""
    ts = targets(state)
    per_host: dict[str, dict[str, list[Row]]] = {}
    for di, rows in by_dir.items():
        for r in rows:
            per_host.setdefault(_host_of(plan, r[0]), {}).setdefault(str(di), []).append(r)
    written = 0
    for host, rows_of in per_host.items():
        got = call(ts[host], "sfc-classify", {"lab": state.name, "rows": rows_of,
                                             "order": order})
        written += int(got["entries"])
    return written


def probe(state: LabState, plan: Plan, request: dict[str, Any]) -> None:
    """One trace step (``sfc-probe``) at the host of ingress node ``request['node']``."""
    ts = targets(state)
    call(ts[_host_of(plan, str(request["node"]))], "sfc-probe",
         {"lab": state.name, **request})
