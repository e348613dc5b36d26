"""``firewall``: exactly the denied flows are dropped and the counters say so, with both
backends; generated worst-case lists (stateless, stateful, set) load and let traffic pass."""

import pytest

from tests.integration.chains import chain, udp_exchange

N = 20


def _rules():
    return [
        {"action": "drop", "proto": "udp", "src": "198.18.1.0/24", "dport": 5001},
        {"action": "drop", "proto": "udp", "dport": "6000-6010"},
        {"action": "accept", "proto": "udp", "dst": "198.18.2.2/32", "dport": "5000-5999"},
    ]


@pytest.mark.serial  # times or counts what the machine's load changes
@pytest.mark.parametrize("backend,variant", [("nftables", None), ("iptables", "legacy"),
                                             ("iptables", "nft")])
def test_firewall_drops_exactly_the_denied_flows(tmp_path, backend, variant):
    params = {"backend": backend, "rules": _rules(), "policy": "drop"}
    if variant:
        params["iptables"] = variant
    with chain("firewall", params, tmp_path) as lab:
        res = udp_exchange(lab, "src", "dst", [5001, 5002, 6005, 7000], N)
        # 5001: rule 0; 6005: rule 1; 5002 accepted by rule 2; 7000 falls to policy drop
        assert res["counts"] == {5001: 0, 5002: N, 6005: 0, 7000: 0}
        info = lab.inspect()["nodes"]["fn"]
        fwd = info["hooks"]["forward"]
        pk = [r["packets"] for r in fwd["rules"]]
        assert pk == [N, N, N]
        assert fwd["policy"]["packets"] == N
        assert fwd["rules"][0]["rule"]["dport"] == 5001
        assert fwd["rules"][1]["rule"]["dport"] == "6000-6010"


@pytest.mark.parametrize("params", [
    {"backend": "nftables", "generate": {"count": 500, "type": "stateless"}},
    {"backend": "nftables", "generate": {"count": 500, "type": "stateless"}, "set": True},
    {"backend": "nftables", "generate": {"count": 200, "type": "stateful"}},
    {"backend": "iptables", "generate": {"count": 500, "type": "stateless"}},
    {"backend": "iptables", "generate": {"count": 200, "type": "stateful"}},
], ids=["nft-stateless", "nft-set", "nft-stateful", "ipt-stateless", "ipt-stateful"])
def test_generated_lists_never_match(tmp_path, params):
    params = dict(params, rules=[{"action": "drop", "proto": "udp", "dport": 5001}],
                  hooks=["forward", "input"])
    with chain("firewall", params, tmp_path) as lab:
        res = udp_exchange(lab, "src", "dst", [5001, 5002], 10)
        assert res["counts"] == {5001: 0, 5002: 10}
        fwd = lab.inspect()["nodes"]["fn"]["hooks"]["forward"]
        expected_rules = 1 if params.get("set") else params["generate"]["count"]
        assert fwd["generated"]["rules"] == expected_rules
        assert fwd["generated"]["packets"] == 0
        assert fwd["rules"][0]["packets"] == 10
        assert fwd["policy"]["packets"] >= 10
