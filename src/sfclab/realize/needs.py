"""What a host needs for its part of a lab, checked on that host before anything is made there.

A part (:func:`sfclab.plan.split.host_part`) needs the programs its functions run
(:meth:`~sfclab.functions.base.NetworkFunction.programs`) and pass their machine checks
(:meth:`~sfclab.functions.base.NetworkFunction.check`: an executable to run, a native tool
built ...), and what its hosted links' attach kinds run in the host context
(:attr:`~sfclab.hosts.attach.AttachKind.programs`, :meth:`~sfclab.hosts.attach.AttachKind.lacks`:
OVS for ``ovs``/``hybrid``, the shortbridge loader for ``shortbridge``), ``tc`` for shaped
links, and what its nodes' containers need (:func:`sfclab.spec.image.machine_check`: podman,
the image in the host's store, its command inside it, the limits and bind sources).  A host reached over SSH runs this in its agent's ``check``
(:mod:`sfclab.realize.agent`) with its own ``PATH``, so a missing tool is named with the host
before any host is sent its part.
"""

from __future__ import annotations

import shutil

from ..errors import SpecError
from ..hosts.attach import ATTACH_KINDS
from ..plan.model import Plan
from .functions import instantiate
from .state import LabState


def lacks(plan: Plan, state: LabState) -> list[str]:
    """What this machine lacks for ``plan`` (one phrase each, naming who needs it); empty:
    nothing."""
    wants: dict[str, list[str]] = {}  # program -> who needs it
    out: list[str] = []
    for node in sorted(plan.functions):
        f = instantiate(state, plan, node)
        for p in f.programs():
            wants.setdefault(p, []).append(f"{f.kind} node {node}")
        try:
            f.check()
        except SpecError as e:
            out.append(f"what {f.kind} node {node} needs: {e}")
    for hl in plan.host_links:
        kind = ATTACH_KINDS[hl.attach]
        for p in kind.programs:
            wants.setdefault(p, []).append(f"attach: {hl.attach} of link {hl.link}")
        out += [f"{x} (attach: {hl.attach} of link {hl.link})" for x in kind.lacks()]
        if hl.rate is not None:
            wants.setdefault("tc", []).append(f"the rate of link {hl.link}")
    out += _images(plan)
    missing = [f"the '{p}' program (for {', '.join(dict.fromkeys(who))})"
               for p, who in wants.items() if shutil.which(p) is None]
    return missing + list(dict.fromkeys(out))


def _images(plan: Plan) -> list[str]:
    """What this machine lacks for the containers of ``plan`` (each image read once)."""
    if not plan.containers:
        return []
    from ..plan.containers import image_of  # only parts with images
    from ..spec.image import machine_check

    out: list[str] = []
    checked: set[tuple[str, tuple[str, ...]]] = set()
    for c in plan.containers:
        try:
            machine_check(image_of(c), checked)
        except SpecError as e:
            out.append(f"what node {c.node}'s image needs: nodes.{c.node}.image.{e}")
    return out
