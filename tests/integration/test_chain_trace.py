"""``chain trace`` follows every path of a chain (issue 14): with a group of two instances,
one probe per path, each hashed onto its own path, goes through its own instance; ``--path N``
traces one; ``--json`` reports the probe's ports, the path it took and the instances seen."""

from __future__ import annotations

import json
from typing import Any

from sfclab.cli import main
from sfclab.steer import chains

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
        assert [p["path"] for p in t["paths"]] == [0, 1]
        assert t["delivered"] and t["in_order"], t
        for p in t["paths"]:
            assert p["took_path"] and p["delivered"], p
            assert p["instances_seen"] == p["instances"], p
        assert {p["instances_seen"][0] for p in t["paths"]} == {"fw1", "fw2"}
        assert t["paths"][0]["probe"] != t["paths"][1]["probe"]
        assert 7000 <= t["paths"][1]["probe"]["dport"] <= 7100
        # one path, by number, as JSON
        assert main(["chain", "trace", lab.name, "web", "--path", "1", "--json"]) == 0
        one = json.loads(capsys.readouterr().out)
        assert [p["path"] for p in one["paths"]] == [1]
        assert one["paths"][0]["instances_seen"] == ["fw2"]
        assert main(["chain", "trace", lab.name, "web"]) == 0
        text = capsys.readouterr().out
        assert "path 0:" in text and "path 1:" in text and "through fw1" in text \
            and "through fw2" in text
        assert main(["chain", "trace", lab.name, "web", "--path", "5"]) == 2
        assert "no path 5" in capsys.readouterr().err
