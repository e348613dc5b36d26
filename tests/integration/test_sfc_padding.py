"""Padding labels (a chain's ``pad_labels``): the same path carries a deeper stack, the
padding rides below the path's labels through a function's proxy, and the node before the
egress takes it off with its own label, so the egress gets plain IPv4."""

from __future__ import annotations

from tests.integration.test_sfc import (FW, HOST, TOPOLOGIES, Capture, echo, lab_dict,
                                        node_counters, running, send, steering)

from sfclab.plan.sfc import PAD_LABEL
from sfclab.live.ops import chains


def test_padded_chain_delivers_and_the_middle_hop_carries_the_padded_depth() -> None:
    nodes, links, fns = TOPOLOGIES["two functions side by side"]
    assert nodes == dict(src=HOST, f1=FW, f2=FW, dst=HOST)
    d = lab_dict(nodes, links, {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                                      "functions": fns, "egress": "dst", "ttl": 50,
                                      "pad_labels": 8}})
    with running(d) as lab:
        path = steering(lab).directions[0].paths[0]
        assert len(path.stack) == 4 and path.pad == 8
        out = Capture(lab, "f1", "eth1")
        server = echo(lab, "dst", 7000, 3)
        # every datagram is echoed: dst got plain IPv4, the padding taken off before it
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 3) == 3
        sent = [x for x in out.frames() if x["out"] and x["ethertype"] == 0x8847]
        assert len(sent) == 3
        # between f1 and f2: f2's two labels and the 8 padding entries below them, 10 deep,
        # the bottom of the stack marked only on the last padding entry
        labels = sent[0]["labels"]
        assert [lbl for lbl, _, _ in labels] == path.stack[2:] + [PAD_LABEL] * 8
        assert [b for _, b, _ in labels] == [0] * 9 + [1]
        c = node_counters(lab)
        assert c["f2"]["delivered"] >= 3 and c["f2"]["unknown_label"] == 0
        assert c["f1"]["errors"] == 0 and c["f2"]["errors"] == 0
        server.wait(timeout=30)
        # chain trace follows the padded chain's labels, the last one unpadding
        t = chains.trace(lab.name, "c")
        assert t["in_order"] and t["delivered"]
        assert [h["action"] for h in t["paths"][0]["hops"]] == ["proxy", "forward", "proxy",
                                                               "unpad"]


def test_padding_is_taken_off_at_a_router_before_the_egress() -> None:
    """The padding is taken off by XDP at a forwarding node too (not only by a proxy)."""
    d = lab_dict(dict(src=HOST, f1=FW, r1={"kind": "router"}, dst=HOST),
                 [{"endpoints": [a, b]} for a, b in (("src", "f1"), ("f1", "r1"),
                                                     ("r1", "dst"))],
                 {"c": {"classifiers": [{"ingress": "src", "proto": "udp"}],
                        "functions": ["f1"], "egress": "dst", "pad_labels": 12}})
    with running(d) as lab:
        path = steering(lab).directions[0].paths[0]
        assert len(path.stack) + path.pad == 15
        out = Capture(lab, "f1", "eth1")
        server = echo(lab, "dst", 7000, 3)
        assert send(lab, "src", str(lab.address("dst")), 40000, 7000, 3) == 3
        sent = [x for x in out.frames() if x["out"] and x["ethertype"] == 0x8847]
        assert len(sent) == 3 and len(sent[0]["labels"]) == 13  # r1's label and 12 padding
        c = node_counters(lab)
        assert c["r1"]["delivered"] >= 3 and c["r1"]["errors"] == 0
        server.wait(timeout=30)
