"""The underlay the controller plans a lab on: the subnet holding its Nodes' addresses is one a
lab file takes, however few Nodes there are (no cluster needed)."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from sfclab.realize.kinds import load_lab_text
from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime import kubernetes_controller as ctl
from sfclab.spec.hosts import UnderlaySpec


@pytest.mark.parametrize("addresses, subnet", [
    (["192.0.2.2"], "192.0.2.0/29"),          # one Node (a kubelet's own address)
    (["10.1.2.3", "10.1.2.4"], "10.1.2.0/29"),
    (["198.19.255.11", "198.19.255.13"], "198.19.255.8/29"),
    (["10.0.0.6", "10.0.0.9"], "10.0.0.0/28"),
])
def test_the_covering_subnet_is_one_a_lab_file_takes(addresses, subnet):
    got = ctl.covering([IPv4Address(a) for a in addresses])
    assert str(got) == subnet
    UnderlaySpec(subnet=got)  # not refused


def test_a_lab_on_one_node_is_planned_at_that_nodes_address():
    lab = load_lab_text("name: k1\nnodes: {a: {kind: host}, b: {kind: host}}\n"
                        "links: [{endpoints: [a, b]}]\n", "k1.yaml")
    placed = ctl.placed(lab, {kube.IMPLICIT_HOST: "n1"}, {"n1": "192.0.2.2"})
    assert str(placed.raw["underlay"]["subnet"]) == "192.0.2.0/29"
    parts, status, plan = ctl.part_plans(lab, {kube.IMPLICIT_HOST: "n1"}, {"n1": "192.0.2.2"})
    assert list(parts) == [kube.IMPLICIT_HOST] and status["tunnels"] == []
    # the whole plan, saved on this machine: its one host the Node, reached through its agent
    assert [(h.name, h.address.split("/")[0], h.emulated) for h in plan.hosts] == \
        [(kube.IMPLICIT_HOST, "192.0.2.2", False)]
