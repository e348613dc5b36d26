"""The podman driver (sfclab.kernel.podman) without root or podman: the command line it builds
for a container, and how it finds a program inside an image's file tree (symbolic links read
inside the tree, never on this machine)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from sfclab.errors import ToolError
from sfclab.kernel import podman


def test_run_argv_joins_the_namespace_with_labels_limits_and_command() -> None:
    c = podman.Container(
        name="sfclab-3-lab-h1", image="localhost/x:1", netns_path="/run/netns/sfclab:lab:h1",
        labels={"sfclab.node": "h1", "sfclab.lab": "lab"}, cmd=("sleep", "infinity"),
        env={"B": "2", "A": "1"}, binds=(podman.Bind("/srv/a", "/a"),
                                         podman.Bind("/srv/b", "/b", writable=True)),
        cpus=0.5, memory=64 << 20, caps=("NET_ADMIN",))
    argv = podman.run_argv(c)
    assert argv[:2] == ["run", "--detach"]
    assert argv[argv.index("--name") + 1] == "sfclab-3-lab-h1"
    assert argv[argv.index("--network") + 1] == "ns:/run/netns/sfclab:lab:h1"
    assert argv[argv.index("--pull") + 1] == "never"
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert labels == ["sfclab.lab=lab", "sfclab.node=h1"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--env"] == ["A=1", "B=2"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"] == [
        "/srv/a:/a:ro", "/srv/b:/b:rw"]
    assert argv[argv.index("--cpus") + 1] == "0.5"
    assert argv[argv.index("--memory") + 1] == f"{64 << 20}b"
    assert argv[argv.index("--memory-swap") + 1] == f"{64 << 20}b"
    assert argv[argv.index("--cap-add") + 1] == "NET_ADMIN"
    assert "--privileged" not in argv
    # the image and its command come last, after "--": a name is never read as an option
    assert argv[-4:] == ["--", "localhost/x:1", "sleep", "infinity"]


def test_run_argv_leaves_out_what_is_not_asked() -> None:
    argv = podman.run_argv(podman.Container(name="n", image="i", netns_path="/p",
                                            privileged=True))
    for opt in ("--cpus", "--memory", "--env", "--volume", "--cap-add", "--label"):
        assert opt not in argv
    assert "--privileged" in argv and argv[-2:] == ["--", "i"]


def _exe(p: Path) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("#!/bin/sh\n")
    os.chmod(p, 0o755)


def test_program_found_through_links_read_inside_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _exe(root / "usr/bin/ip")
    (root / "usr/bin/plain").write_text("not executable")
    root.joinpath("bin").symlink_to("usr/bin")         # merged /usr, relative link
    root.joinpath("usr/sbin").mkdir()
    root.joinpath("usr/sbin/ip2").symlink_to("/bin/ip")  # absolute: read from the tree's root
    path = "/usr/sbin:/bin"
    assert podman.program_in_root(root, "ip", path)
    assert podman.program_in_root(root, "ip2", path)
    assert podman.program_in_root(root, "/bin/ip", path)
    assert not podman.program_in_root(root, "plain", path)   # not executable
    assert not podman.program_in_root(root, "nothere", path)
    assert not podman.program_in_root(root, "ip", "/usr/sbin")  # not on the PATH given


def test_links_that_point_out_of_the_tree_stay_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _exe(tmp_path / "outside/prog")                  # on this machine, not in the image
    root.joinpath("bin").mkdir()
    root.joinpath("bin/prog").symlink_to(f"{tmp_path}/outside/prog")
    root.joinpath("bin/up").symlink_to("../../../outside/prog")
    root.joinpath("bin/loop").symlink_to("loop")
    assert not podman.program_in_root(root, "prog", "/bin")
    assert not podman.program_in_root(root, "up", "/bin")
    assert not podman.program_in_root(root, "loop", "/bin")


def test_configuration_sets_what_this_machine_needs() -> None:
    text = podman.CONF_TEXT
    for needed in ('cgroup_manager = "cgroupfs"', 'runtime = "runc"', 'events_logger = "file"',
                   "nofile=1024:20000", "nproc=4096:4096"):
        assert needed in text


def test_an_oom_kill_record_names_the_victims_cgroup() -> None:
    from sfclab.kernel import kmsg

    cid = "8fd4299bbdd8a2f7658cb912f42595b448eeeb9be079dfa26ac2271b5bea988d"
    text = ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-" + cid +
            ",mems_allowed=0,oom_memcg=/libpod_parent/libpod-" + cid +
            ",task_memcg=/libpod_parent/libpod-" + cid + ",task=tail,pid=10671,uid=0")
    f = kmsg.oom_kill_fields(text)
    assert f["task_memcg"].endswith(f"-{cid}") and f["task"] == "tail" and f["pid"] == "10671"
    assert f["constraint"] == "CONSTRAINT_MEMCG" and f["nodemask"] == "(null)"


def test_the_subreaper_attribute_comes_back_only_after_the_last_overlapping_run() -> None:
    """Threads start containers side by side: the first to finish must not make this process
    a subreaper again while another's podman still runs (its monitor would be ours)."""
    from sfclab.kernel import process

    process.become_subreaper()
    try:
        a, b = podman._not_subreaper(), podman._not_subreaper()
        a.__enter__()
        assert not podman.is_subreaper()
        b.__enter__()
        a.__exit__(None, None, None)
        assert not podman.is_subreaper()     # b's podman still runs
        b.__exit__(None, None, None)
        assert podman.is_subreaper()
    finally:
        podman._libc().prctl(podman.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    with podman._not_subreaper():           # not a subreaper before: nothing to restore
        pass
    assert not podman.is_subreaper()


def test_remove_stops_every_container_side_by_side() -> None:
    ids = [f"{i:064x}" for i in range(20)]
    argv = podman.remove_argv(ids, 1)
    assert argv[:2] == ["--max-workers", "20"]  # 20 stop timeouts at once, not 6 (3 per CPU)
    assert argv[2:] == ["rm", "--force", "--ignore", "--time", "1", "--", *ids]
    many = [f"{i:064x}" for i in range(podman.MAX_WORKERS + 5)]
    assert podman.remove_argv(many)[:2] == ["--max-workers", str(podman.MAX_WORKERS)]


def test_sfclabs_configuration_gives_no_network_unless_one_is_named() -> None:
    """podman's own bridge network turns on the root namespace's ip_forward and adds its
    iptables chains there (seen on this machine); sfclab's podman calls name their network
    (a node's namespace, or the host's for a build) and the default is none."""
    import tomllib

    from sfclab.kernel import podman

    conf = tomllib.loads(podman.CONF_TEXT)
    assert conf["containers"]["netns"] == "none"
    assert conf["engine"]["cgroup_manager"] == "cgroupfs" and conf["engine"]["runtime"] == "runc"


class _Rm:
    """podman's ``rm`` and ``container inspect`` as a list of containers: ``rm`` fails (as
    podman 4.3's parallel ``rm`` can) ``fail`` times, removing all but the first ID asked."""

    def __init__(self, ids: list[str], fail: int) -> None:
        self.there, self.fail = set(ids), fail
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], **kw: object) -> subprocess.CompletedProcess:
        self.calls.append(args)
        asked = args[args.index("--") + 1:]
        if "rm" in args:
            if self.fail:
                self.fail -= 1
                self.there -= set(asked[1:])
                raise ToolError(["podman", *args], 125, "removing container root filesystem: "
                                "1 error occurred: unlinkat merged: device or resource busy")
            self.there -= set(asked)
            return subprocess.CompletedProcess(args, 0, "", "")
        found = [{"Id": i} for i in asked if i in self.there]
        ok = len(found) == len(asked)
        return subprocess.CompletedProcess(args, 0 if ok else 125, json.dumps(found),
                                           "" if ok else "Error: no such container x")


def test_remove_removes_again_what_a_failed_rm_left(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Rm(["a", "b", "c"], fail=1)
    monkeypatch.setattr(podman, "_podman", fake)
    monkeypatch.setattr(podman, "REMOVE_RETRY_S", 0.0)
    podman.remove(["a", "b", "c"])
    assert fake.there == set()
    rms = [c for c in fake.calls if "rm" in c]
    assert [c[c.index("--") + 1:] for c in rms] == [["a", "b", "c"], ["a"]]  # only what was left


def test_remove_gives_up_after_its_tries_with_podmans_words(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Rm(["a", "b"], fail=podman.REMOVE_TRIES)
    monkeypatch.setattr(podman, "_podman", fake)
    monkeypatch.setattr(podman, "REMOVE_RETRY_S", 0.0)
    with pytest.raises(ToolError, match="device or resource busy"):
        podman.remove(["a", "b"])
    assert fake.there == {"a"}
    assert sum("rm" in c for c in fake.calls) == podman.REMOVE_TRIES


def test_remove_raises_at_once_when_podman_gave_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def silent(args: list[str], **kw: object) -> subprocess.CompletedProcess:
        calls.append(args)
        raise ToolError(["podman", *args], -1, "no answer in 61 s")

    monkeypatch.setattr(podman, "_podman", silent)
    with pytest.raises(ToolError, match="no answer"):
        podman.remove(["a"])
    assert len(calls) == 1  # not asked again: a second wait would only double down's
