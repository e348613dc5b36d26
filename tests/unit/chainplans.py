"""Plans of small chained labs shared by the unit tests (pure: no root, no kernel).

:func:`line_chain_plan` is the lab both the health watcher's scope and the split of the
chains' data plane over hosts are tested on: ``src - r1 - f1 - f2 - dst`` in a line, chain
``web`` classifying UDP to 7999 at ``src`` through firewalls ``f1`` then ``f2`` to ``dst``,
each node on the host the caller names."""

from __future__ import annotations

from sfclab.plan.build import build_plan
from sfclab.plan.model import Plan
from sfclab.realize.kinds import load_lab_dict

KINDS = {"src": {"kind": "host"}, "r1": {"kind": "router"},
         "f1": {"kind": "firewall", "rules": []}, "f2": {"kind": "firewall", "rules": []},
         "dst": {"kind": "host"}}


def line_chain_plan(on: dict[str, str]) -> Plan:
    """The line lab with node ``n`` on host ``on[n]`` (its hosts: those named, in order of
    first mention), planned for CPUs 0 and 1."""
    hosts = {h: {} for h in on.values()}
    lab = {"name": "c", "hosts": hosts,
           "nodes": {n: {**k, "host": on[n]} for n, k in KINDS.items()},
           "links": [{"endpoints": [a, b]} for a, b in zip(KINDS, list(KINDS)[1:])],
           "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "udp",
                                               "dport": 7999}],
                              "functions": ["f1", "f2"], "egress": "dst"}}}
    plan = build_plan(load_lab_dict(lab, "lab.yaml"), cpus=[0, 1])
    assert plan.steering is not None
    return plan
