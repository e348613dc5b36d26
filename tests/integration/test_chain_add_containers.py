"""Functions in containers added to a running lab (issue 25): a chain file's function entry
takes ``image``, each instance runs its own container joined to its namespace, made by the
containers stage of ``up``; ``chain migrate`` gives the clone the same image and removes the
old one's container; ``chain rm`` removes them by ID; a bad image or a ``container`` function
without one is exit 2 with nothing made."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.kernel import netns, podman
from sfclab.live import request
from sfclab.live.ops import add as chain_add
from sfclab.live.ops import migrate
from sfclab.realize import containers, lifecycle

from .test_chain_ops import _snapshot, base_lab, chain_file, counters, running, send
from .test_containers import containers_of, image, in_container  # noqa: F401 (a fixture)

#: UDP 5000-5010 from src through two plain containers (the image's own command: a process
#: that forwards nothing; the kernel routes through their namespaces) and a firewall whose
#: namespace holds a container with a memory limit; the firewall drops port 5009
def boxed(img: str) -> dict:
    return {"name": "boxed", "attach": "r1",
            "classifiers": [{"ingress": "src", "proto": "udp", "dport": "5000-5010"}],
            "egress": "dst",
            "functions": [{"name": "box", "kind": "container", "image": img, "instances": 2},
                          {"name": "fw", "kind": "firewall",
                           "rules": [{"action": "drop", "proto": "udp", "dport": 5009}],
                           "image": {"name": img, "memory": "64M"}}]}


def by_node(lab: str) -> dict[str, podman.State]:
    return {st.labels["sfclab.node"]: st for st in podman.inspect(containers_of(lab)).values()}


def memory_limit(container_id: str) -> int:
    cp = subprocess.run(["podman", "container", "inspect", "--format",
                         "{{.HostConfig.Memory}}", container_id], capture_output=True,
                        text=True, timeout=30, env=podman.env(), check=True)
    return int(cp.stdout.strip())


def held_sysfs(lab: str, node: str) -> bool:
    """Is a sysfs mounted where sfclab holds node ``node``'s (realize.containers)?"""
    where = str(containers.sysfs_dir(lab, node))
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == where for line in f)


def test_chain_add_runs_its_instances_in_containers_and_migrate_rm_remove_them(
        tmp_path: Path, image: str) -> None:  # noqa: F811 (the fixture)
    with running(base_lab()) as lab:
        got = chain_add.add_chain(request.read_chain_file(lab.name,
                                                          chain_file(tmp_path, boxed(image))))
        assert set(got["instances"]) == {"box-1", "box-2", "fw-1"}
        mine = by_node(lab.name)
        assert set(mine) == {"box-1", "box-2", "fw-1"}
        assert all(st.running and st.image.endswith(image.split("/", 1)[1])
                   for st in mine.values()), mine
        assert memory_limit(mine["fw-1"].id) == 64 << 20
        # joined to its node's namespace: it sees the instance's own address
        _, plan = lifecycle.load_plan(lab.name)
        addr = next(i.address for i in plan.interfaces if i.node == "box-1")
        assert addr
        seen = in_container(lab.name, "box-1", ["ip", "-br", "-4", "addr", "show", "eth0"])
        assert seen.returncode == 0 and addr in seen.stdout, (addr, seen)
        # the chain carries its traffic through them, and the firewall's rule applies
        dst = str(lab.address("dst"))
        assert send(lab, "src", dst, 41000, 5005, 20) == 20
        c = counters(lab.name)
        assert c["box-1"]["proxy_in"] + c["box-2"]["proxy_in"] == 20
        assert c["fw-1"]["proxy_in"] == 20
        assert send(lab, "src", dst, 41001, 5009, 5) == 0

        # migrate: the clone runs the same image with the same settings; the old one goes
        out = migrate.migrate(request.MigrateInstance(lab.name, "fw-1", conntrack=False))
        clone = out.get("clone") or next(n for n in by_node(lab.name) if n.startswith("fw-1."))
        after = by_node(lab.name)
        assert "fw-1" not in after and clone in after and after[clone].running, after
        assert not held_sysfs(lab.name, "fw-1") and held_sysfs(lab.name, clone)
        assert memory_limit(after[clone].id) == 64 << 20
        assert send(lab, "src", dst, 41002, 5005, 10) == 10

        # rm: every container of the chain, by ID
        rm = chain_add.remove_chain(request.RemoveChain(lab.name, "boxed"))
        assert rm["errors"] == [], rm
        assert containers_of(lab.name) == []
        for n in ("box-1", "box-2", clone):
            assert not netns.exists(f"sfclab:{lab.name}:{n}")
            assert not held_sysfs(lab.name, n)  # a held sysfs would keep the namespace alive
    assert containers_of(lab.name) == []


def test_bad_images_in_a_chain_file_exit_2_and_make_nothing(tmp_path: Path, capsys,
                                                             image: str) -> None:  # noqa: F811
    cases = [
        ({"name": "c", "kind": "container"}, "functions[0]", "expected an 'image' key"),
        ({"name": "c", "kind": "container", "image": "localhost/sfclab-test/none:1"},
         "functions[0].image.name", "no image"),
        ({"name": "c", "kind": "router", "image": {"name": image, "cmd": ["no-such-prog"]}},
         "functions[0].image.cmd", "not an executable"),
        ({"name": "c", "kind": "container", "image": {"name": image, "memory": "64M"},
          "memory": "32M"}, "functions[0].memory", "a limit given twice"),
    ]
    with running(base_lab()) as lab:
        before = _snapshot(lab)
        for i, (fn, place, words) in enumerate(cases):
            body = {**boxed(image), "functions": [fn]}
            path = chain_file(tmp_path, body, f"bad{i}.json")
            assert main(["chain", "add", lab.name, path]) == ExitStatus.BAD_INPUT, place
            err = capsys.readouterr().err
            assert path in err and place in err and words in err, (place, err)
            assert _snapshot(lab) == before, place
            assert containers_of(lab.name) == [], place


def test_a_container_instance_across_a_tunnel_to_another_emulated_host_runs_its_container(
        tmp_path: Path, lab_name: str, image: str) -> None:  # noqa: F811 (the fixture)
    """Two emulated hosts; of a container function's two instances, fw-1 is placed beside its
    attach node r1 (c1, the build engine makes it) and fw-2 on c2 (joined by a tunnel): each
    runs its container joined to its own namespace, its sysfs held; chain rm removes both."""
    d = {**base_lab(), "name": lab_name}
    d["hosts"] = {"c1": {"cpus": 1, "memory": "512M"}, "c2": {"cpus": 1, "memory": "512M"}}
    for n, h in (("src", "c1"), ("r1", "c1"), ("f1", "c2"), ("dst", "c2")):
        d["nodes"][n]["host"] = h
    body = {**boxed(image), "functions": [{"name": "fw", "kind": "container", "image": image,
                                           "instances": 2, "cpu": 0.5, "memory": "32M"}]}
    with running(d) as lab:
        add = chain_add.add_chain(request.read_chain_file(lab.name, chain_file(tmp_path, body)))
        assert {n: i["host"] for n, i in add["instances"].items()} == \
            {"fw-1": "c1", "fw-2": "c2"}
        mine = by_node(lab.name)
        assert set(mine) == {"fw-1", "fw-2"}, mine
        _, plan = lifecycle.load_plan(lab.name)
        for n in ("fw-1", "fw-2"):
            assert mine[n].running, mine[n]
            assert os.stat(f"/proc/{mine[n].pid}/ns/net").st_ino == \
                netns.inode(plan.netns_of(n))[1], n
            assert held_sysfs(lab.name, n), n
        assert send(lab, "src", str(lab.address("dst")), 41004, 5005, 20) == 20
        rm = chain_add.remove_chain(request.RemoveChain(lab.name, "boxed"))
        assert rm["errors"] == [], rm
        assert containers_of(lab.name) == []
        assert not held_sysfs(lab.name, "fw-2")
    assert containers_of(lab.name) == []
