"""The lab of the web tests: two chains (web over a weighted pool of two firewalls and a NAT;
dns over one firewall) and, off the chains' classifiers (TCP 80-8080, UDP 53), a 5 Mbit/s
shaper before ``dst`` that drops most of a 40 kpps stream of 64-byte frames."""

from __future__ import annotations

from typing import Any


def web_lab(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"},
                  "fw1": {"kind": "firewall", "rules": []},
                  "fw2": {"kind": "firewall", "rules": []}, "r2": {"kind": "router"},
                  "nat": {"kind": "nat", "outside": "sh"},
                  "sh": {"kind": "shaper", "rate": "5mbit", "discipline": "htb",
                         "toward": "dst"},
                  "dst": {"kind": "host"}},
        "links": [{"endpoints": list(e)} for e in (
            ("src", "r1"), ("r1", "fw1"), ("r1", "fw2"), ("fw1", "r2"), ("fw2", "r2"),
            ("r2", "nat"), ("nat", "sh"), ("sh", "dst"))],
        "groups": {"fwpool": {"instances": ["fw1", "fw2"], "weights": [1, 3]}},
        "chains": {
            "web": {"classifiers": [{"ingress": "src", "proto": "tcp", "dport": "80-8080"}],
                    "functions": ["fwpool", "nat"], "egress": "dst"},
            "dns": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 53}],
                    "functions": ["fw1"], "egress": "dst"}}}
