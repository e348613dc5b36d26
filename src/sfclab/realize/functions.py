"""A plan's function nodes as objects (see :mod:`sfclab.realize.nodes.function` for their
stages).

Each function is rebuilt from the plan (kind + validated params) with a
:class:`~sfclab.functions.base.FunctionContext`, so ``down`` in a fresh process can stop what
an earlier ``up`` started.
"""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv6Interface
from typing import TYPE_CHECKING

from ..functions import get
from ..plan.model import Plan
from .state import LabState
from .steering import maps_dir

if TYPE_CHECKING:
    from ..functions.base import FunctionContext, NetworkFunction


def context(state: LabState, plan: Plan, node: str) -> FunctionContext:
    from ..functions.base import FunctionContext, Interface  # light start-up: pydantic (the
    # functions' models) only once a function is needed, as sfclab.functions.get

    ifaces = [Interface(i.name, i.peer, IPv4Interface(i.address) if i.address else None,
                        IPv6Interface(i.address6) if i.address6 else None)
              for i in plan.interfaces_of(node)]
    routes = [{"dst": r.dst, "gateway": r.gateway, "dev": r.dev}
              for r in plan.routes if r.node == node]
    host = plan.host_of(node)
    image = next((c.image for c in plan.containers if c.node == node), None)
    sp = plan.steering
    node_id = sp.node_ids.get(node) if sp else None
    maps = maps_dir(plan) if node_id is not None else None
    return FunctionContext(plan.lab, node, plan.netns_of(node), ifaces, state.node_dir(node),
                           routes, host.cgroup if host else None, image, node_id, maps,
                           plan.families)


def instantiate(state: LabState, plan: Plan, node: str) -> NetworkFunction:
    """The function of ``node``, rebuilt from the plan (kind and validated keys)."""
    f = plan.functions[node]
    cls = get(f.kind)
    return cls(context(state, plan, node), cls.Params.model_validate(f.params))
