"""SRv6 and NSH chains across three hosts driven over SSH (issue 28, item 3), on the emulated
machines of :mod:`.sshd`: each host's agent writes its share of the chain (its nodes' labels,
and for NSH their (SPI, SI) entries); ``chain trace`` steps through the agents by the
encapsulation's own TTL (one step per SID, or per node for NSH), in chain order, each on the
host that owns it; classified traffic crosses the three hosts through both functions; ``down``
leaves nothing."""

from __future__ import annotations

import pytest

from sfclab.live.ops import chains
from sfclab.realize import lifecycle
from sfclab.realize.kinds import load_lab_dict

from .labtools import nothing_left
from .test_ssh_chains import chain_lab, machines, send  # noqa: F401 - machines: a fixture

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


@pytest.mark.parametrize("encap", ["srv6", "nsh"])
def test_an_encap_chain_across_three_ssh_hosts(machines, lab_name: str,  # noqa: F811
                                               encap: str) -> None:
    d = chain_lab(lab_name, machines)
    d["chains"]["web"]["encap"] = encap
    plan = lifecycle.up(load_lab_dict(d))
    try:
        assert plan.steering is not None
        assert {x.encap for x in plan.steering.directions} == {encap}
        t = chains.trace(lab_name, "web", wait=1.0)
        assert t["in_order"] and t["delivered"], t
        # src r1 | f1 | f2 dst: a step per SID, or per node (NSH: a function's node once)
        want = ["r1", "f1", "f2"] if encap == "nsh" else ["r1", "f1", "f1", "f2", "f2"]
        assert [h["seen_at"] for h in t["paths"][0]["hops"]] == want
        before = chains.inspect(lab_name)["chains"]["web"]
        assert send(plan, 7999, 40) == 40
        after = chains.inspect(lab_name)["chains"]["web"]
        for f in ("f1", "f2"):
            assert after["instances"][f]["proxy_in"] - before["instances"][f]["proxy_in"] >= 40
        assert after["encap"] == encap
    finally:
        rep = lifecycle.down(lab_name)
    assert rep.errors == [] and nothing_left(lab_name)
