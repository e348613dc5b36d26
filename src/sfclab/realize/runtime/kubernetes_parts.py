"""A lab's parts on a Kubernetes cluster as their agents report them: waited for and read.

Each ``LabPart``'s status is written by the agent of the Node it is placed on
(:mod:`.kubernetes_agent`): ``Building``, then ``Up`` or ``Failed`` (with the error) for the
generation it saw; ``Removed`` once ``down --kube`` (or the controller) asked for
``Removing``.  This module is the commands' reading of them (``up --kube``, ``down --kube``):

- :func:`wait_allocated`: the lab allocated by the controller (its Lab's status says where its
  hosts went), or refused by it (``Failed``: :class:`~sfclab.errors.SpecError` with its reason),
  or the time running out (no controller: :class:`~sfclab.errors.RealizeError`);
- :func:`wait_up`: every part ``Up`` at its generation (``up --kube``); a part ``Failed``, or
  the time running out, is :class:`~sfclab.errors.RealizeError` naming the parts not ready and
  why (their message, or no agent having reported);
- :func:`remove`: each of the lab's parts (its mark checked, :func:`.kubernetes.owned_part`)
  set ``Removing``, waited for until its agent reports ``Removed``, and only then the parts and
  the Lab deleted (``down --kube``; the controller, which sees the lab ``Removing``, may delete
  them first; a part the controller has not placed yet has no agent and
  nothing built: it is deleted at once); parts whose agent does not report in time are left on the
  cluster, named, for a later ``down --kube``;
- :func:`parts_of`: the parts with their statuses (``inspect --kube``, ``host ls --kube``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...errors import LabError, RealizeError, SpecError
from .kubernetes import LAB_LABEL, NAMESPACE, labs_path, owned_part, parts_path
from .kubernetes_api import KubeApi, NotFound

#: how often the parts' statuses are read while waiting (seconds)
POLL_SECONDS = 0.25


def parts_of(name: str, api: KubeApi) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Lab ``name``'s ``Lab`` (``None`` when gone) and the parts carrying its mark."""
    try:
        lab = api.get(labs_path(name))
        uid = lab["metadata"].get("uid")
    except NotFound:
        lab, uid = None, None
    parts = [p for p in api.items(parts_path(), f"{LAB_LABEL}={name}")
             if owned_part(p, name, uid)]
    return lab, parts


def phase(part: dict[str, Any]) -> str:
    """``part``'s phase as its agent reported it for its current generation."""
    status = part.get("status") or {}
    if status.get("phase") in ("Removing", "Removed"):
        return str(status["phase"])
    if status.get("observedGeneration") != part["metadata"].get("generation"):
        return "Pending"
    return str(status.get("phase") or "Pending")


def placed(part: dict[str, Any]) -> bool:
    """Whether the controller placed ``part`` on a Node (no agent has anything of it before)."""
    return bool((part.get("spec") or {}).get("node"))


def wait_allocated(api: KubeApi, name: str, timeout: float,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """Lab ``name`` as the controller allocated it (see the module)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            lab = api.get(labs_path(name))
        except NotFound:
            raise RealizeError(f"lab '{name}': its Lab was deleted while it waited for the "
                               "controller") from None
        status = lab.get("status") or {}
        if status.get("placement"):
            say(f"lab {name}: allocated by the controller: " + ", ".join(
                f"{x['host']} on {x['node']}" for x in status["placement"]))
            return lab
        if status.get("phase") in ("Failed", "Removing"):
            raise SpecError(f"lab '{name}' refused by the controller: "
                            f"{status.get('message') or status['phase']}")
        if time.monotonic() > deadline:
            raise RealizeError(f"lab '{name}': not allocated after {timeout:g} s: is the "
                               "controller (sfclab-controller) running? The lab stays on the "
                               f"cluster: run 'sfclab down --kube {name}'")
        time.sleep(POLL_SECONDS)


def _why(part: dict[str, Any]) -> str:
    status = part.get("status") or {}
    node = part["spec"].get("node")
    if not status.get("agent"):
        return f"{part['metadata']['name']} (on Node {node}: no agent has reported)"
    msg = status.get("message")
    return f"{part['metadata']['name']} (on Node {node}: {phase(part)}" + \
        (f": {msg})" if msg else ")")


def _wait(api: KubeApi, name: str, want: str, timeout: float,
          say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Poll lab ``name``'s parts until each is ``want`` (or one failed, or ``timeout``);
    each change of a part's phase is said once.  The parts not ``want``."""
    seen: dict[str, str] = {}
    where: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    while True:
        _, parts = parts_of(name, api)
        for p in parts:
            ph = phase(p)
            where[p["metadata"]["name"]] = p["spec"].get("node")
            if seen.get(p["metadata"]["name"]) != ph:
                seen[p["metadata"]["name"]] = ph
                say(f"part {p['metadata']['name']} on {p['spec'].get('node')}: {ph}")
        gone = set(seen) - {p["metadata"]["name"] for p in parts}
        for n in sorted(gone) if want == "Removed" else []:
            if seen[n] != "Removed":  # deleted by the controller once Removed
                seen[n] = "Removed"
                say(f"part {n} on {where[n]}: Removed (deleted by the controller)")
        left = [p for p in parts if phase(p) != want and (want == "Up" or placed(p))]
        if not left or time.monotonic() > deadline or \
                (want == "Up" and any(phase(p) == "Failed" for p in left)):
            return left
        time.sleep(POLL_SECONDS)


def wait_up(api: KubeApi, name: str, timeout: float, say: Callable[[str], None]) -> None:
    """Every part of lab ``name`` ``Up`` (see the module)."""
    left = _wait(api, name, "Up", timeout, say)
    if left:
        failed = any(phase(p) == "Failed" for p in left)
        raise RealizeError(f"lab '{name}': " + ("a part failed" if failed else
                           f"parts not ready after {timeout:g} s") + ": " +
                           "; ".join(_why(p) for p in left) +
                           f"; the lab stays on the cluster: run 'sfclab down --kube {name}'")


def remove(api: KubeApi, name: str, timeout: float,
           say: Callable[[str], None]) -> dict[str, Any]:
    """Lab ``name``'s parts removed by their agents, then its objects deleted (see the
    module); what was removed.  :class:`LabError` when the cluster has no such lab."""
    lab, parts = parts_of(name, api)
    if lab is None and not parts:
        raise LabError(f"no lab '{name}' on the cluster {api.config.server}")
    if lab is not None and (lab["metadata"].get("labels") or {}).get(LAB_LABEL) != name:
        raise LabError(f"Lab {NAMESPACE}/{name} does not carry sfclab's mark "
                       f"({LAB_LABEL}={name}): left alone")
    for p in parts:
        if phase(p) != "Removed" and placed(p):
            api.request("PATCH", parts_path(p["metadata"]["name"], "status"),
                        {"status": {"phase": "Removing"}},
                        content_type="application/merge-patch+json")
    left = _wait(api, name, "Removed", timeout, say)
    if left:
        raise RealizeError(f"lab '{name}': parts not removed after {timeout:g} s: " +
                           "; ".join(_why(p) for p in left) + f"; they stay on the cluster: "
                           f"run 'sfclab down --kube {name}' again once their agents run")
    from .kubernetes import down

    try:
        got = down(name, api)
    except LabError:  # the controller finished the removal first (the Lab was Removing)
        if parts_of(name, api) != (None, []):
            raise
        got = {"name": name, "lab": lab is not None, "parts": []}
    # each part removed by its agent, then deleted here or by the controller
    got["parts"] = sorted({*got["parts"], *(p["metadata"]["name"] for p in parts)})
    return got
