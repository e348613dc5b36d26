"""The host runtime (:mod:`sfclab.realize.runtime`), from a lab file, a plan or a running lab's
journal, without root: which runtime a lab has, and that every runtime has its running-lab
operations (:data:`sfclab.live.runtime.table.LIVE`)."""

from __future__ import annotations

import pytest

from sfclab.plan.build import build_plan
from sfclab.realize.kinds import load_lab_text
from sfclab.realize.runtime import RUNTIMES, kind_for, runtime_for
from sfclab.realize.runtime.base import HostRuntime
from sfclab.realize.runtime.local import LocalRuntime
from sfclab.realize.runtime.ssh import SshRuntime
from sfclab.realize.state import LabState
from sfclab.live.runtime.base import LiveRuntime
from sfclab.live.runtime.table import LIVE, live_for

EMULATED = """
name: emu
hosts: {h1: {}, h2: {}}
nodes:
  a: {kind: host, host: h1}
  b: {kind: host, host: h2}
links:
  - endpoints: [a, b]
"""

PLAIN = """
name: plain
nodes:
  a: {kind: host}
  b: {kind: host}
links:
  - endpoints: [a, b]
"""


def test_a_lab_file_with_ssh_hosts_has_the_ssh_runtime(ssh_lab):
    assert kind_for(ssh_lab) == "ssh"
    rt = runtime_for(ssh_lab)
    assert isinstance(rt, SshRuntime) and rt.state.name == "far" and not rt.here


@pytest.mark.parametrize("text, name", [(EMULATED, "emu"), (PLAIN, "plain")])
def test_a_lab_file_of_emulated_hosts_or_none_has_the_local_runtime(text, name):
    lab = load_lab_text(text, "lab.yaml")
    assert kind_for(lab) == "local"
    rt = runtime_for(lab)
    assert isinstance(rt, LocalRuntime) and rt.state.name == name and rt.here


def test_a_plans_host_has_the_runtime_of_its_kind(ssh_lab):
    far = build_plan(ssh_lab, cpus=[0])
    assert [kind_for(far, h) for h in far.hosts] == ["ssh", "ssh"]
    near = build_plan(load_lab_text(EMULATED, "lab.yaml"), cpus=[0])
    assert [kind_for(near, h) for h in near.hosts] == ["local", "local"]
    # a node on no host is this machine's, whatever the lab's hosts are
    assert kind_for(far, None) == kind_for(near, None) == "local"
    rt = runtime_for(far, far.hosts[1])
    assert isinstance(rt, SshRuntime) and rt.reached_as(far.hosts[1]) == "h2"
    assert runtime_for(near, near.hosts[0]).context(near.hosts[0]) == near.hosts[0].netns


def test_a_running_lab_has_the_runtime_its_journal_names(monkeypatch, tmp_path):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    near, far = LabState("near"), LabState("far")
    for s in (near, far):
        s.dir.mkdir(parents=True)
    near.record([{"op": "netns", "name": "sfclab:near:a"}])
    far.record([{"op": "remote-host", "host": "h1",
                 "target": {"host": "h1", "address": "198.19.255.1"}}])
    assert (kind_for(near), kind_for(far)) == ("local", "ssh")
    assert type(live_for(near)).__name__ == "LocalLive"
    got = live_for(far)
    assert isinstance(got, SshRuntime) and isinstance(got, LiveRuntime)
    assert list(got.targets()) == ["h1"]  # type: ignore[attr-defined]


def test_every_runtime_has_its_running_lab_operations():
    """A runtime added to one table only (a kubernetes row, say) fails here."""
    assert list(LIVE) == list(RUNTIMES)
    for name, rt in RUNTIMES.items():
        assert issubclass(rt, HostRuntime) and rt.kind == name
        assert issubclass(LIVE[name], rt) and issubclass(LIVE[name], LiveRuntime)
        assert not getattr(LIVE[name], "__abstractmethods__", None), name
