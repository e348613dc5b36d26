"""A node's container in the plan: its ``image`` (:mod:`sfclab.spec.image`) turned into a
:class:`~sfclab.plan.model.ContainerPlan` with the podman name it gets and the namespace it
joins (the node's own, which sfclab makes and owns)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import ContainerPlan
from .names import container_name

if TYPE_CHECKING:
    from ..spec.image import ImageSpec


def container_plan(lab: str, node: str, netns: str, image: ImageSpec) -> ContainerPlan:
    return ContainerPlan(
        node=node, name=container_name(lab, node), netns=netns, image=image.name,
        cmd=list(image.cmd or []), env=dict(image.env),
        binds=[[b.source, b.target, b.writable] for b in image.binds],
        cpus=image.cpus, memory=image.memory, caps=list(image.caps),
        privileged=image.privileged)
