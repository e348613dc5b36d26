"""The agent's verbs that move connection-tracking state between hosts driven over SSH
(``chain migrate``'s state step, :mod:`sfclab.live.runtime.agents_migrate`).

The two halves of :func:`sfclab.live.chains.conntrack.copy`, each run by the agent of the host that
holds the namespace (one parser and one ``conntrack -I`` builder,
:mod:`sfclab.live.chains.conntrack`):

- ``conntrack-list`` ``{"lab", "node"}``: ``conntrack -L`` in the namespace of ``node``, a
  node of the host's part; answers ``{"text", "errors"}``, the listing as ``conntrack``
  printed it; the instance is being handed over, so it first tolerates mid-stream TCP
  packets (:func:`sfclab.live.chains.conntrack.tolerate_midstream`; ``errors``: that failed);
- ``conntrack-make`` ``{"lab", "node", "text", "skip"}``: the entries of ``text`` (a
  ``conntrack-list`` answer of another host) made in ``node``'s namespace, those whose key is
  in ``skip`` (lists of the key's fields) left out; answers ``{"made", "seen", "errors"}``
  (``seen``: the keys of every entry read, for a second pass to skip); ``node`` tolerates
  mid-stream TCP packets first, as the old instance does.
"""

from __future__ import annotations

import shutil
from typing import Any

from ...errors import LabError
from ...plan.model import Plan
from ...plan.sfc_hosts import remote_host
from ...realize.state import LabState
from ..chains import conntrack


def _netns(req: dict[str, Any]) -> str:
    """The namespace of ``req['node']``, a node of this host's part of ``req['lab']``."""
    lab, node = str(req["lab"]), str(req["node"])
    d = LabState(lab).plan()
    if d is None:
        raise LabError(f"lab '{lab}' has no part on this host")
    part = Plan.from_dict(d)
    host = remote_host(part)
    if host is None or node not in host.nodes:
        raise LabError(f"node {node} of lab '{lab}' is not placed on this host")
    if shutil.which("conntrack") is None:
        raise LabError("this host lacks the conntrack program (Debian package conntrack): "
                       "connection-tracking state cannot move")
    return part.netns_of(node)


def listing(req: dict[str, Any]) -> dict[str, Any]:
    ns = _netns(req)
    errors = conntrack.tolerate_midstream(ns)
    return {"text": conntrack.listing(ns), "errors": errors}


def make(req: dict[str, Any]) -> dict[str, Any]:
    ns = _netns(req)
    skip = {tuple(str(x) for x in k) for k in req.get("skip", [])}
    errors = conntrack.tolerate_midstream(ns)
    made, seen, more = conntrack.make(ns, conntrack.parse(str(req["text"])), skip)
    errors += more
    return {"made": made, "seen": sorted(list(k) for k in seen), "errors": errors}


VERBS = {"conntrack-list": listing, "conntrack-make": make}
