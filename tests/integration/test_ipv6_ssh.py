"""A dual-stack lab (``ip: dual``) over hosts driven by SSH (emulated hosts running ``sshd``,
:mod:`.sshd`): ``inspect`` reads each node's IPv6 addresses on its host (``addresses6``, by
the agent), and ``chain add`` gives an instance its agent makes an IPv6 link and default route,
so an IPv6 flow classified by an ``ipv6`` classifier passes through it to dst."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.kernel import netns
from sfclab.live import request
from sfclab.live.ops import add as chain_add
from sfclab.realize import lifecycle
from sfclab.realize.inspect import inspect
from sfclab.realize.kinds import load_lab_dict

from .labtools import nothing_left
from .sshd import ssh_machines
from .test_sfc_family import RECEIVER, SENDER, UNTIL_SENT
from .test_ssh_chains import chain_lab

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

PORT = 7301


def test_dual_stack_over_ssh_hosts_inspects_and_adds_ipv6(lab_name: str, tmp_path: Path):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        plan = lifecycle.up(load_lab_dict({**chain_lab(lab_name, ms), "ip": "dual"}))
        try:
            nodes = inspect(lab_name)["nodes"]
            f1 = {i["name"]: i for i in nodes["f1"]["interfaces"]}  # f1 is on h2, over SSH
            want = sorted(f"{i.address6}" for i in plan.interfaces_of("f1"))
            assert sorted(a for i in f1.values() for a in i.get("addresses6", [])) == want
            body = {"name": "six", "attach": "r1", "egress": "dst",
                    "classifiers": [{"ingress": "src", "proto": "udp", "dport": PORT,
                                     "family": "ipv6"}],
                    "functions": [{"name": "fw", "kind": "firewall", "rules": []}]}
            cf = tmp_path / "six.json"
            cf.write_text(json.dumps(body))
            d = chain_add.add_chain(request.read_chain_file(lab_name, str(cf)))
            (node, _), = d["instances"].items()
            merged = lifecycle.load_plan(lab_name)[1]
            ns = merged.netns_of(node)
            addr = netns.run(ns, ["ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope",
                                  "global"]).stdout
            assert "2001:2:0:ffff::2/64" in addr, addr
            assert "default via 2001:2:0:ffff::1" in netns.run(ns, ["ip", "-6", "route"]).stdout
            rx = subprocess.Popen(["ip", "netns", "exec", plan.netns_of("dst"), sys.executable,
                                   "-c", RECEIVER, str(PORT), *UNTIL_SENT],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
            subprocess.run(["ip", "netns", "exec", plan.netns_of("src"), sys.executable, "-c",
                            SENDER, str(plan.address_of("dst", 6)), str(PORT), "20"],
                           check=True, timeout=60)
            got = json.loads(rx.communicate(timeout=30)[0].strip().splitlines()[-1])
            assert got == {"4": 0, "6": 20}
            six = inspect(lab_name)["nodes"][node]["interfaces"]
            assert ["2001:2:0:ffff::2/64"] in [i.get("addresses6") for i in six]
        finally:
            assert lifecycle.down(lab_name).errors == []
        assert nothing_left(lab_name)
