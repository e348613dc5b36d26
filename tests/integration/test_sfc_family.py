"""Classifiers by family on real namespaces (issue 28 item 2): in a dual-stack lab (``ip:
dual``) an IPv4 flow takes one chain and an IPv6 flow another, each through its
own function; the forwarders and the proxy carry the IPv6 packet under the label stack and
deliver it as IPv6 (ethertype 0x86DD after the last pop), and the function sees it unlabelled."""

from __future__ import annotations

import json
import subprocess
import sys

from .test_sfc import FW, HOST, Capture, lab_dict, line, node_counters, running

#: counts the datagrams to its port by family for a while, then prints them as JSON
RECEIVER = r"""
import json, select, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1]))); print("ready", flush=True)
got = {"4": 0, "6": 0}; end = time.monotonic() + float(sys.argv[2])
watch = [s, sys.stdin] if sys.argv[3:4] == ["until-eof"] else [s]
while time.monotonic() < end:
    ready = select.select(watch, [], [], 0.1)[0]
    if sys.stdin in ready and not sys.stdin.read(1):  # the test has sent everything
        end, watch = min(end, time.monotonic() + DRAIN_S), [s]
    if s in ready:
        _, peer = s.recvfrom(2048)
        got["4" if peer[0].startswith("::ffff:") else "6"] += 1
print(json.dumps(got), flush=True)
""".replace("DRAIN_S", "1.0")
#: how the tests run :data:`RECEIVER`: it counts until its standard input closes (the test's
#: ``communicate``, once every sender has returned), then one second more for what is still on
#: its way; 60 s at most.  A fixed window instead let a sender that started late on a loaded
#: machine send past it, and the test count datagrams as lost that had not been sent yet
UNTIL_SENT = ["60", "until-eof"]
#: sends n datagrams to (address, port) from one source port
SENDER = r"""
import socket, sys, time
a, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(n):
    s.sendto(b"sfclab family", (a, port)); time.sleep(0.01)
"""


def test_ipv4_and_ipv6_flows_take_their_own_chains() -> None:
    d = lab_dict(dict(src=HOST, f1=FW, f2=FW, dst=HOST), line("src", "f1", "f2", "dst"),
                 {"four": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7100,
                                            "family": "ipv4"}],
                           "functions": ["f1"], "egress": "dst"},
                  "six": {"classifiers": [{"ingress": "src", "proto": "udp",
                                           "dst": "2001:2::/32", "dport": 7100}],
                          "functions": ["f2"], "egress": "dst"}})
    with running({**d, "ip": "dual"}) as lab:
        dst6 = lab._plan().address_of("dst", 6)
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7100", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        at_f2 = Capture(lab, "f2", "eth0", 5.0)
        at_dst = Capture(lab, "dst", "eth0", 5.0)
        before = node_counters(lab)
        for dst in (str(lab.address("dst")), str(dst6)):
            lab.exec("src", [sys.executable, "-c", SENDER, dst, "7100", "20"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 20, "6": 20}, got
        delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}
        assert delta["src"]["classified"] == 40, delta
        assert delta["f1"]["proxy_in"] == 20 and delta["f2"]["proxy_in"] == 20, delta
        # the IPv6 flow reached f2's function unlabelled, and dst as plain IPv6
        six_in = [x for x in at_f2.frames() if not x["out"] and x.get("dport") == 7100 and
                  ":" in x.get("dst", "")]
        assert len(six_in) == 20 and all(x["ethertype"] == 0x86DD for x in six_in), six_in[:3]
        at = [x for x in at_dst.frames() if not x["out"] and x.get("dport") == 7100]
        assert sorted({x["ethertype"] for x in at}) == [0x0800, 0x86DD], at[:3]
        assert all(not x["labels"] for x in at)


def test_a_flow_of_the_wrong_family_is_not_classified() -> None:
    """A chain of family ipv6 leaves IPv4 flows to the same port to the routes, and one of
    ipv4 leaves IPv6 flows alone."""
    d = lab_dict(dict(src=HOST, f1=FW, dst=HOST), line("src", "f1", "dst"),
                 {"six": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7200,
                                           "family": "ipv6"}],
                          "functions": ["f1"], "egress": "dst"}})
    with running({**d, "ip": "dual"}) as lab:
        dst6 = lab._plan().address_of("dst", 6)
        rx = lab.popen("dst", [sys.executable, "-c", RECEIVER, "7200", *UNTIL_SENT],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        before = node_counters(lab)
        lab.exec("src", [sys.executable, "-c", SENDER, str(lab.address("dst")), "7200", "10"])
        mid = node_counters(lab)
        lab.exec("src", [sys.executable, "-c", SENDER, str(dst6), "7200", "10"])
        after = node_counters(lab)
        got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert got == {"4": 10, "6": 10}, got
        assert mid["src"]["classified"] == before["src"]["classified"]
        assert after["src"]["classified"] - mid["src"]["classified"] == 10
