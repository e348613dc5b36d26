"""Packet rates in a tenant lab whose tenants have identical address plans: one sender per
tenant at once, through a NAT router both tenants share (the OpenStack study's shape).  Before
plan.paths knew that an address may belong to several nodes, the measurement failed before
sending (AddressValueError on the shared router's per-tenant device routes)."""

from __future__ import annotations

from sfclab.spec import measurement
from sfclab.traffic import measure

SHARED_ROUTER = {
    "tenants": {"t1": {"nodes": ["vm1", "router"]}, "t2": {"nodes": ["vm2", "router"]}},
    "nodes": {"vm1": {"kind": "host"}, "vm2": {"kind": "host"},
              "router": {"kind": "nat", "outside": "dst"}, "dst": {"kind": "host"}},
    "links": [{"endpoints": ["vm1", "router"]}, {"endpoints": ["vm2", "router"]},
              {"endpoints": ["router", "dst"]}],
}


def test_each_tenant_sends_through_the_shared_router(running_lab, lab_name):
    lab = running_lab({"name": lab_name, **SHARED_ROUTER})
    assert lab.address("vm1") == lab.address("vm2")  # identical tenant plans
    r = measurement.validate({"type": "rate", "pairs": ["vm1:dst", "vm2:dst"],
                              "rates": [2000], "duration": 1})
    m = measure.rate(lab_name, r).to_dict()
    pairs = m["points"][0]["pairs"]
    assert [p["pair"] for p in pairs] == ["vm1:dst", "vm2:dst"]
    for p in pairs:  # both tenants' packets arrived (a little loss allowed on a busy machine)
        # sent: the measured window's probes (2000 pps over the 0.5 s after the ramp); a sender
        # the machine held below that says so on its row (CI: 930, "generator sent 1,862 of
        # 2,000 pps offered"), and still sent most of them
        assert p["sent"] >= 950 or (p["generator_limited"] and p["measurement_limited"]), p
        assert p["sent"] >= 500 and p["received"] >= 0.9 * p["sent"], p
    assert [e["path"] for e in m["params"]["pairs"]] == [["vm1", "router", "dst"],
                                                         ["vm2", "router", "dst"]]
