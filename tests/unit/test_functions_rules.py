"""Firewall rule text for nft and iptables-restore, and reading counters back."""

import json

from sfclab.functions import rules as R
from sfclab.functions.firewall import FirewallParams


def params(**kw):
    return FirewallParams.model_validate(kw)


def test_nft_user_rules_and_policy():
    p = params(policy="drop", hooks=["forward", "input"],
               rules=[{"action": "drop", "proto": "tcp", "src": "198.18.1.0/24",
                       "sport": 1024, "dport": "1000-2000"},
                      {"action": "accept", "proto": "icmp", "dst": "198.18.2.2"}])
    text = R.nft_ruleset(p.rules, p.generate, use_set=False, policy=p.policy, hooks=p.hooks)
    assert text.startswith("table inet sfclab_fw\ndelete table inet sfclab_fw\n")
    assert ("meta l4proto tcp ip saddr 198.18.1.0/24 tcp sport 1024 tcp dport 1000-2000 "
            'counter drop comment "sfclab rule 0"') in text
    assert 'meta l4proto icmp ip daddr 198.18.2.2/32 counter accept comment "sfclab rule 1"' \
        in text
    assert text.count("policy drop;") == 2
    assert text.count('counter comment "sfclab policy"') == 2


def test_nft_generated_lists():
    p = params(generate={"count": 3, "type": "stateless"})
    text = R.nft_ruleset([], p.generate, use_set=False, policy="accept", hooks=["forward"])
    assert [ln.strip() for ln in text.splitlines() if "240." in ln] == [
        "ip saddr 240.0.0.0 counter drop", "ip saddr 240.0.0.1 counter drop",
        "ip saddr 240.0.0.2 counter drop"]
    s = R.nft_ruleset([], p.generate, use_set=True, policy="accept", hooks=["forward"])
    assert "elements = { 240.0.0.0, 240.0.0.1, 240.0.0.2 }" in s
    assert s.count("ip saddr @generated counter drop") == 1
    st = params(generate={"count": 2, "type": "stateful"})
    t = R.nft_ruleset([], st.generate, use_set=False, policy="accept", hooks=["forward"])
    assert f"ct original bytes >= {R.STATEFUL_BASE + 1} counter drop" in t


def test_iptables_text():
    p = params(backend="iptables", policy="drop",
               rules=[{"action": "accept", "proto": "udp", "dport": "5000-5999"}],
               generate={"count": 2})
    text = R.iptables_ruleset(p.rules, p.generate, policy=p.policy, hooks=p.hooks)
    lines = text.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert ":FORWARD DROP [0:0]" in lines and ":INPUT ACCEPT [0:0]" in lines
    assert "-A FORWARD -s 240.0.0.1/32 -j DROP" in lines
    assert ('-A FORWARD -p udp -m udp --dport 5000:5999 -m comment --comment "sfclab rule 0" '
            "-j ACCEPT") in lines
    st = params(backend="iptables", generate={"count": 1, "type": "stateful"})
    assert "-m connbytes --connbytes 1152921504606846976: --connbytes-dir original " \
        "--connbytes-mode bytes -j DROP" in R.iptables_ruleset([], st.generate, policy="accept",
                                                               hooks=["forward"])


def test_counters_parsing():
    save = """*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [7:700]
:OUTPUT ACCEPT [0:0]
[0:0] -A FORWARD -s 240.0.0.0/32 -j DROP
[3:300] -A FORWARD -p udp -m udp --dport 5001 -m comment --comment "sfclab rule 0" -j DROP
COMMIT
"""
    c = R.iptables_counters(save, ["forward"])["forward"]
    assert c["policy"] == {"packets": 7, "bytes": 700}
    assert c["rules"] == {0: {"packets": 3, "bytes": 300}}
    assert c["generated"] == {"rules": 1, "packets": 0, "bytes": 0}
    listing = {"nftables": [
        {"metainfo": {}},
        {"rule": {"chain": "forward", "expr": [{"match": {}}, {"counter": {"packets": 0,
                                                                            "bytes": 0}},
                                                {"drop": None}]}},
        {"rule": {"chain": "forward", "comment": "sfclab rule 0",
                  "expr": [{"counter": {"packets": 4, "bytes": 40}}, {"drop": None}]}},
        {"rule": {"chain": "forward", "comment": "sfclab policy",
                  "expr": [{"counter": {"packets": 9, "bytes": 90}}]}}]}
    n = R.nft_counters(json.dumps(listing))["forward"]
    assert n["rules"] == {0: {"packets": 4, "bytes": 40}}
    assert n["policy"] == {"packets": 9, "bytes": 90}
    assert n["generated"]["rules"] == 1
