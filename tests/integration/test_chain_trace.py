"""``chain trace`` follows every path of a chain (issue 14): with a group of two instances,
one probe per path, each hashed onto its own path, goes through its own instance; a symmetric
chain is traced in both directions (the reverse from the egress back, through the same
instances), each path labelled with its direction; ``--direction N`` and ``--path N`` pick
one; ``--json`` reports the probe's ports, the path it took and the instances seen."""

from __future__ import annotations

import json
from typing import Any

from sfclab.cli import main
from sfclab.live.ops import chains

from .test_chain_ops import running
from .test_sfc import FW, HOST, ROUTER


def pool_lab(name: str, symmetric: bool) -> dict[str, Any]:
    return {"name": name,
            "nodes": {"src": HOST, "r1": ROUTER, "fw1": FW, "fw2": FW, "r2": ROUTER,
                      "dst": HOST},
            "links": [{"endpoints": list(e)} for e in (("src", "r1"), ("r1", "fw1"),
                                                       ("r1", "fw2"), ("fw1", "r2"),
                                                       ("fw2", "r2"), ("r2", "dst"))],
            "groups": {"pool": {"instances": ["fw1", "fw2"], "weights": [1, 3]}},
            "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "udp",
                                                "dport": "7000-7100"}],
                               "functions": ["pool"], "egress": "dst",
                               "symmetric": symmetric}}}


def test_trace_follows_both_paths_of_a_two_instance_group(lab_name: str, capsys) -> None:
    with running(pool_lab(lab_name, True)) as lab:
        t = chains.trace(lab.name, "web")
        assert [(p["direction"], p["path"]) for p in t["paths"]] == \
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert [(x["direction"], x["reverse"], x["ingress"], x["egress"])
                for x in t["directions"]] == [(0, False, "src", "dst"), (1, True, "dst", "src")]
        assert t["delivered"] and t["in_order"], t
        for p in t["paths"]:
            assert p["took_path"] and p["delivered"], p
            assert p["instances_seen"] == p["instances"], p
        fwd = [p for p in t["paths"] if not p["reverse"]]
        back = [p for p in t["paths"] if p["reverse"]]
        assert {p["instances_seen"][0] for p in fwd} == {"fw1", "fw2"}
        assert [p["instances_seen"] for p in back] == [p["instances_seen"] for p in fwd]
        assert [p["nodes"][0] for p in back] == ["dst", "dst"]
        assert fwd[0]["probe"] != fwd[1]["probe"]
        assert 7000 <= fwd[1]["probe"]["dport"] <= 7100
        assert all(7000 <= p["probe"]["sport"] <= 7100 for p in back)  # the reply's ports
        # one path, by number, as JSON
        assert main(["chain", "trace", lab.name, "web", "--path", "1", "--json"]) == 0
        one = json.loads(capsys.readouterr().out)
        assert [(p["direction"], p["path"]) for p in one["paths"]] == [(0, 1), (1, 1)]
        assert [p["instances_seen"] for p in one["paths"]] == [["fw2"], ["fw2"]]
        assert main(["chain", "trace", lab.name, "web", "--direction", "1", "--json"]) == 0
        rev = json.loads(capsys.readouterr().out)
        assert [(p["direction"], p["path"]) for p in rev["paths"]] == [(1, 0), (1, 1)]
        assert main(["chain", "trace", lab.name, "web"]) == 0
        text = capsys.readouterr().out
        assert "direction 0: src -> dst" in text and "direction 1: dst -> src (reverse)" in text
        assert text.count("\npath 0: ") == 2 and text.count("\npath 1: ") == 2
        assert "through fw1" in text and "through fw2" in text
        assert "delivered to src: yes" in text and "delivered to dst: yes" in text
        assert main(["chain", "trace", lab.name, "web", "--direction", "2"]) == 2
        assert "no direction 2" in capsys.readouterr().err
        assert main(["chain", "trace", lab.name, "web", "--path", "5"]) == 2
        assert "no path 5" in capsys.readouterr().err
