"""Parameter validation of every function kind (no root needed)."""

from ipaddress import IPv4Interface, IPv4Network
from pathlib import Path

import pytest
from pydantic import ValidationError

from sfclab.errors import SpecError
from sfclab.functions import get, kinds
from sfclab.functions.base import FunctionContext, Interface
from sfclab.functions.params import parse_ports, parse_rate, parse_size


def ctx():
    return FunctionContext(lab="t", node="fn", netns="t-fn", state_dir=Path("/nonexistent"),
                           interfaces=[Interface("eth0", "src", IPv4Interface("198.18.1.1/24")),
                                       Interface("eth1", "dst", IPv4Interface("198.18.2.1/24"))])


def build(kind, params):
    cls = get(kind)
    return cls(ctx(), cls.Params.model_validate(params))


def error_places(kind, params):
    with pytest.raises(ValidationError) as e:
        get(kind).Params.model_validate(params)
    return [".".join(str(p) for p in err["loc"]) for err in e.value.errors()]


def test_registry_has_every_kind():
    assert {"router", "firewall", "nat", "shaper", "dpi", "tun"} <= set(kinds())
    with pytest.raises(KeyError):
        get("teleporter")


@pytest.mark.parametrize("text,bits", [("50mbit", 50_000_000), ("1gbit", 10**9),
                                       ("1.5kbit", 1500), ("1mbps", 8_000_000), (1000, 1000)])
def test_rates(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("bad", ["0mbit", "-5mbit", "50", "fast", "50 furlongs", 0, -1, True])
def test_bad_rates(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)


def test_sizes_and_ports():
    assert parse_size("64kb") == 65536 and parse_size("1M") == 1 << 20 and parse_size(1500) == 1500
    assert parse_ports(80) == (80, 80) and parse_ports("1000-2000") == (1000, 2000)
    for bad in ("2000-1000", "70000", "80-", "a-b", -1):
        with pytest.raises(ValueError):
            parse_ports(bad)


def test_shaper_params():
    p = get("shaper").Params.model_validate({"rate": "50mbit", "toward": "dst"})
    assert p.rate == 50_000_000 and p.ceil is None and p.discipline == "htb"
    assert error_places("shaper", {"rate": "0mbit"}) == ["rate"]
    assert error_places("shaper", {"rate": "-1gbit"}) == ["rate"]
    assert error_places("shaper", {"rate": "5mbit", "colour": "red"}) == ["colour"]
    assert error_places("shaper", {}) == [""]                       # rate required
    assert error_places("shaper", {"rate": "5mbit", "ceil": "1mbit"}) == [""]
    assert error_places("shaper", {"rate": "5mbit", "discipline": "cbq"}) == ["discipline"]
    o = get("shaper").Params.model_validate({"overhead_only": True})
    assert o.rate == 10**12


def test_shaper_batch_and_neighbour():
    s = build("shaper", {"rate": "50mbit", "toward": "dst"})
    s.check()
    assert s.devices() == ["eth1"]
    assert "htb rate 50000000bit ceil 50000000bit" in s.batch()
    t = build("shaper", {"rate": "1gbit", "discipline": "tbf"})
    assert t.devices() == ["eth0", "eth1"] and t.batch().count("tbf rate 1000000000bit") == 2
    with pytest.raises(SpecError) as e:
        build("shaper", {"rate": "1mbit", "toward": "mars"}).check()
    assert e.value.place == "toward"


def test_router_params():
    r = build("router", {"rp_filter": 1, "ttl": 7})
    s = r.sysctls()
    assert s["net.ipv4.ip_default_ttl"] == "7"
    assert s["net.ipv4.conf.eth1.rp_filter"] == "1" and s["net.ipv4.conf.all.rp_filter"] == "1"
    assert error_places("router", {"rp_filter": 3}) == ["rp_filter"]
    assert error_places("router", {"ttl": 0}) == ["ttl"]


def test_firewall_params():
    p = get("firewall").Params.model_validate(
        {"backend": "iptables", "rules": [{"action": "drop", "proto": "tcp",
                                           "src": "198.18.0.0/15", "dport": "1000-2000"}]})
    assert p.rules[0].src == IPv4Network("198.18.0.0/15") and p.rules[0].dport == (1000, 2000)
    assert error_places("firewall", {"rules": [{"action": "drop", "src": "198.18.1.300/24"}]}) \
        == ["rules.0.src"]
    assert error_places("firewall", {"rules": [{"action": "drop", "src": "198.18.1.1/24"}]}) \
        == ["rules.0.src"]                                    # host bits set
    assert error_places("firewall", {"rules": [{"action": "drop", "proto": "udp",
                                                "dport": "2000-1000"}]}) == ["rules.0.dport"]
    assert error_places("firewall", {"rules": [{"action": "reject"}]}) == ["rules.0.action"]
    assert error_places("firewall", {"rules": [{"action": "drop", "dport": 80}]}) == ["rules.0"]
    assert error_places("firewall", {"rules": [{"action": "drop", "port": 80}]}) \
        == ["rules.0.port"]
    assert error_places("firewall", {"backend": "pf"}) == ["backend"]
    assert error_places("firewall", {"generate": {"count": -1}}) == ["generate.count"]
    assert error_places("firewall", {"generate": {"count": 5}, "set": True,
                                     "backend": "iptables"}) == [""]
    assert error_places("firewall", {"set": True}) == [""]


def test_nat_params():
    n = build("nat", {"outside": "dst", "forward": [{"port": 8080, "to": "198.18.1.2:80"}]})
    n.check()
    text = n.ruleset()
    assert 'oifname "eth1" counter masquerade' in text
    assert 'iifname "eth1" tcp dport 8080 counter dnat to 198.18.1.2:80' in text
    assert error_places("nat", {}) == ["outside"]
    assert error_places("nat", {"outside": "dst", "forward": [{"port": 80, "to": "x:80"}]}) \
        == ["forward.0.to"]
    assert error_places("nat", {"outside": "dst", "forward": [{"port": 0, "to": "1.2.3.4"}]}) \
        == ["forward.0.port"]
    with pytest.raises(SpecError) as e:
        build("nat", {"outside": "nowhere"}).check()
    assert e.value.place == "outside"


def test_tun_params(tmp_path):
    t = build("tun", {"exec": "/bin/cat -u", "memory": "32M", "cpu": 0.25})
    t.check()
    assert t.program() == ["/bin/cat", "-u", "sfctun0"]
    assert t.params.memory == 32 << 20
    assert "rule add iif eth0 lookup 100 pref 1000" in t.ip_batch()
    assert "rule add iif eth1 lookup 100 pref 1000" in t.ip_batch()
    assert build("tun", {"exec": ["cat", "--dev={tun}"]}).program()[1] == "--dev=sfctun0"
    with pytest.raises(SpecError) as e:
        build("tun", {"exec": "/no/such/thing"}).check()
    assert e.value.place == "exec"
    assert error_places("tun", {}) == ["exec"]
    assert error_places("tun", {"exec": ""}) == ["exec"]
    assert error_places("tun", {"exec": "x", "cpu": 0}) == ["cpu"]
    assert error_places("tun", {"exec": "x", "memory": "lots"}) == ["memory"]
    assert error_places("tun", {"exec": "x", "device": "a-name-far-too-long"}) == ["device"]
    assert error_places("tun", {"exec": "x", "table": 254}) == ["table"]


def test_dpi_params():
    p = get("dpi").Params.model_validate({"queue": 3, "memory": "64M"})
    assert p.queue == 3
    assert error_places("dpi", {"queue": 70000}) == ["queue"]
    d = build("dpi", {"queue": 3})
    assert "--queue-num 3 --queue-bypass" in d.ruleset()
