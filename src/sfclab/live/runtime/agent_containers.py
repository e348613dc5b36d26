"""The agent's container verb (in the agent's one table, :mod:`.agent_verbs`): before ``chain
add`` or ``chain migrate`` places an instance with a container on a host driven over SSH, that
host's agent checks the container against the host itself, since the image must be in *its*
store (this machine's may lack it, or lack podman altogether).

- ``container-check`` ``{"containers": [CONTAINER, ...]}`` (each a
  :class:`~sfclab.plan.model.ContainerPlan` in JSON form): the first one this host cannot run,
  as ``{"problem": {"node", "key", "message"}}`` (``key``: under the node's ``image``), else
  ``{}``; the checks of ``up`` (:func:`sfclab.realize.containers.image_problem`).  Nothing is
  made.

The container itself is started by the host's ``chain-make`` (:mod:`.agent_chain`) with the
node it belongs to, journaled there first, and removed by ``chain-unmake`` or the host's
``down`` like any node's (:mod:`sfclab.realize.containers`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ...errors import LabError
from ...plan.model import ContainerPlan
from ...realize.containers import image_problem

#: containers one request may name (an added chain has at most this many instances per host)
MAX_CONTAINERS = 256


def check(req: dict[str, Any]) -> dict[str, Any]:
    raw = req.get("containers")
    if not isinstance(raw, list) or len(raw) > MAX_CONTAINERS:
        raise LabError(f"container-check: expected a list of at most {MAX_CONTAINERS} "
                       "containers")
    problem = image_problem([ContainerPlan(**c) for c in raw])
    return {} if problem is None else {"problem": asdict(problem)}


#: this module's verbs (every verb of the agent, in one table: :mod:`.agent_verbs`)
VERBS = {"container-check": check}
