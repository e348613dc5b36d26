"""What a health watcher acts on and probes (pure): on this machine's lab every direction and
instance; on a host driven over SSH (its part) the directions whose ingress is there and every
instance placed there (:func:`sfclab.live.health.watch.scope`)."""

from __future__ import annotations

from sfclab.plan.split import split
from sfclab.hosts.ssh import AGENT_MODULE
from sfclab.live.runtime import agent_verbs, ssh as live_ssh
from sfclab.live.health import watch

from .chainplans import line_chain_plan


def _plan():
    plan = line_chain_plan({"src": "h1", "r1": "h1", "f1": "h1", "f2": "h2", "dst": "h2"})
    assert plan.steering is not None
    return plan, plan.steering


def test_a_lab_of_this_machine_watches_every_instance_and_direction():
    plan, sp = _plan()
    dirs, watched = watch.scope(plan, sp)
    assert [d.index for d in dirs] == [d.index for d in sp.directions]
    assert watched == ["f1", "f2"]


def test_a_host_acts_on_its_ingress_directions_and_probes_its_own_instances():
    plan, sp = _plan()
    parts = split(plan)
    for p in parts.values():
        p.hosts[0].emulated = False  # what the agent makes of its part
    dirs, watched = watch.scope(parts["h1"], sp)
    assert [d.ingress for d in dirs] == ["src"] and watched == ["f1"]  # not f2, on h2
    # no ingress on h2, but an instance: its watcher probes it (and tells h1's)
    assert watch.scope(parts["h2"], sp) == ([], ["f2"])


def test_the_health_verbs_are_in_the_agents_one_table():
    assert AGENT_MODULE == agent_verbs.__name__  # what every call over SSH runs
    assert {"chain-watch", "chain-health", "conntrack-list", "conntrack-make"} <= \
        set(agent_verbs.VERBS)


def test_chain_inspect_merges_every_hosts_record(monkeypatch, tmp_path):
    """Each host's watcher and events (tagged with the host), this machine's events, in time
    order, filtered by chain; a host that does not answer is named, not fatal."""
    from sfclab.errors import RealizeError
    from sfclab.hosts.ssh import SshTarget
    from sfclab.realize.runtime.ssh import SshRuntime
    from sfclab.realize.state import LabState
    from sfclab.live import record

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    state = LabState("c")
    state.dir.mkdir(parents=True)
    record.event(state, "chain-added", chain="video")
    ts = {h: SshTarget(h, a) for h, a in (("h1", "198.18.0.1"), ("h2", "198.18.0.2"),
                                          ("h3", "198.18.0.3"))}
    monkeypatch.setattr(SshRuntime, "targets", lambda _rt: ts)
    answers = {
        "h1": {"watcher": 41, "instances": {"m-1": {"alive": False, "stalled": False}},
               "events": [{"time": 0.0, "event": "instance-down", "instance": "m-1"},
                          {"time": 9e12, "event": "failover", "chain": "video"},
                          {"time": 9e12, "event": "failover", "chain": "other"}]},
        "h2": {"watcher": None, "instances": {}, "events": []},
    }

    def call(_rt, t, verb, req, **_kw):
        assert verb == "chain-health" and req == {"lab": "c"}
        if t.host not in answers:
            raise RealizeError(f"host {t.host}: unreachable")
        return answers[t.host]

    monkeypatch.setattr(SshRuntime, "call", call)
    got = live_ssh.SshLive(state).health("video", {"m-1"})
    assert got["watcher"] == {"h1": 41}
    assert got["instances"] == {"m-1": {"alive": False, "stalled": False, "host": "h1"}}
    assert [(e["event"], e.get("host")) for e in got["events"]] == \
        [("instance-down", "h1"), ("chain-added", None), ("failover", "h1")]
    assert list(got["unreachable"]) == ["h3"]
