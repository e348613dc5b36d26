"""The caller's side of a request to a Node's agent (a ``LabRequest``): how a running lab on
Kubernetes is changed and read, verb by verb, as a lab on hosts driven over SSH is.

**Why a request object.**  A host driven over SSH runs one of the host agent's verbs per call
(:mod:`sfclab.live.runtime.agent_verbs`: the request as JSON on its input, the answer on its
output).  A Node of a cluster has no SSH for sfclab, and its agent talks to nobody but the API
server; so the call is an object: the caller creates a ``LabRequest``
(``deploy/kubernetes/12-crd-labrequest.yaml``) naming the lab, the host, the Node and the verb,
with the same JSON as ``input``; the agent of that Node, which watches the requests labelled
with its Node, runs the verb on its machine (:mod:`.kubernetes_answer`) and writes its answer
(``output``) or its one-line error in the request's status; the caller watches the request
until it is ``Done`` or ``Failed``, reads it and deletes it.  Everything else (who may ask,
the record of who asked) is the API server's: RBAC on ``labrequests``, the admission policy on
the agent's writes, the audit log.  The alternatives were a field of the ``LabPart`` (one
request at a time per host, and every answer rewriting an object that grows with the host's
share) or a Pod exec into the agent (a streaming connection through the API server that the
agent would need a Pod for, which the tests' emulated Nodes have not).

**Armed verbs** (``chain-switch``: both directions of a migration switched within a round trip
of each other) go in two phases as over SSH (:func:`sfclab.hosts.ssh.call_armed`): each request
is created ``armed``; its agent makes ready and answers ``Armed``; once every one has, the caller
sets ``go`` on all at once and each agent acts.  If one fails to arm, the others are deleted
unanswered and change nothing.

**Bounds and failures.**  A request larger than :data:`~.kubernetes.MAX_OBJECT` is refused
before it is sent (:class:`~sfclab.errors.LabError`, naming the verb and the host).  An agent
whose Lease has expired, or that does not answer within the call's time, is
:class:`AgentSilent` (a :class:`~sfclab.errors.RealizeError`: the callers that go on past an
unreachable SSH host go on past it too); its request is deleted.  A ``Failed`` answer is
:class:`~sfclab.hosts.ssh.AgentError` with the agent's line.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ...errors import LabError, RealizeError
from ...hosts.ssh import AgentError
from .kubernetes import GROUP_VERSION, LAB_LABEL, MANAGED, MAX_OBJECT, NAMESPACE, NODE_LABEL
from .kubernetes_api import ClusterRefused, ClusterUnreachable, Gone, KubeApi, NotFound, resource_path
from .kubernetes_lease import expired, lease_path

#: how often the caller looks whether the agent's Lease expired while it waits (seconds)
LOOK_SECONDS = 5
#: the phases an answered request ends in
ANSWERED = ("Done", "Failed")


class AgentSilent(RealizeError):
    """A Node's agent that did not answer a request: its Lease expired, or the time ran out."""


@dataclass(frozen=True)
class KubeTarget:
    """One host of a lab on Kubernetes as its requests reach it: its Node (whose agent
    answers), its part, and its underlay address (the Node's ``InternalIP``)."""

    host: str
    address: str
    node: str
    lab: str


def requests_path(name: str | None = None, sub: str | None = None) -> str:
    return resource_path(GROUP_VERSION, "labrequests", NAMESPACE, name, sub)


def request_object(t: KubeTarget, verb: str, req: dict[str, Any],
                   armed: bool = False) -> dict[str, Any]:
    """The ``LabRequest`` asking ``t``'s agent to run ``verb`` with ``req``;
    :class:`LabError` when it would be larger than an object may be."""
    obj = {"apiVersion": GROUP_VERSION, "kind": "LabRequest",
           "metadata": {"generateName": f"{t.lab}.{t.host}-", "namespace": NAMESPACE,
                        "labels": {**MANAGED, LAB_LABEL: t.lab, NODE_LABEL: t.node}},
           "spec": {"lab": t.lab, "host": t.host, "node": t.node, "verb": verb,
                    "input": json.dumps(req), "armed": armed}}
    size = len(json.dumps(obj))
    if size > MAX_OBJECT:
        raise LabError(f"the request {verb} to host {t.host} (Node {t.node}) would be {size} "
                       f"bytes, more than the {MAX_OBJECT} an object may have (etcd): the lab's "
                       "plan is too large for a lab on Kubernetes")
    return obj


def _lease_expired(api: KubeApi, node: str) -> bool:


    try:
        return expired(api.get(lease_path(node)))
    except NotFound:
        return True


def _until(api: KubeApi, t: KubeTarget, name: str, rv: str, phases: tuple[str, ...],
           timeout: float) -> dict[str, Any]:
    """Watch request ``name`` (from version ``rv``) until its phase is one of ``phases``; the
    request.  :class:`AgentSilent` when its agent's Lease expires or ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    fields = f"metadata.name={name}"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AgentSilent(f"host {t.host}: the agent of Node {t.node} did not answer "
                              f"within {timeout:g} s")
        try:
            for kind, obj in api.watch(requests_path(), rv, fields=fields,
                                       seconds=max(1, min(LOOK_SECONDS, int(left + 1)))):
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if kind == "DELETED":
                    raise AgentSilent(f"host {t.host}: the request to Node {t.node} was "
                                      "deleted before it was answered")
                if kind != "BOOKMARK" and (obj.get("status") or {}).get("phase") in phases:
                    return obj
        except (Gone, ClusterUnreachable):
            got = api.get(requests_path(name))  # read once, then watch from its version
            if (got.get("status") or {}).get("phase") in phases:
                return got
            rv = got["metadata"]["resourceVersion"]
        if _lease_expired(api, t.node):
            raise AgentSilent(f"host {t.host}: the agent of Node {t.node} holds no live Lease "
                              "(not running, or cut off from the cluster)")


def _answer(t: KubeTarget, verb: str, obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    if status.get("phase") == "Failed":
        raise AgentError(f"host {t.host}: agent {verb} failed (Node {t.node}): "
                         f"{status.get('error') or 'no message'}")
    try:
        answer = json.loads(status.get("output") or "")
    except ValueError:
        raise AgentError(f"host {t.host}: agent {verb} answered no JSON: "
                         f"{str(status.get('output'))[:200]!r}") from None
    if not isinstance(answer, dict):
        raise AgentError(f"host {t.host}: agent {verb} answered {type(answer).__name__}")
    return answer


def _delete(api: KubeApi, name: str) -> None:
    try:
        api.delete(requests_path(name))
    except (ClusterRefused, ClusterUnreachable):
        pass  # the controller deletes what is left (:mod:`.kubernetes_controller`)


def call(api: KubeApi, t: KubeTarget, verb: str, req: dict[str, Any], *,
         timeout: float = 120) -> dict[str, Any]:
    """Agent ``verb`` with ``req`` on host ``t`` (its Node's agent); its JSON answer (see the
    module)."""
    made = api.create(requests_path(), request_object(t, verb, req))
    name = made["metadata"]["name"]
    try:
        done = _until(api, t, name, made["metadata"]["resourceVersion"], ANSWERED, timeout)
    finally:
        _delete(api, name)
    return _answer(t, verb, done)


def call_armed(api: KubeApi, ts: dict[str, KubeTarget], verb: str, req: dict[str, Any], *,
               timeout: float = 120) -> tuple[dict[str, dict[str, Any]], float]:
    """Armed verb ``verb`` on every host of ``ts`` (see the module): the answers by host, and
    the seconds from ``go`` to the last answer seen."""
    if not ts:
        return {}, 0.0
    made: dict[str, dict[str, Any]] = {}
    try:
        for h, t in ts.items():
            made[h] = api.create(requests_path(), request_object(t, verb, req, armed=True))
        with ThreadPoolExecutor(max_workers=len(ts)) as ex:
            armed = {h: ex.submit(_until, api, ts[h], m["metadata"]["name"],
                                  m["metadata"]["resourceVersion"], ("Armed",) + ANSWERED,
                                  timeout) for h, m in made.items()}
            wait(armed.values())
            for h, f in armed.items():
                got = f.result()
                if got["status"]["phase"] != "Armed":
                    _answer(ts[h], verb, got)  # raises its failure
                    raise AgentError(f"host {h}: agent {verb} answered before it was armed")
            t_go = time.perf_counter()
            gone = [ex.submit(api.merge, requests_path(m["metadata"]["name"]),
                              {"spec": {"go": True}}) for m in made.values()]
            wait(gone)
            for f in gone:
                f.result()
            done = {h: ex.submit(_until, api, ts[h], m["metadata"]["name"],
                                 armed[h].result()["metadata"]["resourceVersion"], ANSWERED,
                                 timeout) for h, m in made.items()}
            wait(done.values())
            answers = {h: _answer(ts[h], verb, f.result()) for h, f in done.items()}
        return answers, time.perf_counter() - t_go
    finally:
        for m in made.values():  # unanswered ones deleted: their agents change nothing
            _delete(api, m["metadata"]["name"])
