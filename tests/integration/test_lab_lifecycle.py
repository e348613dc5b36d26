"""The lab lifecycle through the CLI: up, inspect, exec, graph, down; crashes and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from tests.integration.labtools import kill_9_during_up_then_down, nothing_left

from sfclab.cli import main
from sfclab.kernel import netns


def sfclab(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_up_inspect_exec_graph_down(tmp_path, capsys, lab_name):
    f = write(tmp_path, "lab.yaml", f"name: {lab_name}\nchain: {{length: 4}}\n")
    status, out, _ = sfclab(capsys, "up", f, "--json")
    assert status == 0 and json.loads(out)["namespaces"] == 4
    try:
        status, out, err = sfclab(capsys, "up", f)
        assert status == 2 and "already up" in err

        status, out, _ = sfclab(capsys, "ls", "--json")
        assert any(r["name"] == lab_name and r["status"] == "up" for r in json.loads(out))

        status, out, _ = sfclab(capsys, "inspect", lab_name, "--json")
        info = json.loads(out)
        dst_ip = info["nodes"]["dst"]["interfaces"][0]["addresses"][0].split("/")[0]
        assert status == 0 and info["nodes"]["r1"]["forwarding"]

        assert main(["exec", lab_name, "src", "--", "ping", "-c1", "-W2", dst_ip]) == 0
        assert main(["exec", lab_name, "src", "--", "sh", "-c", "exit 7"]) == 7
        status, _, err = sfclab(capsys, "exec", lab_name, "nosuch", "--", "true")
        assert status == 2 and "no node 'nosuch'" in err

        status, out, _ = sfclab(capsys, "graph", lab_name, "--format", "dot")
        assert status == 0 and '"r1" -- "r2"' in out
        status, out, _ = sfclab(capsys, "graph", f, "--format", "mermaid")
        assert out.startswith("graph LR") and "n_src" in out
    finally:
        status, out, _ = sfclab(capsys, "down", lab_name)
    assert status == 0
    assert nothing_left(lab_name)
    status, _, err = sfclab(capsys, "down", lab_name)
    assert status == 2 and "no lab named" in err


def test_down_ends_processes_inside_the_lab(running_lab):
    lab = running_lab({"chain": {"length": 3}})
    procs = [lab.popen(n, ["sleep", "300"], start_new_session=True) for n in ("src", "r1", "dst")]
    # a process that moved itself into the namespace by other means is found too
    helper = subprocess.Popen(["ip", "netns", "exec", lab.netns("dst"), "sleep", "300"])
    time.sleep(0.2)
    name = lab.name
    rep = lab.down()
    assert rep.processes >= 4
    for p in procs + [helper]:
        assert p.wait(timeout=5) is not None
    assert nothing_left(name)


@pytest.mark.parametrize("spec, delays", [
    ("chain: {length: 250}", [0.0, 0.03, 0.1, 0.25]),
    ("chain: {bridges: 6, connect: veth, port: veth}", [0.0, 0.02, 0.08]),
])
def test_kill_9_during_up_then_down_leaves_nothing(tmp_path, lab_name, spec, delays):
    """SIGKILL ``sfclab up`` at several moments after its journal exists, then ``down``."""
    caught_midway = kill_9_during_up_then_down(tmp_path, lab_name, spec, delays)
    assert caught_midway >= 1  # at least one kill landed while objects existed


BAD = {
    "yaml": "name: {lab}\nnodes: [\n",
    "unknown-key": "name: {lab}\nchain: {{length: 3}}\nextra: 1\n",
    "unknown-kind": "name: {lab}\nnodes:\n  a: {{kind: switchh}}\n",
    "unknown-node": "name: {lab}\nnodes:\n  a: {{kind: host}}\nlinks:\n  - endpoints: [a, b]\n",
    "duplicate": "name: {lab}\nnodes:\n  a: {{kind: host}}\n  a: {{kind: host}}\n",
    "negative-mtu": "name: {lab}\nnodes:\n  a: {{kind: host}}\n  b: {{kind: host}}\nlinks:\n"
                    "  - endpoints: [a, b]\n    mtu: -1\n",
    "overlap": "name: {lab}\nnodes:\n  a: {{kind: host}}\n  b: {{kind: host}}\n  c: {{kind: host}}\n"
               "links:\n  - endpoints: [{{node: a, address: 198.18.0.1/16}}, b]\n"
               "  - endpoints: [{{node: a, address: 198.18.5.1/24}}, c]\n",
    "short-chain": "name: {lab}\nchain: {{length: 1}}\n",
    "bridge-loop": "name: {lab}\nnodes:\n  x: {{kind: linux-bridge}}\n  y: {{kind: linux-bridge}}\n"
                   "  h: {{kind: host}}\nlinks:\n  - endpoints: [h, x]\n  - endpoints: [x, y]\n"
                   "  - endpoints: [y, x]\n",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_and_creates_nothing(tmp_path, capsys, lab_name, case):
    f = write(tmp_path, "bad.yaml", BAD[case].format(lab=lab_name))
    status, out, err = sfclab(capsys, "up", f)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sfclab: error: {f}")
    assert nothing_left(lab_name)
    status, _, _ = sfclab(capsys, "down", lab_name)
    assert status == 2  # no state was written either
    status, _, err2 = sfclab(capsys, "validate", f)
    assert status == 2 and err2 == err


def test_kernel_error_rolls_back_and_names_the_object(tmp_path, capsys, lab_name):
    # the kernel refuses native XDP on a veth whose peer's MTU passes what one page holds: the
    # forwarder goes where labelled frames arrive, f1's eth0 (from src); the error names that
    # node and port, and everything made before is rolled back
    f = write(tmp_path, "lab.yaml", f"name: {lab_name}\nmtu: 9000\nnodes:\n"
              "  src: {kind: host}\n  f1: {kind: firewall, rules: []}\n  dst: {kind: host}\n"
              "links:\n  - endpoints: [src, f1]\n  - endpoints: [f1, dst]\n"
              "chains:\n  c:\n    classifiers: [{ingress: src, proto: udp, dport: 7000}]\n"
              "    functions: [f1]\n    egress: dst\n")
    status, _, err = sfclab(capsys, "up", f)
    assert status == 1
    assert "f1" in err and "eth0" in err and "MTU" in err, err
    assert nothing_left(lab_name)
    assert not os.path.exists(os.path.join(os.environ["SFCLAB_STATE_DIR"], "labs", lab_name))


def test_foreign_namespace_is_never_adopted(tmp_path, capsys, lab_name):
    from sfclab.plan.names import netns_name

    squatter = netns_name(lab_name, "src")
    netns.create(squatter).close()
    try:
        f = write(tmp_path, "lab.yaml", f"name: {lab_name}\nchain: {{length: 2}}\n")
        status, _, err = sfclab(capsys, "up", f)
        assert status == 2 and "will not adopt" in err
        assert netns.exists(squatter)  # left alone
        assert not netns.exists(netns_name(lab_name, "dst"))
    finally:
        netns.delete(squatter)


def test_help_shows_examples(capsys):
    status, out, _ = sfclab(capsys, "--help")
    assert "examples:" in out and "sfclab up" in out
    status, out, _ = sfclab(capsys, "up", "--help")
    assert status == 0 and "example:" in out
