"""The forwarder only where labelled frames arrive (sfclab.plan.arrivals), in both planners: a
lab file's chains (plan.sfc) and a chain added to a running lab (plan.chainadd).  The egress
receives plain IP: no forwarder there; fed by XDP redirect it gets GRO on (NAPI) unless the lab
file keeps GRO off, then the forwarder keeps NAPI on; fed by a kernel function's proxy (tc) it
gets nothing."""

from __future__ import annotations

import json

from sfclab.plan.chainadd import Instance, plan_addition
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import plan_for
from sfclab.spec.chainfile import parse
from sfclab.spec.source import Document

CHAIN = {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
         "functions": ["f"], "egress": "dst"}


def lab(order: list[str], dst_end: dict | None = None) -> dict:
    """src - ... - dst in ``order``; ``f`` a firewall, ``rN`` routers."""
    kinds = {"src": "host", "dst": "host", "f": "firewall"}
    links = [{"endpoints": [a, b]} for a, b in zip(order, order[1:])]
    if dst_end is not None:
        links[-1] = {"endpoints": [order[-2], {"node": "dst", **dst_end}]}
    return {"name": "a1", "nodes": {n: {"kind": kinds.get(n, "router")} for n in order},
            "links": links, "chains": {"c": dict(CHAIN)}}


def xdp(plan, node: str) -> list[str]:
    return [i for p, i, h in plan.steering.attach.get(node, []) if h == "xdp"]


def gro(plan, node: str) -> bool | None:
    return plan.interfaces_of(node)[0].offloads.get("gro")


def test_the_forwarder_runs_where_labels_arrive_and_not_at_the_egress() -> None:
    """The hops bench's shape: src - r1 - r2 - f - dst.  Each router and f receive labels on
    their interface toward src only; dst gets plain IPv4 from f's proxy (tc): no program, and
    GRO left as it is."""
    p = plan_for(load_lab_dict(lab(["src", "r1", "r2", "f", "dst"])))
    assert xdp(p, "r1") == ["eth0"] and xdp(p, "r2") == ["eth0"] and xdp(p, "f") == ["eth0"]
    assert xdp(p, "dst") == [] and xdp(p, "src") == []
    assert gro(p, "dst") is None
    # the function's proxy stays on both its interfaces (it sends out of eth1)
    assert ("sfc_proxy_out", "eth1", "tcx-egress") in p.steering.attach["f"]


def test_an_egress_fed_by_xdp_redirect_gets_gro_on_in_place_of_the_forwarder() -> None:
    """src - r1 - f - r2 - dst: r2 pops the last label in XDP and redirects into dst's veth,
    which needs NAPI: GRO on there, no program."""
    p = plan_for(load_lab_dict(lab(["src", "r1", "f", "r2", "dst"])))
    assert xdp(p, "r2") == ["eth0"]
    assert xdp(p, "dst") == [] and gro(p, "dst") is True


def test_an_egress_that_keeps_gro_off_keeps_the_forwarder() -> None:
    """The lab file wins: GRO off on dst's end, so the forwarder's XDP program runs NAPI."""
    p = plan_for(load_lab_dict(lab(["src", "r1", "f", "r2", "dst"], {"gro": False})))
    assert xdp(p, "dst") == ["eth0"] and gro(p, "dst") is False


def test_a_symmetric_chain_forwards_both_ways_and_each_end_receives_plain() -> None:
    d = lab(["src", "r1", "f", "r2", "dst"])
    d["chains"]["c"]["symmetric"] = True
    p = plan_for(load_lab_dict(d))
    assert xdp(p, "r1") == ["eth0", "eth1"] and xdp(p, "r2") == ["eth0", "eth1"]
    assert xdp(p, "src") == [] and xdp(p, "dst") == []
    assert gro(p, "src") is True and gro(p, "dst") is True


def test_chain_add_agrees() -> None:
    """A chain added to src - r1 - dst (no chain yet) hangs its function off r1: r1 receives
    labels from src and from the function, and pops the last label into dst by XDP: dst gets
    GRO on and no forwarder."""
    base = {"name": "a2", "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                                    "dst": {"kind": "host"}},
            "links": [{"endpoints": ["src", "r1"]}, {"endpoints": ["r1", "dst"]}]}
    plan = plan_for(load_lab_dict(base))
    chain = parse(Document(json.dumps({"name": "v", **CHAIN, "functions": [
        {"name": "fw", "kind": "firewall", "rules": []}]}), "chain.json"))
    add = plan_addition(plan, None, chain, [Instance("fw-1", "fw", "firewall", {}, 0.1,
                                                     16 << 20)], "chain.json")
    progs = {n: [(p, i) for p, i, h in a if h == "xdp"] for n, a in add.attach_progs.items()}
    assert progs["r1"] == [("sfc_forward", "eth0"), ("sfc_forward", "sfx0")]
    assert "dst" not in add.attach_progs
    assert ("dst", "eth0", {"tx-checksum": False, "gro": True}) in add.offloads
    assert not any(n == "r1" and "gro" in o for n, _, o in add.offloads)
