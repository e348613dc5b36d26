"""Bringing a plan's function nodes to life and ending them.

Each function is rebuilt from the plan (kind + validated params) with a
:class:`~sfclab.functions.base.FunctionContext`, so ``down`` in a fresh process can stop what
an earlier ``up`` started.
"""

from __future__ import annotations

from ipaddress import IPv4Interface

from ..functions.base import FunctionContext, Interface, NetworkFunction
from ..plan.model import Plan
from .state import LabState


def context(state: LabState, plan: Plan, node: str) -> FunctionContext:
    ifaces = [Interface(i.name, i.peer, IPv4Interface(i.address) if i.address else None)
              for i in plan.interfaces_of(node)]
    routes = [{"dst": r.dst, "gateway": r.gateway, "dev": r.dev}
              for r in plan.routes if r.node == node]
    return FunctionContext(plan.lab, node, plan.netns_of(node), ifaces, state.node_dir(node),
                           routes)


def instantiate(state: LabState, plan: Plan, node: str) -> NetworkFunction | None:
    from ..functions import REGISTRY

    f = plan.functions[node]
    cls = REGISTRY.get(f["kind"])
    if cls is None:
        return None  # a plain router before the router module exists: forwarding only
    params = cls.Params.model_validate(f["params"])
    return cls(context(state, plan, node), params)


def start_all(state: LabState, plan: Plan) -> list[NetworkFunction]:
    started = []
    for node in plan.functions:
        fn = instantiate(state, plan, node)
        if fn is None:
            continue
        fn.configure()
        started.append(fn)
    for fn in started:
        fn.start()
    return started


def stop_all(state: LabState, plan: Plan) -> list[str]:
    errors = []
    for node in plan.functions:
        try:
            fn = instantiate(state, plan, node)
            if fn is not None:
                fn.stop()
        except Exception as e:  # a broken function must not keep the lab alive
            errors.append(f"function {node}: {e}")
    return errors
