"""``hosts``, ``underlay``, ``tenants``, ``host``/``tenant`` on nodes, ``attach``/``rate`` on
links: what is accepted, and every bad section refused with file, line and place (no root)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError
from sfclab.realize.kinds import load_lab, load_lab_text

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name: h
hosts: {h1: {cpus: 1, memory: 64M}, h2: {address: 198.19.255.20}}
nodes:
  a: {kind: host}
  b: {kind: host, host: h2}
links:
  - endpoints: [a, b]
"""


def lab(text: str):
    return load_lab_text(textwrap.dedent(text), "lab.yaml")


def test_hosts_place_nodes_and_default_to_the_first_host():
    lb = lab(BASE)
    assert {n: s.host for n, s in lb.nodes.items()} == {"a": "h1", "b": "h2"}
    assert lb.hosts["h1"].memory == 64 * 2**20 and lb.hosts["h1"].cpus == 1
    assert str(lb.underlay.subnet) == "198.19.255.0/24" and lb.underlay.mtu == 1500
    assert lb.link_spaces == [None] and lb.tenants == []


def test_a_lab_without_hosts_has_none():
    lb = lab("name: x\nchain: {length: 3}\n")
    assert lb.hosts == {} and lb.underlay is None
    assert all(s.host is None and s.tenants == () for s in lb.nodes.values())


def test_tenants_from_the_section_and_from_nodes():
    lb = lab("""
        name: t
        hosts: {h1: {}}
        tenants: {red: {nodes: [a, r]}}
        nodes:
          a: {kind: host}
          r: {kind: router, tenant: [blue]}
          b: {kind: host, tenant: blue}
          s: {kind: host}
        links:
          - endpoints: [a, r]
          - endpoints: [b, r]
          - endpoints: [r, s]
            attach: shortbridge
            rate: 10mbit
    """)
    assert lb.tenants == ["red", "blue"]
    assert lb.nodes["r"].tenants == ("red", "blue")
    assert lb.link_spaces == ["red", "blue", None]
    assert lb.links[2].attach == "shortbridge" and lb.links[2].rate == 10_000_000
    assert lb.to_dict()["links"][2] == {"endpoints": ["r", "s"], "attach": "shortbridge",
                                        "rate": 10_000_000}


def test_the_scenario_is_valid():
    lb = load_lab(str(ROOT / "scenarios" / "hosts-tenants.yaml"))
    assert len(lb.hosts) == 3 and lb.tenants == ["red", "blue"]


HOSTED = "hosts: {h1: {}, h2: {}}\n"
TWO = "nodes:\n  a: {kind: host}\n  b: {kind: host, host: h2}\n"

BAD = {
    "hosts-list": ("hosts: [h1]\n" + "nodes:\n  a: {kind: host}\n", "hosts", "mapping"),
    "hosts-empty": ("hosts: {}\n" + "nodes:\n  a: {kind: host}\n", "hosts", "mapping"),
    "host-name": ("hosts: {'h:1': {}}\nnodes:\n  a: {kind: host}\n", "hosts.h:1", "host name"),
    "cpus-zero": ("hosts: {h1: {cpus: 0}}\nnodes:\n  a: {kind: host}\n", "hosts.h1.cpus",
                  "at least 1"),
    "memory-small": ("hosts: {h1: {memory: 1k}}\nnodes:\n  a: {kind: host}\n",
                     "hosts.h1.memory", "at least 8M"),
    "memory-bad": ("hosts: {h1: {memory: lots}}\nnodes:\n  a: {kind: host}\n",
                   "hosts.h1.memory", "size"),
    "unknown-host-key": ("hosts: {h1: {disk: 1}}\nnodes:\n  a: {kind: host}\n",
                         "hosts.h1.disk", ""),
    "address-outside": ("hosts: {h1: {address: 10.0.0.1}}\nnodes:\n  a: {kind: host}\n",
                        "hosts.h1.address", "underlay subnet"),
    "address-twice": ("hosts: {h1: {address: 198.19.255.9}, h2: {address: 198.19.255.9}}\n"
                      "nodes:\n  a: {kind: host}\n", "hosts.h2.address", "already"),
    "ssh-no-address": ("hosts: {h1: {ssh: {user: root}}}\nnodes:\n  a: {kind: host}\n",
                       "hosts.h1", "needs its 'address'"),
    "ssh-key-missing": ("hosts: {h1: {ssh: {key: /nonexistent/id}, address: 198.19.255.9}}\n"
                        "nodes:\n  a: {kind: host}\n", "hosts.h1.ssh.key",
                        "private key file"),
    "ssh-known-hosts-folder": ("hosts: {h1: {ssh: {known_hosts: /}, address: 198.19.255.9}}\n"
                               "nodes:\n  a: {kind: host}\n", "hosts.h1.ssh.known_hosts",
                               "a folder"),
    "ssh-port": ("hosts: {h1: {ssh: {port: 0}, address: 198.19.255.9}}\n"
                 "nodes:\n  a: {kind: host}\n", "hosts.h1.ssh.port", "1"),
    "ssh-user": ("hosts: {h1: {ssh: {user: 'a b'}, address: 198.19.255.9}}\n"
                 "nodes:\n  a: {kind: host}\n", "hosts.h1.ssh.user", ""),
    "ssh-key-unknown": ("hosts: {h1: {ssh: {password: x}, address: 198.19.255.9}}\n"
                        "nodes:\n  a: {kind: host}\n", "hosts.h1.ssh.password", ""),
    "ssh-mixed": ("hosts: {h1: {ssh: {}, address: 198.19.255.9}, h2: {}}\n"
                  "nodes:\n  a: {kind: host}\n", "hosts.h2", "all emulated or all"),
    "underlay-alone": ("underlay: {mtu: 9000}\nnodes:\n  a: {kind: host}\n", "underlay",
                       "hosts"),
    "underlay-mtu": ("underlay: {mtu: 100}\n" + HOSTED + "nodes:\n  a: {kind: host}\n",
                     "underlay.mtu", "1280"),
    "underlay-public": ("underlay: {subnet: 8.8.8.0/24}\n" + HOSTED +
                        "nodes:\n  a: {kind: host}\n", "underlay.subnet", "private"),
    "unknown-host": (HOSTED + "nodes:\n  a: {kind: host, host: h9}\n", "nodes.a.host",
                     "unknown host"),
    "host-without-hosts": ("nodes:\n  a: {kind: host, host: h1}\n", "nodes.a.host",
                           "'hosts' section"),
    "attach-without-hosts": ("nodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n"
                             "  - endpoints: [a, b]\n    attach: bridge\n", "links[0].attach",
                             "'hosts' section"),
    "rate-without-hosts": ("nodes:\n  a: {kind: host}\n  b: {kind: host}\nlinks:\n"
                           "  - endpoints: [a, b]\n    rate: 1mbit\n", "links[0].rate",
                           "'hosts' section"),
    "attach-unknown": (HOSTED + TWO + "links:\n  - endpoints: [a, b]\n    attach: gre\n",
                       "links[0].attach", "bridge"),
    "rate-bad": (HOSTED + TWO + "links:\n  - endpoints: [a, b]\n    rate: fast\n",
                 "links[0].rate", "rate"),
    "direct-same-host": (HOSTED + "nodes:\n  a: {kind: host}\n  b: {kind: host}\n"
                         "links:\n  - endpoints: [a, b]\n    attach: direct\n",
                         "links[0].attach", "different hosts"),
    "direct-rate": (HOSTED + TWO + "links:\n  - endpoints: [a, b]\n    attach: direct\n"
                    "    rate: 1mbit\n", "links[0].rate", "no host-context port"),
    "ovs-node": (HOSTED + "nodes:\n  a: {kind: host}\n  o: {kind: ovs-bridge}\n", "nodes.o.kind",
                 "attach: ovs"),
    "tenants-list": (HOSTED + "tenants: [red]\n" + TWO, "tenants", "mapping"),
    "tenant-no-nodes": (HOSTED + "tenants: {red: {nodes: []}}\n" + TWO, "tenants.red.nodes", ""),
    "tenant-unknown-node": (HOSTED + "tenants: {red: {nodes: [a, zz]}}\n" + TWO,
                            "tenants.red.nodes[1]", "unknown node"),
    "tenant-key": (HOSTED + "tenants: {red: {members: [a]}}\n" + TWO, "tenants.red.nodes",
                   "missing"),
    "node-tenant-type": (HOSTED + "nodes:\n  a: {kind: host, tenant: {x: 1}}\n",
                         "nodes.a.tenant", "tenant name"),
    "cross-tenant-link": (HOSTED + "tenants: {red: {nodes: [a]}, blue: {nodes: [b]}}\n" + TWO +
                          "links:\n  - endpoints: [a, b]\n", "links[0]", "cannot reach"),
    "tenant-to-public": (HOSTED + "tenants: {red: {nodes: [a]}}\n" + TWO +
                         "links:\n  - endpoints: [a, b]\n", "links[0]", "cannot reach"),
    "shared-bridge": (HOSTED + "tenants: {red: {nodes: [sw, a]}, blue: {nodes: [sw]}}\n"
                      "nodes:\n  a: {kind: host}\n  sw: {kind: linux-bridge}\n",
                      "nodes.sw", "cannot be shared"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_hosts_and_tenants_sections_name_the_place(case):
    body, place, words = BAD[case]
    with pytest.raises(SpecError) as ei:
        lab("name: bad\n" + body)
    e = ei.value
    assert e.file == "lab.yaml" and e.place == place, (e.place, str(e))
    assert words in str(e)
    assert e.line is not None


@pytest.mark.parametrize("command", ["validate", "expand", "up"])
def test_a_bad_hosts_file_exits_2_with_the_place(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path / "state"))
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\n" + HOSTED + "nodes:\n  a: {kind: host, host: h7}\n")
    assert main([command, str(f)]) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert f"sfclab: error: {f}:4: nodes.a.host: unknown host 'h7'" in err
    assert not (tmp_path / "state" / "labs" / "bad").exists()
