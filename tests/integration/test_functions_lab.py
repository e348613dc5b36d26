"""Functions declared in a lab file: built by `sfclab up`, proven with real traffic, and bad
parameters refused before anything exists."""

from __future__ import annotations

import time

import pytest
import yaml
from tests.integration.labtools import iperf3, nothing_left

from sfclab.cli import main

CHAIN = "../../scenarios/functions-chain.yaml"


@pytest.mark.serial  # times or counts what the machine's load changes
def test_firewall_nat_shaper_dpi_chain_from_a_lab_file(running_lab, lab_name):
    import pathlib

    d = yaml.safe_load((pathlib.Path(__file__).parent / CHAIN).read_text())
    d["name"] = lab_name
    lab = running_lab(d)
    dst = str(lab.address("dst"))

    # UDP to 9999 is dropped by the firewall; UDP to 9998 passes and arrives NATed
    recv = lab.popen("dst", ["python3", "-c",
                             "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
                             f"s.bind(('{dst}', 9998)); s.settimeout(10);"
                             "d, a = s.recvfrom(100); print(a[0]); sys.stdout.flush()"],
                     stdout=-1, text=True)
    time.sleep(0.5)
    lab.exec("src", ["python3", "-c",
                     "import socket,time; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                     f"for i in range(10): s.sendto(b'x', ('{dst}', 9999))\n"
                     f"for i in range(20): s.sendto(b'y', ('{dst}', 9998)); time.sleep(0.05)"])
    seen_from = recv.communicate(timeout=15)[0].strip()
    nat_outside = str([a for a in lab.inspect()["nodes"]["nat"]["interfaces"]
                       if a["name"] == "eth1"][0]["addresses"][0].split("/")[0])
    assert seen_from == nat_outside  # the receiver sees the translated source

    bps = iperf3(lab.netns("src"), lab.netns("dst"), dst, seconds=2)["end"]["sum_received"][
        "bits_per_second"]
    assert 0.8 * 200e6 < bps < 1.1 * 200e6  # the shaper holds 200 Mbit/s

    nodes = lab.inspect()["nodes"]
    fw = nodes["fw"]["function"]["hooks"]["forward"]
    assert fw["rules"][0]["packets"] == 10
    assert nodes["shaper"]["function"]["interfaces"]["eth1"]["packets"] > 1000
    assert nodes["dpi"]["function"]["running"] is True
    assert any(f.get("packets", 0) > 0 for f in nodes["dpi"]["function"]["flows"])
    name = lab.name
    lab.down()
    assert nothing_left(name)


BAD_FUNCTIONS = {
    "unknown-kind": ("  fw: {kind: firewal}\n", "nodes.fw.kind"),
    "rate-zero": ("  fw: {kind: shaper, rate: 0mbit}\n", "nodes.fw.rate"),
    "bad-prefix": ("  fw: {kind: firewall, rules: [{action: drop, src: 198.18.0.0/33}]}\n",
                   "nodes.fw.rules[0].src"),
    "bad-port-range": ("  fw: {kind: firewall, rules: [{action: drop, proto: tcp, dport: 90-80}]}\n",
                       "nodes.fw.rules[0].dport"),
    "rule-syntax": ("  fw: {kind: firewall, rules: [{action: dorp}]}\n", "nodes.fw.rules[0].action"),
    "missing-exec": ("  fw: {kind: tun, exec: /nonexistent/fn}\n", "nodes.fw.exec"),
    "unknown-neighbour": ("  fw: {kind: nat, outside: nowhere}\n", "nodes.fw.outside"),
}


@pytest.mark.parametrize("case", sorted(BAD_FUNCTIONS))
def test_bad_function_parameters_exit_2_and_create_nothing(tmp_path, capsys, lab_name, case):
    node, place = BAD_FUNCTIONS[case]
    f = tmp_path / "lab.yaml"
    f.write_text(f"name: {lab_name}\nnodes:\n  src: {{kind: host}}\n{node}  dst: {{kind: host}}\n"
                 "links:\n  - endpoints: [src, fw]\n  - endpoints: [fw, dst]\n")
    status = main(["up", str(f)])
    _, err = capsys.readouterr()
    assert status == 2, err
    assert err.count("\n") == 1 and f"{f}" in err and place in err, err
    assert nothing_left(lab_name)




def test_shaper_overhead_only_mode_from_a_lab_file(running_lab):
    """The paper's overhead-only shaper: HTB at 1 Tbit/s, set up from the lab file as written."""
    lab = running_lab({"chain": {"length": 3}, "nodes": {"r1": {"kind": "shaper",
                                                                 "overhead_only": True}}})
    fn = lab.inspect()["nodes"]["r1"]["function"]
    assert fn["overhead_only"] is True and fn["rate_bps"] == 10**12
    assert all(q["kind"] == "htb" for q in fn["interfaces"].values())
