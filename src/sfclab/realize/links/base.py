"""What link forms share: the base class and the stage-6 configuration of an interface."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...kernel import ethtool, netns
from ..step import step
from ..part import Part

if TYPE_CHECKING:
    from ...plan.model import InterfacePlan, Plan
    from ...spec.kinds import Locate
    from ...spec.lab import LinkSpec, NodeSpec
    from ..build import Builder


class LinkForm(Part):
    """A link form: chosen by :meth:`selects` in table order (the first that says yes)."""

    def selects(self, a: NodeSpec, b: NodeSpec, link: LinkSpec) -> bool:
        return True

    def check(self, link: LinkSpec, ends: tuple[NodeSpec, NodeSpec], at: Locate) -> None:
        pass

    def interfaces(self, plan: Plan) -> list[InterfacePlan]:
        """The plan's interfaces of this form."""
        return [i for i in plan.interfaces if i.role == self.name]


def configure_interface(b: Builder, i: InterfacePlan, *, set_mtu: bool, enslave: bool) -> None:
    """Offloads now (ioctl); alias, up, the address, the master when ``enslave`` (a Linux bridge
    in the same namespace) and the MTU when ``set_mtu`` (a device not created with it) into the
    stage-6 batch."""
    where = i.netns or "root"
    what = f"interface {where}/{i.name}"
    with step(what):
        index = b.interface_index(i, what)
        if i.offloads:
            if i.netns:
                with netns.entered(i.netns):
                    ethtool.set_offloads(i.name, i.offloads)
            else:
                ethtool.set_offloads(i.name, i.offloads)
    master = b.index[(i.netns, i.master)] if enslave and i.master and i.netns else None
    batch = b.batch(i.netns)
    batch.link(index, what, mtu=i.mtu if set_mtu else None, master=master,
               alias=i.alias if i.netns is not None else None)  # root ends: marked at birth
    for address in (i.address, i.address6):
        if address:
            batch.addr(index, address, f"address {address} on {where}/{i.name}")
