"""GSO frames through the shortbridge's own tunnel end (``attach: shortbridge`` across hosts):
TCP with the nodes' offloads on (TSO/GSO frames reach the encapsulation whole) through a router
between two shortbridged tunnels (decapsulated, then encapsulated again), and a service
chain whose path crosses hosts three times over shortbridged links (its ports have GRO on, so
TCP segments arrive there merged), carrying TCP and UDP through its functions in order.  The
encapsulation's own counters show GSO frames really reached it (the tests cannot pass without
them), the wire's counters that they crossed the underlay as segments of at most its MTU, and
the decapsulation's that nothing arrived merged."""

from __future__ import annotations

import pytest
import json
import subprocess

from sfclab.hosts.attach import shortbridge_binary
from sfclab.kernel import ethtool, netns

from .labtools import iperf3, ping


def tunnel_counts(ns: str, ifname: str) -> list[dict]:
    """The counters of the tunnel ends at tcx ingress of ``ns``/``ifname``."""
    out = netns.run(ns, [str(shortbridge_binary()), "--netns", ns, "--counters", ifname]).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def total(rows: list[dict], key: str) -> int:
    return sum(r[key] for r in rows)


def wire_stats(ns: str, ifname: str) -> tuple[int, int]:
    """(rx_packets, rx_bytes) of ``ns``/``ifname``."""
    ipr = netns.iproute(ns)
    try:
        st = ipr.get_links(ipr.link_lookup(ifname=ifname)[0])[0].get_attr("IFLA_STATS64")
        return st["rx_packets"], st["rx_bytes"]
    finally:
        ipr.close()


def encap_counts(lab) -> list[dict]:
    """The encapsulations' counters at every port of every shortbridged link."""
    rows = []
    for hl in lab.plan.host_links:
        for e in hl.ends:
            rows += [r for r in tunnel_counts(e.netns, e.port) if r["program"] == "vxlan_encap"]
    return rows


def decap_counts(lab) -> list[dict]:
    rows = []
    for h in lab.plan.hosts:
        rows += [r for r in tunnel_counts(h.netns, h.underlay_if)
                 if r["program"] == "vxlan_decap"]
    return rows


def assert_wire_frames_fit(lab) -> None:
    """Every frame the emulated underlay delivered fits its MTU (a GSO frame passed whole
    would count as one frame of up to 64 KiB)."""
    mtu = lab.plan.underlay.mtu
    for h in lab.plan.hosts:
        pkts, byts = wire_stats(h.netns, h.underlay_if)
        assert pkts and byts / pkts <= mtu + 14, (h.name, pkts, byts)


def routed_lab(name: str) -> dict:
    """a (h1) -> r (router, h2) -> b (h3), both links shortbridged: what r receives was
    decapsulated there and is encapsulated again."""
    return {"name": name, "hosts": {"h1": {}, "h2": {}, "h3": {}},
            "nodes": {"a": {"kind": "host"}, "r": {"kind": "router", "host": "h2"},
                      "b": {"kind": "host", "host": "h3"}},
            "links": [{"endpoints": ["a", "r"], "attach": "shortbridge"},
                      {"endpoints": ["r", "b"], "attach": "shortbridge"}]}


def test_tcp_with_the_nodes_offloads_on_is_cut_into_segments(running_lab, lab_name):
    """The nodes keep tx checksum offload and TSO: their TCP frames reach the encapsulation as
    GSO frames larger than the MTU, cross the underlay as segments (each frame there at most its
    MTU), arrive unmerged, are encapsulated again after the router, and the receiver gets
    every byte (iperf3 both ways)."""
    lab = running_lab(routed_lab(lab_name))
    a, b = lab.netns("a"), lab.netns("b")
    for n in (a, b, lab.netns("r")):
        with netns.entered(n):
            offl = ethtool.get_offloads("eth0")
        assert offl["tx-checksum"] and offl["tso"], offl
    assert ping(a, str(lab.address("b")), 2).returncode == 0
    for src, dst, to in ((a, b, "b"), (b, a, "a")):
        out = iperf3(src, dst, str(lab.address(to)), seconds=2)
        assert out["end"]["sum_received"]["bytes"] > 5_000_000
    enc = encap_counts(lab)
    assert len(enc) == 4 and total(enc, "errors") == 0
    gso = total(enc, "gso_frames")
    assert gso > 100, enc
    # merged: on average far more than one frame of the inner MTU each
    assert total(enc, "gso_bytes") / gso > 2 * lab.plan.host_links[0].mtu, enc
    dec = decap_counts(lab)
    assert total(dec, "errors") == 0 and total(dec, "gso_frames") == 0, dec
    # segments: the receiving ends decapsulated many more frames than were sent as GSO
    assert total(dec, "frames") > 2 * gso, (dec, enc)
    # the router's frames, decapsulated at h2, were all encapsulated again
    r_ports = [e for hl in lab.plan.host_links for e in hl.ends if e.node == "r"]
    for e in r_ports:
        [row] = [r for r in tunnel_counts(e.netns, e.port) if r["program"] == "vxlan_encap"]
        assert row["frames"] > 1000 and row["errors"] == 0, row
    assert_wire_frames_fit(lab)


def chain_lab(name: str) -> dict:
    """src (h1) -> r1 (h2) -> fw1 (h2) -> fw2 (h3) -> r2 (h3) -> dst (h1): three hops across
    hosts, each over a shortbridged tunnel."""
    sb = "shortbridge"
    return {
        "name": name, "hosts": {"h1": {}, "h2": {}, "h3": {}},
        "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router", "host": "h2"},
                  "fw1": {"kind": "firewall", "rules": [], "host": "h2"},
                  "fw2": {"kind": "firewall", "rules": [], "host": "h3"},
                  "r2": {"kind": "router", "host": "h3"}, "dst": {"kind": "host"}},
        "links": [{"endpoints": ["src", "r1"], "attach": sb}, {"endpoints": ["r1", "fw1"]},
                  {"endpoints": ["fw1", "fw2"], "attach": sb}, {"endpoints": ["fw2", "r2"]},
                  {"endpoints": ["r2", "dst"], "attach": sb}],
        "chains": {"web": {"classifiers": [{"ingress": "src", "proto": "tcp"},
                                           {"ingress": "src", "proto": "udp"}],
                           "functions": ["fw1", "fw2"], "egress": "dst",
                           "symmetric": True}}}


def udp_flood(src: str, dst: str, dst_ip: str, mbit: int = 20) -> dict:
    """One UDP iperf3 run (1 s, 1200-byte datagrams); the client's JSON."""
    server = netns.popen(dst, ["iperf3", "-s", "-1", "-p", "5202"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            cp = netns.run(src, ["iperf3", "-c", dst_ip, "-p", "5202", "-u", "-b", f"{mbit}M",
                                 "-l", "1200", "-t", "1", "-J"], check=False, timeout=30)
            out = json.loads(cp.stdout) if cp.stdout.strip().startswith("{") else {}
            if cp.returncode == 0 and "sum_received" in out.get("end", {}):
                return dict(out)
            netns.run(src, ["sleep", "0.1"])
        raise AssertionError(cp.stdout[-300:] + cp.stderr[-300:])
    finally:
        netns.end_processes([server.pid])
        server.wait()


@pytest.mark.serial  # times or counts what the machine's load changes
def test_a_chain_crossing_hosts_over_shortbridged_tunnels_carries_tcp_and_udp(running_lab,
                                                                              lab_name):
    lab = running_lab(chain_lab(lab_name))
    src, dst, ip = lab.netns("src"), lab.netns("dst"), str(lab.address("dst"))
    before = lab.inspect()["nodes"]
    out = iperf3(src, dst, ip, seconds=2)
    assert out["end"]["sum_received"]["bytes"] > 5_000_000
    mid = lab.inspect()["nodes"]
    udp = udp_flood(src, dst, ip)
    after = lab.inspect()["nodes"]
    got = udp["end"]["sum_received"]
    assert got["packets"] > 1000 and got["lost_packets"] <= got["packets"] // 100, got

    def moved(info0, info1, node, key):
        return info1[node]["sfc"]["counters"][key] - info0[node]["sfc"]["counters"][key]

    # both functions on the path saw each protocol's frames (the proxy hands them the packets
    # without labels), and the classifier put them on the chain
    for a0, a1, least in ((before, mid, 1000), (mid, after, 1000)):
        assert moved(a0, a1, "src", "classified") > least
        for fn in ("fw1", "fw2"):
            assert moved(a0, a1, fn, "proxy_in") > least, (fn, a1[fn]["sfc"])
    # in chain order: the forward direction's path visits fw1, then fw2, then the egress
    fwd = next(d for d in lab.plan.steering.directions if not d.reverse)
    for p in fwd.paths:
        assert p.instances == ["fw1", "fw2"]
        assert p.nodes.index("fw1") < p.nodes.index("fw2") < p.nodes.index("dst")
    enc = encap_counts(lab)
    assert len(enc) == 6 and total(enc, "errors") == 0
    # GRO at the ports merged TCP segments (where the last label is off: labelled frames are
    # not merged), and the encapsulation took them as GSO frames
    gso = total(enc, "gso_frames")
    assert gso > 0 and total(enc, "gso_bytes") / gso > lab.plan.host_links[0].mtu, enc
    dec = decap_counts(lab)
    assert total(dec, "errors") == 0 and total(dec, "gso_frames") == 0, dec
    assert_wire_frames_fit(lab)
