"""A node's container in the plan: its ``image`` (:mod:`sfclab.spec.image`) turned into a
:class:`~sfclab.plan.model.ContainerPlan` with the podman name it gets and the namespace it
joins (the node's own, which sfclab makes and owns); and a running lab's container carried
to a node ``chain add`` or ``migrate`` adds (:func:`for_node`, :func:`moved_to`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import asdict, replace
from typing import Any

from .model import ContainerPlan, Plan
from .names import container_name, netns_name

if TYPE_CHECKING:
    from ..spec.image import ImageSpec


def container_plan(lab: str, node: str, netns: str, image: ImageSpec) -> ContainerPlan:
    return ContainerPlan(
        node=node, name=container_name(lab, node), netns=netns, image=image.name,
        cmd=list(image.cmd or []), env=dict(image.env),
        binds=[[b.source, b.target, b.writable] for b in image.binds],
        cpus=image.cpus, memory=image.memory, caps=list(image.caps),
        privileged=image.privileged)


def image_of(c: ContainerPlan) -> ImageSpec:
    """The image part of container ``c`` as the spec's :class:`ImageSpec` again (what the
    machine's checks read: name, command, limits, binds)."""
    from ..spec.image import BindSpec, ImageSpec  # light start-up: only labs with images

    return ImageSpec(name=c.image, cmd=list(c.cmd) or None, cpus=c.cpus, memory=c.memory,
                     binds=[BindSpec(source=s, target=t, writable=bool(w))
                            for s, t, w in c.binds])


def for_node(lab: str, node: str, template: ContainerPlan) -> ContainerPlan:
    """``template`` (a container planned for no node yet, or another node's) as node
    ``node``'s of lab ``lab``: its podman name and namespace are that node's."""
    return replace(template, node=node, name=container_name(lab, node),
                   netns=netns_name(lab, node))


def moved_to(plan: Plan, node: str, clone: str) -> dict[str, Any] | None:
    """Node ``node``'s container (JSON form), if it has one, as node ``clone``'s: a migration's
    clone runs the same image with the same settings."""
    mine = next((c for c in plan.containers if c.node == node), None)
    return None if mine is None else asdict(for_node(plan.lab, clone, mine))
