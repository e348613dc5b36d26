"""The agent's verbs are one table (:mod:`sfclab.live.runtime.agent_verbs`), joined from each agent
module's own verbs; no module adds to another's at import or at run time."""

from __future__ import annotations

import io
import json

import pytest

from sfclab.hosts.ssh import AGENT_MODULE, SshTarget
from sfclab.realize import agent, agent_scan, agent_sfc
from sfclab.live.runtime import (agent_chain, agent_conntrack, agent_containers, agent_health,
                                 agent_proc, agent_verbs)

MODULES = (agent, agent_sfc, agent_scan, agent_chain, agent_conntrack, agent_containers,
           agent_health, agent_proc)


def test_each_module_keeps_its_own_verbs_only():
    assert set(agent.VERBS) == {"check", "up", "down", "inspect"}
    assert set(agent.ARMED) == set()
    owned = [v for m in MODULES for v in m.VERBS]
    assert len(owned) == len(set(owned))  # no verb in two modules


def test_the_table_is_every_modules_verbs():
    assert agent_verbs.VERBS == {v: fn for m in MODULES for v, fn in m.VERBS.items()}
    assert agent_verbs.ARMED == {"chain-switch": agent_chain.switch}


def test_a_verb_declared_twice_is_refused():
    with pytest.raises(ValueError, match="'up' is declared twice"):
        agent_verbs.joined({"up": 1}, {"down": 2}, {"up": 3})


def test_every_call_runs_the_one_table():
    assert AGENT_MODULE == "sfclab.live.runtime.agent_verbs"
    assert SshTarget("h", "198.19.0.1").command("chain-make").endswith(
        "-m sfclab.live.runtime.agent_verbs chain-make")


def test_the_table_dispatches_a_chain_verb_and_names_every_verb(monkeypatch, capsys,
                                                                tmp_path):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert agent_verbs.main(["nothing"]) == 2
    usage = capsys.readouterr().err
    assert "python -m sfclab.live.runtime.agent_verbs" in usage
    assert all(v in usage for v in ("up", "sfc-read", "scan", "chain-make", "chain-switch",
                                    "conntrack-list", "chain-watch"))
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"lab": "nolab"})))
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    assert agent_verbs.main(["chain-health"]) == 0  # a lab with no watcher here
    got = json.loads(capsys.readouterr().out)
    assert (got["watcher"], got["instances"], got["events"]) == (None, {}, [])


def test_a_call_imports_only_its_verbs_module(tmp_path):
    """Each call over SSH is a fresh Python running one verb: ``scan`` imports neither the
    chains' modules nor the spec's (pydantic), which the other verbs need; ``chain-health``
    imports its own module."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SFCLAB_STATE_DIR": str(tmp_path)}
    probe = ("import io, sys; sys.stdin = io.StringIO('{\"lab\": \"nolab\"}'); "
             "from sfclab.live.runtime import agent_verbs; "
             "status = agent_verbs.main([sys.argv[1]]); "
             "print(status, *sorted(m for m in ('pydantic', 'sfclab.live.runtime.agent_chain', "
             "'sfclab.live.runtime.agent_health', 'sfclab.realize.agent_sfc') "
             "if m in sys.modules), file=sys.stderr)")
    for verb, loaded in (("scan", []), ("chain-health", ["sfclab.live.runtime.agent_health"])):
        out = subprocess.run([sys.executable, "-c", probe, verb], capture_output=True,
                             text=True, check=True, env=env)
        status, *mods = out.stderr.split()
        assert status == "0", out.stderr
        assert [m for m in mods if m != "pydantic"] == loaded, out.stderr
        if verb == "scan":
            assert "pydantic" not in mods, out.stderr
