"""``router``: forwarding works and its per-namespace sysctls are applied."""

import sys

from tests.integration.chains import UDP_RECEIVER, UDP_SENDER, chain, udp_exchange


def test_router_forwards_and_sets_sysctls(tmp_path):
    with chain("router", {"rp_filter": 2, "ttl": 33}, tmp_path) as lab:
        res = udp_exchange(lab, "src", "dst", [7001], 10)
        assert res["counts"] == {7001: 10}
        assert res["ttls"] == [254]                 # src's 255 (every lab's default), minus one hop
        info = lab.inspect()["nodes"]["fn"]["sysctls"]
        assert info["net.ipv4.ip_default_ttl"] == "33"
        assert info["net.ipv4.conf.all.rp_filter"] == "2"
        assert info["net.ipv4.conf.eth0.rp_filter"] == "2"
        assert info["net.ipv4.ip_forward"] == "1"
        # packets the router itself sends leave with ttl 33
        rx = lab.popen("dst", [sys.executable, "-c",
                               UDP_RECEIVER, "7002", "1.5"])
        assert rx.stdout.readline().strip() == "ready"
        lab.exec("fn", [sys.executable, "-c", UDP_SENDER, str(lab.address("dst")), "7002", "3"])
        out, _ = rx.communicate(timeout=10)
        assert '"ttls": [33]' in out
