"""Bad input, table-driven: every case exits 2 with one located line and leaves nothing behind.

Each lab file goes through ``validate`` and ``up``; each command line runs as given.  After
each case the machine is compared with a snapshot taken before: namespaces, root interfaces,
OVS bridges, processes in any namespace, cgroups, lock files and bpffs pins.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus

pytestmark = pytest.mark.serial  # compares the whole machine before and after

TWO = "nodes:\n  a: {kind: host}\n  b: {kind: host}\n"
LINK = "links:\n  - endpoints: [a, b]\n"


def node(body: str) -> str:
    """A lab with hosts a, b and node f (``body``) between them."""
    return ("name: bad\nnodes:\n  a: {kind: host}\n  b: {kind: host}\n  f: " + body + "\n"
            "links:\n  - endpoints: [a, f]\n  - endpoints: [f, b]\n")


def link(body: str, nodes: str = TWO) -> str:
    return "name: bad\n" + nodes + "links:\n  - " + body + "\n"


OVS2 = "nodes:\n  a: {kind: host}\n  o: {kind: ovs-bridge}\n  p: {kind: ovs-bridge}\n"

#: (id, lab file text, place the error must name (or None: the file alone), words it must say)
LABS: list[tuple[str, str, str | None, str]] = [
    # --- the document itself
    ("not-yaml", "name: x\nnodes: {a: {kind: host}\n", None, "not valid YAML"),
    ("a-list", "- a\n- b\n", None, "expected a mapping"),
    ("a-scalar", "hello\n", None, "expected a mapping"),
    ("empty", "", None, "expected a mapping"),
    ("duplicate-key", "name: x\nname: y\n", "name", "duplicate key"),
    ("duplicate-node", "name: x\nnodes:\n  a: {kind: host}\n  a: {kind: host}\n", "nodes.a",
     "duplicate key"),
    ("unknown-top-key", "name: x\ncolour: red\n", "colour", "unknown key"),
    ("tab-indent", "name: x\nnodes:\n\ta: {kind: host}\n", None, "not valid YAML"),
    ("recursive-alias", "name: x\nloop: &n [*n]\n", "loop[0]", "refers to a value that"),
    ("deep-nesting", "name: x\nz: " + "[" * 80 + "]" * 80 + "\n", "z", "levels of nesting"),
    ("alias-bomb", "name: x\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9) if p else ', '.join(['lol'] * 9)}]\n"
        for p, c in zip([""] + list("abcdefgh"), "abcdefghi")), "g", "YAML aliases"),
    # --- the name
    ("no-name", TWO, "name", "missing key 'name'"),
    ("name-space", "name: 'bad name'\n" + TWO, "name", "expected a name"),
    ("name-slash", "name: a/b\n" + TWO, "name", "expected a name"),
    ("name-dots", "name: '..'\n" + TWO, "name", "expected a name"),
    ("name-colon", "name: 'a:b'\n" + TWO, "name", "expected a name"),
    ("name-leading-dash", "name: -x\n" + TWO, "name", "expected a name"),
    ("name-too-long", "name: " + "x" * 33 + "\n" + TWO, "name", "at most 32"),
    ("name-number", "name: 5\n" + TWO, "name", "expected a string"),
    ("name-list", "name: [a]\n" + TWO, "name", "expected a string"),
    ("name-empty", "name: ''\n" + TWO, "name", "expected a name"),
    # --- nodes
    ("no-nodes", "name: x\n", "nodes", "at least one node"),
    ("nodes-list", "name: x\nnodes: [a, b]\n", "nodes", "expected a mapping"),
    ("node-scalar", "name: x\nnodes:\n  a: host\n", "nodes.a", "expected a mapping"),
    ("node-no-kind", "name: x\nnodes:\n  a: {}\n", "nodes.a", "missing key 'kind'"),
    ("node-unknown-kind", "name: x\nnodes:\n  a: {kind: hots}\n", "nodes.a.kind",
     "unknown kind 'hots'"),
    ("node-kind-number", "name: x\nnodes:\n  a: {kind: 5}\n", "nodes.a.kind", "unknown kind"),
    ("node-name-colon", "name: x\nnodes:\n  'a:b': {kind: host}\n", "nodes.a:b",
     "expected a node name"),
    ("node-name-slash", "name: x\nnodes:\n  'a/b': {kind: host}\n", "nodes.a/b",
     "expected a node name"),
    ("node-name-long", "name: x\nnodes:\n  " + "n" * 49 + ": {kind: host}\n",
     "nodes." + "n" * 49, "at most 48"),
    ("node-name-dash", "name: x\nnodes:\n  -n: {kind: host}\n", "nodes.-n",
     "expected a node name"),
    ("host-extra-key", "name: x\nnodes:\n  a: {kind: host, cpu: 1}\n", "nodes.a.cpu",
     "unknown key"),
    ("ovs-datapath", "name: x\nnodes:\n  o: {kind: ovs-bridge, datapath: fast}\n",
     "nodes.o.datapath", "expected one of"),
    ("bridge-extra-key", "name: x\nnodes:\n  s: {kind: linux-bridge, stp: true}\n",
     "nodes.s.stp", "unknown key"),
    # --- links
    ("links-mapping", "name: x\n" + TWO + "links: {a: b}\n", "links", "expected a list"),
    ("link-scalar", "name: x\n" + TWO + "links:\n  - a\n", "links[0]", "expected a mapping"),
    ("link-no-endpoints", link("{mtu: 1500}"), "links[0].endpoints", "missing key"),
    ("link-one-end", link("endpoints: [a]"), "links[0].endpoints", "at least 2"),
    ("link-three-ends", "name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\n"
     "  c: {kind: host}\nlinks:\n  - endpoints: [a, b, c]\n", "links[0].endpoints", "at most 2"),
    ("link-unknown-node", link("endpoints: [a, zz]"), "links[0].endpoints[1]",
     "unknown node 'zz'"),
    ("link-self", link("endpoints: [a, a]"), "links[0].endpoints", "two different nodes"),
    ("link-mtu-low", link("endpoints: [a, b]\n    mtu: 10"), "links[0].mtu", "at least 68"),
    ("link-mtu-high", link("endpoints: [a, b]\n    mtu: 70000"), "links[0].mtu", "at most 65535"),
    ("link-mtu-text", link("endpoints: [a, b]\n    mtu: big"), "links[0].mtu", "whole number"),
    ("link-unknown-key", link("endpoints: [a, b]\n    speed: 10G"), "links[0].speed",
     "unknown key"),
    ("link-port-ns-ns", link("endpoints: [a, b]\n    port: internal"), "links[0].port",
     "applies only"),
    ("link-connect-ns-ns", link("endpoints: [a, b]\n    connect: patch"), "links[0].connect",
     "applies only"),
    ("link-port-value", link("endpoints: [a, o]\n    port: tap", OVS2), "links[0].port",
     "expected one of"),
    ("link-connect-value", link("endpoints: [o, p]\n    connect: wire", OVS2),
     "links[0].connect", "expected one of"),
    ("patch-offloads", link("endpoints: [{node: o, tso: off}, p]", OVS2),
     "links[0].endpoints[0]", "patch ports have no offloads"),
    ("internal-bridge-offloads", link("endpoints: [a, {node: o, gro: off}]\n    port: internal",
                                      OVS2), "links[0].endpoints[1]", "only the namespace end"),
    ("internal-ifname", link("endpoints: ['a:in0', o]\n    port: internal", OVS2),
     "links[0].endpoints[0]", "keeps its OVS port name"),
    ("bridge-address", link("endpoints: [a, {node: o, address: 198.18.0.1/24}]", OVS2),
     "links[0].endpoints[1].address", "bridge ports have no address"),
    ("bridge-loop", "name: x\nnodes:\n  o: {kind: ovs-bridge}\n  p: {kind: ovs-bridge}\n"
     "  q: {kind: ovs-bridge}\nlinks:\n  - endpoints: [o, p]\n  - endpoints: [p, q]\n"
     "  - endpoints: [q, o]\n", "links[2]", "bridge loop"),
    ("ifname-long", link("endpoints: ['a:averyveryverylongname', b]"),
     "links[0].endpoints[0].interface", "15"),
    ("ifname-slash", link("endpoints: ['a:e/0', b]"), "links[0].endpoints[0].interface",
     "interface name"),
    ("ifname-twice", "name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\n  c: {kind: host}\n"
     "links:\n  - endpoints: ['a:x0', b]\n  - endpoints: ['a:x0', c]\n",
     "links[1].endpoints[0]", "already used"),
    ("offload-value", link("endpoints: [{node: a, tso: maybe}, b]"),
     "links[0].endpoints[0].tso", "true or false"),
    ("endpoint-unknown-key", link("endpoints: [{node: a, vlan: 5}, b]"),
     "links[0].endpoints[0].vlan", "unknown key"),
    ("endpoint-no-node", link("endpoints: [{address: 198.18.0.1/24}, b]"),
     "links[0].endpoints[0].node", "missing key"),
    # --- addresses
    ("addr-text", link("endpoints: [{node: a, address: here}, b]"),
     "links[0].endpoints[0].address", "IPv4 address with its prefix"),
    ("addr-loopback", link("endpoints: [{node: a, address: 127.0.0.5/8}, b]"),
     "links[0].endpoints[0].address", "loopback"),
    ("addr-multicast", link("endpoints: [{node: a, address: 224.0.0.5/24}, b]"),
     "links[0].endpoints[0].address", "multicast"),
    ("addr-everything", link("endpoints: [{node: a, address: 0.0.0.1/0}, b]"),
     "links[0].endpoints[0].address", "expected a unicast"),
    ("addr-this-net", link("endpoints: [{node: a, address: 0.1.2.3/24}, b]"),
     "links[0].endpoints[0].address", "expected a unicast"),
    ("addr-link-local", link("endpoints: [{node: a, address: 169.254.1.1/16}, b]"),
     "links[0].endpoints[0].address", "link-local"),
    ("addr-reserved", link("endpoints: [{node: a, address: 240.0.0.1/24}, b]"),
     "links[0].endpoints[0].address", "reserved"),
    ("addr-short-prefix", link("endpoints: [{node: a, address: 198.18.0.1/4}, b]"),
     "links[0].endpoints[0].address", "expected a"),
    ("addr-network", link("endpoints: [{node: a, address: 198.18.0.0/24}, b]"),
     "links[0].endpoints[0].address", "network or broadcast"),
    ("addr-broadcast", link("endpoints: [{node: a, address: 198.18.0.255/24}, b]"),
     "links[0].endpoints[0].address", "network or broadcast"),
    ("addr-twice", link("endpoints: [{node: a, address: 198.18.0.1/24}, "
                        "{node: b, address: 198.18.0.1/24}]"),
     "links[0].endpoints[1].address", "already given"),
    ("addr-other-subnet", link("endpoints: [{node: a, address: 198.18.0.1/24}, "
                               "{node: b, address: 198.18.5.1/24}]"),
     "links[0].endpoints[1].address", "expected an address in"),
    ("addr-overlap", "name: x\nnodes:\n  a: {kind: host}\n  b: {kind: host}\n  c: {kind: host}\n"
     "links:\n  - endpoints: [{node: a, address: 198.18.0.1/24}, b]\n"
     "  - endpoints: [{node: a, address: 198.18.0.129/25}, c]\n",
     "links[1].endpoints[0].address", "overlaps"),
    ("pool-loopback", "name: x\naddressing: {pool: 127.0.0.0/8}\n" + TWO + LINK,
     "addressing.pool", "loopback"),
    ("pool-text", "name: x\naddressing: {pool: lots}\n" + TWO + LINK, "addressing.pool",
     "IPv4 network"),
    ("pool-prefix", "name: x\naddressing: {prefix: 31}\n" + TWO + LINK, "addressing.prefix",
     "at most 30"),
    ("pool-exhausted", "name: x\naddressing: {pool: 198.18.0.0/24, prefix: 24}\nnodes:\n"
     "  a: {kind: host}\n  r: {kind: router}\n  b: {kind: host}\nlinks:\n"
     "  - endpoints: [a, r]\n  - endpoints: [r, b]\n", None, "addressing"),
    ("mtu-top", "name: x\nmtu: 20\n" + TWO + LINK, "mtu", "at least 68"),
    # --- the chain shorthand
    ("chain-scalar", "name: x\nchain: 5\n", "chain", "expected a mapping"),
    ("chain-length-1", "name: x\nchain: {length: 1}\n", "chain.length", "from 2"),
    ("chain-length-huge", "name: x\nchain: {length: 100000}\n", "chain.length", "from 2"),
    ("chain-both", "name: x\nchain: {length: 3, bridges: 2}\n", "chain", "exactly one"),
    ("chain-neither", "name: x\nchain: {link: veth}\n", "chain", "exactly one"),
    ("chain-link", "name: x\nchain: {length: 3, link: wire}\n", "chain.link", "expected one of"),
    ("chain-bridges-0", "name: x\nchain: {bridges: 0}\n", "chain.bridges", "from 1"),
    ("chain-unknown-key", "name: x\nchain: {length: 3, speed: 1}\n", "chain.speed",
     "unknown key"),
    # --- functions: parameters
    ("router-ttl", node("{kind: router, ttl: 0}"), "nodes.f.ttl", "at least 1"),
    ("router-rp", node("{kind: router, rp_filter: sometimes}"), "nodes.f.rp_filter",
     "expected one of"),
    ("router-key", node("{kind: router, ospf: true}"), "nodes.f.ospf", "unknown key"),
    ("fw-backend", node("{kind: firewall, backend: pf}"), "nodes.f.backend", "expected one of"),
    ("fw-policy", node("{kind: firewall, policy: maybe}"), "nodes.f.policy", "expected one of"),
    ("fw-hooks-empty", node("{kind: firewall, hooks: []}"), "nodes.f.hooks", "at least 1"),
    ("fw-hooks-twice", node("{kind: firewall, hooks: [forward, forward]}"), "nodes.f",
     "each hook at most once"),
    ("fw-rule-action", node("{kind: firewall, rules: [{proto: udp}]}"),
     "nodes.f.rules[0].action", "missing key"),
    ("fw-rule-proto", node("{kind: firewall, rules: [{action: drop, proto: sctp2}]}"),
     "nodes.f.rules[0].proto", "expected one of"),
    ("fw-rule-port-name", node("{kind: firewall, rules: [{action: drop, proto: tcp, "
                               "dport: http}]}"), "nodes.f.rules[0].dport",
     "expected a port or port range"),
    ("fw-rule-port-high", node("{kind: firewall, rules: [{action: drop, proto: tcp, "
                               "dport: 70000}]}"), "nodes.f.rules[0].dport", "0 to 65535"),
    ("fw-rule-port-back", node("{kind: firewall, rules: [{action: drop, proto: tcp, "
                               "dport: 2000-1000}]}"), "nodes.f.rules[0].dport",
     "not above its last"),
    ("fw-rule-port-noproto", node("{kind: firewall, rules: [{action: drop, dport: 80}]}"),
     "nodes.f.rules[0]", "need proto"),
    ("fw-rule-prefix", node("{kind: firewall, rules: [{action: drop, src: 10.0.0.1/8}]}"),
     "nodes.f.rules[0].src", "expected a prefix such as '198.18.1.0/24'"),
    ("fw-rules-mapping", node("{kind: firewall, rules: {a: 1}}"), "nodes.f.rules",
     "expected a list"),
    ("fw-set-iptables", node("{kind: firewall, backend: iptables, set: true}"), "nodes.f",
     "needs backend: nftables"),
    ("fw-generate-count", node("{kind: firewall, generate: {count: -1, type: stateless}}"),
     "nodes.f.generate.count", "expected a number"),
    ("nat-no-outside", node("{kind: nat}"), "nodes.f.outside", "missing key"),
    ("nat-outside-stranger", node("{kind: nat, outside: zz}"), "nodes.f.outside",
     "not a neighbour"),
    ("nat-forward-to", node("{kind: nat, outside: b, forward: [{proto: tcp, port: 80, "
                            "to: nowhere}]}"), "nodes.f.forward[0].to", "ADDRESS[:PORT]"),
    ("shaper-no-rate", node("{kind: shaper}"), "nodes.f", "rate is required"),
    ("shaper-rate-unit", node("{kind: shaper, rate: 50parsecs}"), "nodes.f.rate",
     "expected a rate"),
    ("shaper-rate-zero", node("{kind: shaper, rate: 0mbit}"), "nodes.f.rate", "greater than 0"),
    ("shaper-rate-inf", node("{kind: shaper, rate: .inf}"), "nodes.f.rate", "at most 1tbit"),
    ("shaper-rate-overflow", node("{kind: shaper, rate: 1e400mbit}"), "nodes.f.rate",
     "at most 1tbit"),
    ("shaper-rate-tiny", node("{kind: shaper, rate: 1bit}"), "nodes.f.rate", "at least 8"),
    ("shaper-rate-bool", node("{kind: shaper, rate: true}"), "nodes.f.rate", "expected a rate"),
    ("shaper-toward", node("{kind: shaper, rate: 10mbit, toward: zz}"), "nodes.f.toward",
     "not a neighbour"),
    ("shaper-ceil-tbf", node("{kind: shaper, rate: 10mbit, ceil: 20mbit, discipline: tbf}"),
     "nodes.f", "htb setting"),
    ("shaper-ceil-low", node("{kind: shaper, rate: 10mbit, ceil: 5mbit}"), "nodes.f",
     "at least rate"),
    ("shaper-burst", node("{kind: shaper, rate: 10mbit, burst: 2000G}"), "nodes.f.burst",
     "at most 1T"),
    ("shaper-discipline", node("{kind: shaper, rate: 10mbit, discipline: cake}"),
     "nodes.f.discipline", "expected one of"),
    ("dpi-queue", node("{kind: dpi, queue: -3}"), "nodes.f.queue", "expected a number"),
    ("dpi-memory-tiny", node("{kind: dpi, memory: 1}"), "nodes.f.memory", "at least 8M"),
    ("dpi-cpu-zero", node("{kind: dpi, cpu: 0}"), "nodes.f.cpu", "more than 0"),
    ("dpi-memory-text", node("{kind: dpi, memory: lots}"), "nodes.f.memory", "expected a size"),
    ("tun-no-exec", node("{kind: tun}"), "nodes.f.exec", "missing key"),
    ("tun-exec-missing", node("{kind: tun, exec: /nonexistent/prog}"), "nodes.f.exec",
     "not found"),
    ("tun-exec-empty", node("{kind: tun, exec: ''}"), "nodes.f.exec", "not empty"),
    ("tun-exec-quote", node("{kind: tun, exec: 'cat \"'}"), "nodes.f.exec", "shell could split"),
    ("tun-device-long", node("{kind: tun, exec: /bin/cat, device: averyveryverylongname}"),
     "nodes.f.device", "interface name"),
    ("tun-device-clash", node("{kind: tun, exec: /bin/cat, device: eth0}"), "nodes.f.device",
     "does not use already"),
    ("tun-table", node("{kind: tun, exec: /bin/cat, table: 254}"), "nodes.f.table",
     "kernel's"),
    ("tun-memory", node("{kind: tun, exec: /bin/cat, memory: 1}"), "nodes.f.memory",
     "at least 8M"),
]


def _ls(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def snapshot() -> dict[str, list[str]]:
    """What a failed command must not have changed."""
    def run(argv: list[str]) -> list[str]:
        cp = subprocess.run(argv, capture_output=True, text=True, check=False)
        return sorted(cp.stdout.split())
    state = os.environ.get("SFCLAB_STATE_DIR", "/run/sfclab")
    tools = {"sfcgen", "iperf3", "sfc-dpi", "sfc-droptrace", "ovs-vswitchd"}
    procs = []
    for pid in _ls("/proc"):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm in tools:
            procs.append(f"{comm}:{pid}")
    return {"processes": sorted(procs),"netns": _ls("/run/netns"), "links": run(["ip", "-o", "-br", "link", "show"]),
            "labs": _ls(f"{state}/labs"), "cgroups-cpu": _ls("/sys/fs/cgroup/cpu"),
            "cgroups-memory": _ls("/sys/fs/cgroup/memory"), "bpffs": _ls("/sys/fs/bpf"),
            "ovs": run(["ovs-vsctl", "--timeout=3", "list-br"])
            if os.path.exists("/var/run/openvswitch/db.sock") else []}


def one_located_line(err: str, file_or_place: str | None) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err
    assert len(lines) >= 1
    msg = lines[-1]
    assert msg.startswith("sfclab: error: "), err
    assert "internal error" not in msg, err
    if file_or_place:
        assert file_or_place in msg, msg
    return msg


@pytest.mark.parametrize("case, text, place, words", LABS, ids=[c[0] for c in LABS])
@pytest.mark.parametrize("command", ["validate", "up"])
def test_bad_lab_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str,
                      case: str, text: str, place: str | None, words: str) -> None:
    f = tmp_path / f"{case}.yaml"
    f.write_text(textwrap.dedent(text))
    before = snapshot()
    status = main([command, str(f)])
    err = capsys.readouterr().err
    assert status == ExitStatus.BAD_INPUT, err
    msg = one_located_line(err, str(f))
    if place:
        assert re.search(rf": {re.escape(place)}[:.\[]", msg), msg
    assert words in msg, msg
    assert snapshot() == before


def test_lab_file_encodings_and_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = {"latin1.yaml": "name: café\n".encode("latin-1"),
             "utf16.yaml": "name: x\n".encode("utf-16"),
             "binary.yaml": bytes(range(256)),
             "big.yaml": b"name: x\n" + b"#" * (17 * 1024 * 1024)}
    before = snapshot()
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        for command in ("validate", "up"):
            assert main([command, str(tmp_path / name)]) == ExitStatus.BAD_INPUT
            msg = one_located_line(capsys.readouterr().err, str(tmp_path / name))
            assert "expected" in msg
    assert main(["validate", "/dev/zero"]) == ExitStatus.BAD_INPUT
    assert "at most 16 MiB" in one_located_line(capsys.readouterr().err, "/dev/zero")
    assert main(["validate", str(tmp_path / "missing.yaml")]) == ExitStatus.BAD_INPUT
    assert "cannot read" in one_located_line(capsys.readouterr().err, "missing.yaml")
    assert snapshot() == before


NAMES = ["../x", "../../../tmp", "/etc", "a/b", ".", "..", "-x", "a:b", "a b", "x" * 40, ""]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("argv", [["down", "{}"], ["inspect", "{}"],
                                  ["exec", "{}", "src", "--", "true"], ["graph", "{}"]])
def test_lab_names_on_the_command_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       argv: list[str], name: str) -> None:
    """A lab name is never a path: ``../``, absolute and otherwise bad names are refused
    before anything is read or removed (a directory named like the target survives)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "plan.json").write_text("{}")
    os.chdir(tmp_path)  # graph reads a FILE argument: keep relative names away from real files
    before = snapshot()
    status = main([a.format(name) for a in argv])
    err = capsys.readouterr().err
    assert status == ExitStatus.BAD_INPUT, err
    one_located_line(err, None)
    assert (victim / "plan.json").exists()
    assert snapshot() == before


CLI: list[tuple[str, list[str], str]] = [
    ("no-command", [], ""),
    ("unknown-command", ["frobnicate"], "invalid choice"),
    ("unknown-option", ["ls", "--colour"], "unrecognized arguments"),
    ("up-no-file", ["up"], "required"),
    ("down-nothing", ["down"], "give a lab name or --all"),
    ("down-unknown", ["down", "nosuchlab"], "no lab named"),
    ("inspect-unknown", ["inspect", "nosuchlab"], "no lab named"),
    ("exec-unknown", ["exec", "nosuchlab", "src", "--", "true"], "no lab named"),
    ("graph-format", ["graph", "scenarios/chain5.yaml", "--format", "png"], "invalid choice"),
    ("validate-kind", ["validate", "scenarios/chain5.yaml", "--kind", "frob"], "invalid choice"),
    ("traffic-no-lab", ["traffic", "rate"], "required"),
    ("results-action", ["results", "frob"], "invalid choice"),
]


@pytest.mark.parametrize("case, argv, words", CLI, ids=[c[0] for c in CLI])
def test_bad_command_lines(capsys: pytest.CaptureFixture[str], case: str, argv: list[str],
                           words: str) -> None:
    before = snapshot()
    status = main(argv)
    err = capsys.readouterr().err
    assert status == ExitStatus.BAD_INPUT, err
    assert "Traceback" not in err
    assert words in err, err
    assert snapshot() == before


def test_read_only_commands_never_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``results`` and ``report`` refuse what is not an sfclab database and leave it as it was;
    ``report --out`` refuses a file or a place it cannot write."""
    import sqlite3

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t (x)")
    text = tmp_path / "text.db"
    text.write_text("hello\n")
    for db in (empty, foreign, text):
        before = db.read_bytes()
        for argv in (["results", "ls"], ["results", "show"], ["results", "export"],
                     ["report", "--out", str(tmp_path / "r")]):
            assert main([*argv, "--db", str(db)]) == ExitStatus.BAD_INPUT
            one_located_line(capsys.readouterr().err, str(db))
            assert db.read_bytes() == before
            assert not (tmp_path / "r").exists()
    assert main(["results", "ls", "--db", str(tmp_path / "missing.db")]) == ExitStatus.BAD_INPUT
    assert not (tmp_path / "missing.db").exists()
    capsys.readouterr()
    from sfclab.experiments.store import Store

    good = tmp_path / "good.db"
    Store(good).close()
    for out in (str(text), "/proc/sfclab-no/report"):
        assert main(["report", "--db", str(good), "--out", out]) == ExitStatus.BAD_INPUT
        assert "--out" in one_located_line(capsys.readouterr().err, None)


EXP_OK = "name: e\nlab: {name: ebad, chain: {length: 3}}\nmeasure: {type: iperf, duration: 1}\n"

#: (id, experiment file text, place, words)
EXPERIMENTS: list[tuple[str, str, str | None, str]] = [
    ("no-name", "lab: {name: a, chain: {length: 2}}\nmeasure: {type: iperf}\n", "name",
     "missing key"),
    ("bad-name", EXP_OK.replace("name: e\n", "name: 'e e'\n"), "name", "expected a name"),
    ("no-lab", "name: e\nmeasure: {type: iperf}\n", "lab", "missing key"),
    ("no-measure", "name: e\nlab: {name: a, chain: {length: 2}}\n", "measure", "missing key"),
    ("measure-type", EXP_OK.replace("type: iperf", "type: speed"), "measure.type",
     "expected one of"),
    ("measure-key", EXP_OK.replace("duration: 1", "duration: 1, colour: red"),
     "measure.colour", "unknown key"),
    ("measure-duration", EXP_OK.replace("duration: 1", "duration: -1"), "measure.duration",
     "more than 0"),
    ("measure-bitrate", EXP_OK.replace("duration: 1", "bitrate: abc"), "measure.bitrate",
     "expected a bit rate"),
    ("rate-rates", EXP_OK.replace("{type: iperf, duration: 1}", "{type: rate, rates: [fast]}"),
     "measure.rates[0]", "expected a packet rate"),
    ("rate-inf", EXP_OK.replace("{type: iperf, duration: 1}", "{type: rate, rates: [.inf]}"),
     "measure.rates[0]", "expected a packet rate"),
    ("ndr-loss", EXP_OK.replace("{type: iperf, duration: 1}", "{type: ndr, ndr_loss: 200}"),
     "measure.ndr_loss", "at most 100"),
    ("ndr-goals", EXP_OK.replace("{type: iperf, duration: 1}",
                                 "{type: ndr, ndr_loss: 1, pdr_loss: 0.5}"), "measure",
     "at least the NDR goal"),
    ("pair-same", EXP_OK.replace("{type: iperf, duration: 1}",
                                 "{type: rate, rates: [1k], pairs: ['src:src']}"),
     "measure.pairs", "two different"),
    ("size", EXP_OK.replace("{type: iperf, duration: 1}", "{type: rate, rates: [1k], size: 9}"),
     "measure.size", "64 to 9018"),
    ("engine", EXP_OK.replace("{type: iperf, duration: 1}",
                              "{type: rate, rates: [1k], engine: dpdk}"), "measure.engine",
     "expected one of"),
    ("sweep-path", EXP_OK + "sweep: {'a..b': [1]}\n", "sweep.a..b", "dotted path"),
    ("sweep-empty", EXP_OK + "sweep: {chain.length: []}\n", "sweep.chain.length",
     "at least one value"),
    ("sweep-twice", EXP_OK + "sweep: {chain.length: [2, 2]}\n", "sweep.chain.length",
     "appears twice"),
    ("sweep-measure", EXP_OK + "sweep: {measure.flows: [1, 0]}\n", "sweep.measure.flows[1]",
     "at least 1"),
    ("inline-lab-kind", "name: e\nlab:\n  name: ebad\n  nodes:\n    a: {kind: hots}\n"
     "measure: {type: iperf}\n", "lab.nodes.a.kind", "unknown kind"),
    ("inline-lab-name", "name: e\nlab: {name: '../x', chain: {length: 2}}\nmeasure: "
     "{type: iperf}\n", "lab.name", "expected a name"),
    ("lab-file-missing", "name: e\nlab: nowhere.yaml\nmeasure: {type: iperf}\n", "lab",
     "no lab file"),
    ("repetitions", EXP_OK + "repetitions: 0\n", "repetitions", "at least 1"),
    ("not-utf8", "name: caf\xe9\n", None, "UTF-8"),
]


@pytest.mark.parametrize("case, text, place, words", EXPERIMENTS, ids=[c[0] for c in EXPERIMENTS])
def test_bad_experiment_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                             text: str, place: str | None, words: str) -> None:
    f = tmp_path / f"{case}.yaml"
    f.write_bytes(text.encode("latin-1") if case == "not-utf8" else text.encode())
    db = tmp_path / "results.db"
    before = snapshot()
    status = main(["run", str(f), "--db", str(db)])
    err = capsys.readouterr().err
    assert status == ExitStatus.BAD_INPUT, err
    msg = one_located_line(err, str(f))
    if place:
        assert re.search(rf": {re.escape(place)}[:.\[ ]", msg), msg
    assert words in msg, msg
    assert not db.exists(), "a results database was made for an experiment that is not valid"
    assert snapshot() == before
