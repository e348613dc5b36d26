"""``down`` removes only what proves it is the lab's: a forged or damaged journal names foreign
objects (a namespace of no lab, another live lab's namespace, plain files by absolute and by
``../..`` path, the root namespace through ``/proc/self/ns/net``, a namespace with the lab's
prefix made by hand) and garbage lines; every foreign object stays, each refusal is reported,
and the lab's own objects are still removed."""

from __future__ import annotations

import json
import os
import subprocess
import time

from tests.integration.labtools import nothing_left

from sfclab.api import Lab
from sfclab.cli import main
from sfclab.kernel import netns
from sfclab.plan.names import netns_name
from sfclab.realize.state import LabState


def sfclab(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def forge(lab: str, lines: list[object]) -> None:
    """Append ``lines`` to lab ``lab``'s journal (a dict as JSON, a string as it is)."""
    with open(LabState(lab).dir / "journal", "a") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def hand_made(name: str) -> subprocess.Popen:
    """A namespace made with ``ip netns add`` (as anything else on the host would), with a
    process inside."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    return netns.popen(name, ["sleep", "300"], start_new_session=True)


def test_down_leaves_every_object_the_lab_cannot_prove_is_its_own(capsys, tmp_path, lab_name):
    other = Lab.from_dict({"name": f"{lab_name}o", "chain": {"length": 2}}).up()
    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 3}}).up()
    own = [n for n in ("src", "r1", "dst")]
    own_ns = [lab.netns(n) for n in own]
    foreign = f"own-{lab_name}"  # no lab's prefix
    hand = netns_name(lab_name, "hand")  # the lab's prefix, but not made by sfclab
    victim, victim2 = tmp_path / "victim", tmp_path / "victim2"
    victim.write_text("keep me\n")
    victim2.write_text("keep me too\n")
    procs: list[subprocess.Popen] = []
    try:
        other_proc = other.popen("src", ["sleep", "300"], start_new_session=True)
        own_proc = lab.popen("r1", ["sleep", "300"], start_new_session=True)
        foreign_proc = hand_made(foreign)
        hand_proc = hand_made(hand)
        root_proc = subprocess.Popen(["sleep", "300"])  # in the root namespace
        procs = [other_proc, own_proc, foreign_proc, hand_proc, root_proc]
        dotdot = os.path.relpath(victim2, netns.NETNS_RUN_DIR)
        assert dotdot.startswith("../..")
        forge(lab_name, [
            {"op": "netns", "name": foreign},
            {"op": "netns", "name": other.netns("src")},
            {"op": "netns", "name": str(victim)},
            {"op": "netns", "name": dotdot},
            {"op": "netns", "name": "/proc/self/ns/net"},
            {"op": "netns", "name": hand},
            "this is not JSON {",
            "[1, 2]",
            {"op": "netns"},
            {"name": "no-op-field"},
        ])
        time.sleep(0.1)

        status, out, _ = sfclab(capsys, "down", lab_name, "--json")
        errors = json.loads(out)[lab_name]["errors"]

        # every foreign object is untouched
        assert netns.exists(foreign) and foreign_proc.poll() is None
        assert netns.exists(hand) and hand_proc.poll() is None
        assert netns.exists(other.netns("src")) and other_proc.poll() is None
        assert victim.read_text() == "keep me\n" and victim2.read_text() == "keep me too\n"
        assert root_proc.poll() is None
        # each refusal says which entry and why
        why = {foreign: "not a namespace of lab", other.netns("src"): "not a namespace of lab",
               str(victim): "not a plain name", dotdot: "not a plain name",
               "/proc/self/ns/net": "not a plain name", hand: "carries no mark of sfclab",
               "this is not JSON": "not JSON", "[1, 2]": "not an object",
               '{"op": "netns"}': "field 'name' missing",
               "no-op-field": "unknown kind of entry"}
        for needle, reason in why.items():
            assert any(needle in e and reason in e for e in errors), (needle, errors)
        assert status == 1  # something named in the journal was left: said, not hidden
        # the lab's own objects are all gone, its process too
        assert not any(netns.exists(n) for n in own_ns)
        assert own_proc.wait(timeout=5) is not None
        assert not LabState(lab_name).exists
        # the other lab is intact and goes by its own down
        assert netns.exists(other.netns("dst"))
        status, _, _ = sfclab(capsys, "down", other.name)
        assert status == 0 and nothing_left(other.name)
        assert other_proc.wait(timeout=5) is not None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for name in (foreign, hand):
            if netns.exists(name):
                subprocess.run(["ip", "netns", "del", name], check=False)
        for name in (lab_name, other.name):
            if LabState(name).exists:
                main(["down", name])


def test_down_reports_a_damaged_journal_in_its_text_and_removes_the_rest(capsys, lab_name):
    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 2}}).up()
    spaces = [lab.netns("src"), lab.netns("dst")]
    forge(lab_name, ['{"op": "netns", "name": "sfclab:x', "42", {"op": "container", "name": "c", "node": "src"}])
    status, out, _ = sfclab(capsys, "down", lab_name)
    assert status == 1
    assert f"lab '{lab_name}' removed: 2 namespaces" in out
    for line, reason in ((3, "not JSON"), (4, "not an object"),
                         (5, "not the container name of node 'src'")):
        assert any(w.startswith(f"  warning: journal line {line} ") and reason in w
                   for w in out.splitlines()), (line, out)
    assert not any(netns.exists(n) for n in spaces) and nothing_left(lab_name)


def test_a_recorded_pid_now_outside_the_lab_is_never_signalled(capsys, lab_name):
    """A function's pid record naming a PID that now belongs to an unrelated process (here one
    in the root namespace, as a reused PID would be) is not ended by ``down``."""
    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 3}}).up()
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        d = LabState(lab_name).node_dir("r1")
        d.mkdir(parents=True, exist_ok=True)
        (d / "pids").write_text(json.dumps({"pid": stranger.pid, "argv": ["sleep"]}) + "\n"
                                + "a torn line\n")
        status, out, _ = sfclab(capsys, "down", lab_name)
        assert status == 0, out
        time.sleep(0.2)
        assert stranger.poll() is None
        assert nothing_left(lab_name)
    finally:
        stranger.kill()
        stranger.wait()
        if LabState(lab_name).exists:
            lab.down()


def test_the_ssh_agents_down_checks_its_hosts_journal_the_same_way(lab_name):
    """A host's agent removes its share from its own journal (``agent down``): a foreign
    namespace and a garbage line there are reported in its answer and left alone."""
    from sfclab.realize import agent

    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 2}}).up()
    spaces = [lab.netns("src"), lab.netns("dst")]
    foreign = f"own-{lab_name}"
    proc = hand_made(foreign)
    try:
        forge(lab_name, [{"op": "netns", "name": foreign}, "{not json"])
        answer = agent.down({"lab": lab_name, "token": None})
        assert answer["absent"] is False and answer["namespaces"] == 2
        assert any(foreign in e and "not a namespace of lab" in e for e in answer["errors"])
        assert any("not JSON" in e for e in answer["errors"])
        assert netns.exists(foreign) and proc.poll() is None
        assert not any(netns.exists(n) for n in spaces) and not LabState(lab_name).exists
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["ip", "netns", "del", foreign], check=False)
        if LabState(lab_name).exists:
            main(["down", lab_name])


def test_live_operations_remove_a_namespace_only_with_the_labs_mark(lab_name):
    """``chain rm``, ``host rm`` and a migration's clean-up remove a namespace through
    :func:`~sfclab.realize.teardown.remove_namespace`: another lab's namespace and one with the
    lab's prefix made by hand stay, with their processes; the lab's own goes, with its."""
    from sfclab.realize.teardown import remove_namespace

    other = Lab.from_dict({"name": f"{lab_name}o", "chain": {"length": 2}}).up()
    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 2}}).up()
    hand = netns_name(lab_name, "x1")
    procs = []
    try:
        procs = [other.popen("src", ["sleep", "300"], start_new_session=True), hand_made(hand),
                 lab.popen("src", ["sleep", "300"], start_new_session=True)]
        errors = remove_namespace(lab_name, other.netns("src"))
        assert netns.exists(other.netns("src")) and procs[0].poll() is None
        assert len(errors) == 1 and "not a namespace of lab" in errors[0]
        errors = remove_namespace(lab_name, hand)
        assert netns.exists(hand) and procs[1].poll() is None
        assert len(errors) == 1 and "carries no mark of sfclab" in errors[0]
        assert remove_namespace(lab_name, lab.netns("src")) == []
        assert not netns.exists(lab.netns("src")) and procs[2].wait(timeout=5) is not None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", hand], check=False)
        lab.down()
        other.down()
