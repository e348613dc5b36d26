"""The checks ``down`` makes of a journal before it removes anything (no root needed): path
containment, each kind of entry, a damaged journal, and ending processes through a pidfd."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from sfclab.kernel import netns
from sfclab.realize import ownership
from sfclab.realize.state import LabState


def test_a_path_is_contained_only_inside_its_root(tmp_path):
    root = tmp_path / "lab"
    (root / "maps").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_text("x")
    (root / "escape").symlink_to(outside)
    (root / "inner").symlink_to(root / "maps")
    assert ownership.contained(root, root) == root
    assert ownership.contained(root / "maps", root) == root / "maps"
    assert ownership.contained(root / "not-yet", root) == root / "not-yet"
    assert ownership.contained(str(root / "maps" / ".." / ".." / "outside"), root) is None
    assert ownership.contained(root / "maps" / "..", root) is None  # '..' never, even inside
    assert ownership.contained(outside / "file", root) is None
    assert ownership.contained("maps", root) is None  # relative: never joined with anything
    assert ownership.contained(root / "escape", root) is None  # symlink out
    assert ownership.contained(root / "escape" / "file", root) is None
    assert ownership.contained(root / "inner", root) is None  # a link itself is never removed
    assert ownership.contained(tmp_path, root) is None


def test_bpffs_entries_are_the_labs_directory_or_a_hosts_share_in_it(tmp_path):
    top = tmp_path / "sfclab" / "lab1"
    top.mkdir(parents=True)
    assert ownership.bpffs_problem(str(top), top) is None
    assert ownership.bpffs_problem(str(top / "@h1"), top) is None
    for bad in (top / "@..", top / "maps", top.parent / "lab2", top / "@h1" / "x", top / "@"):
        assert ownership.bpffs_problem(str(bad), top), bad


LAB = "lab1"


@pytest.mark.parametrize("entry, why", [
    ({"op": "netns", "name": "sfclab:lab1:r1"}, None),
    ({"op": "netns", "name": "sfclab:lab2:r1"}, "not a namespace of lab 'lab1'"),
    ({"op": "netns", "name": "other"}, "not a namespace of lab"),
    ({"op": "netns", "name": "sfclab:lab1:"}, "not a namespace of lab"),
    ({"op": "netns", "name": "sfclab:lab1:../../etc"}, "not a plain name"),
    ({"op": "netns", "name": "/proc/self/ns/net"}, "not a plain name"),
    ({"op": "netns", "name": ".."}, "not a plain name"),
    ({"op": "netns", "name": 7}, "field 'name' missing or not a str"),
    ({"op": "netns"}, "field 'name' missing"),
    ({"op": "link", "name": "sfabcdev1", "alias": "sfclab:lab1:x:link1"}, None),
    ({"op": "link", "name": "sfabcdev1", "alias": "sfclab:lab2:x:link1"}, "not this lab's"),
    ({"op": "link", "name": "../eth0", "alias": "sfclab:lab1:x"}, "not an interface name"),
    ({"op": "host-cgroup", "name": "sfclab:lab1:@h1"}, None),
    ({"op": "host-cgroup", "name": "sfclab:lab1:@../../cpu"}, "not a plain name"),
    ({"op": "host-cgroup", "name": "sfclab:lab2:@h1"}, "not a cgroup of lab"),
    ({"op": "host-ovs", "host": "../../x"}, "not a host name"),
    ({"op": "function", "node": "../r1", "kind": "router"}, "not a node name"),
    ({"op": "tcx-tunnel", "dev": "eth0", "vni": True, "local": "a", "remote": "b",
      "udp_port": 4789}, "field 'vni'"),
    ({"op": "container", "name": "sfclab-4-lab1-h1", "node": "h1"}, None),
    ({"op": "container", "name": "c1"}, "field 'node' missing"),
    ({"op": "container", "name": "sfclab-4-lab2-h1", "node": "h1"}, "not the container name"),
    ({"op": "container", "name": "sfclab-4-lab1-h1", "node": "../h1"}, "not a node name"),
    ({"op": "rm-rf", "path": "/"}, "unknown kind of entry 'rm-rf'"),
    ([1, 2], "not an object (a JSON list)"),
    (42, "not an object"),
])
def test_each_kind_of_entry_is_checked(entry, why):
    got = ownership.entry_problem(LAB, entry)
    assert (got is None) if why is None else (got is not None and why in got), got


def test_a_damaged_journal_is_reported_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    state = LabState(LAB)
    state.record([{"op": "netns", "name": "sfclab:lab1:a"}])
    with open(state.dir / "journal", "a") as f:
        f.write("not json\n[1]\n\n" + json.dumps({"op": "netns", "name": "sfclab:x:a"}) + "\n")
        f.write(json.dumps({"op": "netns", "name": "sfclab:lab1:b"}) + "\n{\"op\": \"ne")
    entries, problems = state.read_journal()
    assert [e["name"] for e in entries] == ["sfclab:lab1:a", "sfclab:lab1:b"]
    # line 7, the torn tail of the last record (a crash while appending), is skipped unsaid
    assert [p.split(" ", 3)[2] for p in problems] == ["2", "3", "5"]
    assert "not JSON" in problems[0] and "not an object" in problems[1]
    assert "not a namespace of lab 'lab1'" in problems[2]
    assert state.journal() == entries
    # a line torn the same way but followed by more is damage, and said
    with open(state.dir / "journal", "a") as f:
        f.write("\n" + json.dumps({"op": "netns", "name": "sfclab:lab1:c"}) + "\n")
    entries, problems = state.read_journal()
    assert [e["name"] for e in entries] == ["sfclab:lab1:a", "sfclab:lab1:b", "sfclab:lab1:c"]
    assert [p.split(" ", 3)[2] for p in problems] == ["2", "3", "5", "7"]
    assert "not JSON" in problems[3]


def test_a_process_that_fails_the_check_after_its_pidfd_is_opened_is_not_signalled():
    p = subprocess.Popen(["sleep", "30"])
    asked: list[int] = []
    try:
        assert netns.end_processes([p.pid], 0.2, owned=lambda pid: asked.append(pid) or False) \
            == []
        time.sleep(0.1)
        assert asked == [p.pid] and p.poll() is None
        assert netns.end_processes([p.pid], 2.0, owned=lambda pid: True) == [p.pid]
        assert p.wait(timeout=2) is not None
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_pid_that_is_gone_is_skipped():
    p = subprocess.Popen(["true"])
    p.wait()  # reaped: its PID names nothing now (or another process, never checked as ours)
    assert netns.end_processes([p.pid], 0.1, owned=lambda pid: False) == []


def test_a_namespace_name_that_is_not_plain_is_never_opened():
    for name in ("/proc/self/ns/net", "../../proc/1/ns/net", ".", "", "a\0b"):
        ino, why = netns.marked(name)
        assert ino is None and why == "not a plain namespace name"


def test_no_name_of_another_lab_or_no_lab_passes(monkeypatch):
    called: list[str] = []
    monkeypatch.setattr(netns, "marked", lambda n: called.append(n) or (None, "absent"))
    assert ownership.namespace_problem(LAB, "sfclab:lab2:a")[1]
    assert ownership.namespace_problem(LAB, os.path.join("..", "x"))[1]
    assert called == []  # the kernel is not even asked
    assert ownership.namespace_problem(LAB, "sfclab:lab1:a") == (None, None)
    assert called == ["sfclab:lab1:a"]


def test_an_overlong_journal_line_is_skipped_unread(tmp_path, monkeypatch):
    from sfclab.realize import state as state_mod

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(state_mod, "JOURNAL_LINE_MAX", 100)
    state = LabState(LAB)
    state.record([{"op": "netns", "name": "sfclab:lab1:a"}])
    with open(state.dir / "journal", "a") as f:
        f.write('{"op": "netns", "name": "sfclab:lab1:' + "x" * 500 + '"}\n')
    state.record([{"op": "netns", "name": "sfclab:lab1:b"}])
    entries, problems = state.read_journal()
    assert [e["name"] for e in entries] == ["sfclab:lab1:a", "sfclab:lab1:b"]
    assert len(problems) == 1 and "journal line 2: longer than 100" in problems[0]


def test_a_container_is_the_lab_s_only_with_all_its_labels():
    from sfclab.plan.names import container_labels

    mine = container_labels(LAB, "h1")
    assert ownership.container_owner_problem(LAB, "h1", mine) is None
    assert ownership.container_owner_problem(LAB, "h1", {**mine, "extra": "x"}) is None
    assert "sfclab.mark" in ownership.container_owner_problem(
        LAB, "h1", {k: v for k, v in mine.items() if k != "sfclab.mark"})
    assert "not this lab's" in ownership.container_owner_problem(
        LAB, "h1", container_labels("lab2", "h1"))
    assert ownership.container_owner_problem(LAB, "h2", mine)  # another node's


def test_container_names_never_collide_between_labs():
    from sfclab.plan.names import container_name

    pairs = [("a-b", "c"), ("a", "b-c"), ("a", "b"), ("ab", "c"), ("a.b", "c"), ("a", "b.c")]
    names = [container_name(lab, node) for lab, node in pairs]
    assert len(set(names)) == len(names), names


def test_a_record_after_a_torn_tail_starts_on_its_own_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    state = LabState(LAB)
    state.record([{"op": "netns", "name": "sfclab:lab1:a"}])
    with open(state.dir / "journal", "a") as f:
        f.write('{"op": "netns", "na')  # a crash part way through a record
    state.record([{"op": "netns", "name": "sfclab:lab1:b"}])
    entries, problems = state.read_journal()
    assert [e["name"] for e in entries] == ["sfclab:lab1:a", "sfclab:lab1:b"]
    assert len(problems) == 1 and "journal line 2" in problems[0], problems
