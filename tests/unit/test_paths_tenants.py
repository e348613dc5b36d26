"""Paths in labs whose tenants have identical address plans: the next hop is the neighbour
owning the gateway, and a shared node's per-tenant device routes do not break the walk."""

from __future__ import annotations

from sfclab.plan.build import build_plan
from sfclab.plan.paths import hops
from sfclab.realize.kinds import load_lab_dict

LAB = {
    "name": "tp",
    "hosts": {"compute": {}, "external": {}},
    "tenants": {"t1": {"nodes": ["vm1", "router"]},
                "t2": {"nodes": ["vm2", "dpi", "router"]}},
    "nodes": {"vm1": {"kind": "host", "host": "compute"},
              "vm2": {"kind": "host", "host": "compute"},
              "dpi": {"kind": "router", "host": "compute"},
              "router": {"kind": "nat", "outside": "dst", "host": "compute"},
              "dst": {"kind": "host", "host": "external"}},
    "links": [{"endpoints": ["vm1", "router"], "attach": "hybrid"},
              {"endpoints": ["vm2", "dpi"], "attach": "hybrid"},
              {"endpoints": ["dpi", "router"]},
              {"endpoints": ["router", "dst"]}],
}


def test_identical_tenant_addresses_follow_each_tenants_own_neighbour():
    plan = build_plan(load_lab_dict(LAB, "t.yaml"))
    # the planner gave both tenants the same plan: vm1 and vm2 share an address, and so do
    # their gateways (router's and dpi's tenant-side interfaces)
    assert plan.address_of("vm1") == plan.address_of("vm2")
    assert any(not r.gateway for r in plan.routes)  # the shared node's per-tenant tables
    dst = plan.address_of("dst")
    assert hops(plan, "vm1", dst) == ["vm1", "router", "dst"]
    assert hops(plan, "vm2", dst) == ["vm2", "dpi", "router", "dst"]
