"""``image:`` on nodes, as text (no root, no podman): the forms it takes, every key bounded,
bridges refused, and the plan's container for a node (name, namespace, how it runs)."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import pytest

from sfclab.errors import SpecError
from sfclab.kernel.podman import ImageConfig
from sfclab.realize.kinds import load_lab_text
from sfclab.realize.lifecycle import plan_for
from sfclab.spec.image import KEEP_ALIVE, run_command


def lab(nodes: str):
    text = "name: img\nnodes:\n" + textwrap.indent(textwrap.dedent(nodes), "  ") + \
        "  z: {kind: host}\nlinks:\n  - endpoints: [a, z]\n"
    return load_lab_text(text, "lab.yaml")


def bad(nodes: str) -> SpecError:
    with pytest.raises(SpecError) as ei:
        lab(nodes)
    assert ei.value.file == "lab.yaml"
    return ei.value


def test_short_form_and_full_form():
    short = lab("a: {kind: host, image: localhost/sfclab/base}\n").nodes["a"].image
    assert short.name == "localhost/sfclab/base" and short.cmd is None and not short.privileged
    full = lab("""\
        a:
          kind: router
          image:
            name: localhost/x:1
            cmd: "/usr/sbin/x -f '/etc/x y.conf'"
            env: {A: 1, B_2: two}
            binds: ["/srv/a:/a", "/srv/b:/b:rw"]
            cpus: 0.5
            memory: 64M
            caps: [net_admin, CAP_NET_RAW, NET_ADMIN]
            privileged: true
        """).nodes["a"]
    im = full.image
    assert full.kind == "router"
    assert im.cmd == ["/usr/sbin/x", "-f", "/etc/x y.conf"]
    assert im.env == {"A": "1", "B_2": "two"}
    assert [(b.source, b.target, b.writable) for b in im.binds] == [
        ("/srv/a", "/a", False), ("/srv/b", "/b", True)]
    assert (im.cpus, im.memory, im.caps, im.privileged) == (0.5, 64 << 20,
                                                            ["NET_ADMIN", "NET_RAW"], True)


def test_a_function_kind_takes_an_image_beside_its_own_keys():
    n = lab("a: {kind: router, image: localhost/x, ttl: 64}\n").nodes["a"]
    assert n.kind == "router" and n.image.name == "localhost/x" and n.params.ttl == 64
    n = lab("a: {kind: tun, image: localhost/x, exec: /bin/cat, memory: 64M}\n").nodes["a"]
    assert n.kind == "tun" and n.params.memory == 64 << 20 and n.image.memory is None
    assert lab("a: {kind: host}\n").nodes["a"].image is None


@pytest.mark.parametrize("node, place, words", [
    ("a: {kind: host, image: ''}", "nodes.a.image.name", "an image name"),
    ("a: {kind: host, image: '-rm'}", "nodes.a.image.name", "an image name"),
    ("a: {kind: host, image: 'x y'}", "nodes.a.image.name", "an image name"),
    ("a: {kind: host, image: 7}", "nodes.a.image", ""),
    ("a: {kind: host, image: {name: x, colour: red}}", "nodes.a.image.colour", ""),
    ("a: {kind: host, image: {cmd: [x]}}", "nodes.a.image.name", ""),
    ("a: {kind: host, image: {name: x, cmd: []}}", "nodes.a.image.cmd", "not empty"),
    ("a: {kind: host, image: {name: x, cmd: [" + ", ".join(["a"] * 65) + "]}}",
     "nodes.a.image.cmd", "at most 64 arguments"),
    ("a: {kind: host, image: {name: x, env: {1A: x}}}", "nodes.a.image.env", "variable names"),
    ("a: {kind: host, image: {name: x, env: {A: [1]}}}", "nodes.a.image.env", "a string"),
    ("a: {kind: host, image: {name: x, binds: [relative:/x]}}", "nodes.a.image.binds",
     "absolute paths"),
    ("a: {kind: host, image: {name: x, binds: ['/a/../etc:/x']}}", "nodes.a.image.binds",
     "without '..'"),
    ("a: {kind: host, image: {name: x, binds: ['/a:/x:rx']}}", "nodes.a.image.binds", ":rw"),
    ("a: {kind: host, image: {name: x, binds: [" + ", ".join(["'/a:/b'"] * 33) + "]}}",
     "nodes.a.image.binds", "at most 32"),
    ("a: {kind: host, image: {name: x, cpus: 0}}", "nodes.a.image.cpus", "0.01"),
    ("a: {kind: host, image: {name: x, cpus: 0.001}}", "nodes.a.image.cpus", "0.01"),
    ("a: {kind: host, image: {name: x, memory: 1M}}", "nodes.a.image.memory", "at least 6M"),
    ("a: {kind: host, image: {name: x, memory: 2048G}}", "nodes.a.image.memory", "at most 1T"),
    ("a: {kind: host, image: {name: x, caps: [FLY]}}", "nodes.a.image.caps", "capabilities"),
    ("a: {kind: host, image: {name: x, privileged: maybe}}", "nodes.a.image.privileged", ""),
    ("a: {kind: linux-bridge, image: x}", "nodes.a.image", "is a bridge"),
    ("a: {kind: ovs-bridge, image: x}", "nodes.a.image", "is a bridge"),
])
def test_bad_images_name_the_key(node, place, words):
    e = bad(node + "\n")
    assert e.place == place and words in e.message, (e.place, e.message)


def test_the_plan_gives_each_imaged_node_its_container():
    lb = lab("""\
        a: {kind: host, image: {name: localhost/x, cmd: [sleep, "9"], memory: 8M, cpus: 1}}
        r: {kind: router, image: localhost/y}
        """)
    plan = plan_for(lb)
    by_node = {c.node: c for c in plan.containers}
    assert sorted(by_node) == ["a", "r"]
    a = by_node["a"]
    assert (a.name, a.netns, a.image) == ("sfclab-3-img-a", "sfclab:img:a", "localhost/x")
    assert (a.cmd, a.memory, a.cpus) == (["sleep", "9"], 8 << 20, 1.0)
    assert by_node["r"].cmd == []
    # the plan survives its JSON round trip (down and inspect read it back)
    from sfclab.plan.model import Plan

    assert Plan.from_dict(plan.to_dict()).containers == plan.containers


def test_journal_names_each_container_before_it_is_made():
    from sfclab.realize import journal

    plan = plan_for(lab("a: {kind: host, image: localhost/x}\n"))
    assert {"op": "container", "name": "sfclab-3-img-a", "node": "a"} in journal.entries(plan)


def test_the_command_run_is_the_lab_file_s_then_the_image_s_then_keep_alive():
    plain = ImageConfig(id="1", entrypoint=(), cmd=(), path="/bin")
    own = ImageConfig(id="1", entrypoint=(), cmd=("/usr/sbin/haproxy",), path="/bin")
    entry = ImageConfig(id="1", entrypoint=("/init",), cmd=(), path="/bin")
    assert run_command(["x", "-y"], plain) == ("x", "-y")
    assert run_command(None, own) == () and run_command(None, entry) == ()
    assert run_command(None, plain) == KEEP_ALIVE


def test_an_oom_kill_once_seen_is_kept_after_the_kernel_log_lost_it(tmp_path, monkeypatch):
    from sfclab.realize import containers
    from sfclab.realize.state import LabState

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    LabState("img").begin({}, "", "lab.yaml")
    cid, other = "a" * 64, "b" * 64
    kill = {"task_memcg": f"/libpod_parent/libpod-{cid}", "task": "tail", "pid": "7"}
    foreign = {"task_memcg": f"/libpod_parent/libpod-{other}", "task": "x", "pid": "8"}
    assert containers._seen_kills("img", "a", cid, [kill, foreign]) == 1
    assert containers._seen_kills("img", "a", cid, [kill]) == 1       # the same kill once
    assert containers._seen_kills("img", "a", cid, []) == 1           # the ring lost it
    assert containers._seen_kills("img", "a", other, []) == 0         # a new container there


def test_each_image_and_command_is_read_once_per_lab_the_limits_for_every_node(monkeypatch):
    from sfclab.kernel import podman
    from sfclab.realize import lifecycle

    calls: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def mounted(ref):
        calls.append(("mount", ref))
        yield Path("/")

    monkeypatch.setattr(podman, "available", lambda: True)
    monkeypatch.setattr(podman, "image_exists", lambda ref: calls.append(("exists", ref)) or True)
    monkeypatch.setattr(podman, "image_config", lambda ref: calls.append(("config", ref)) or
                        ImageConfig(id="1", entrypoint=(), cmd=(), path="/bin:/usr/bin"))
    monkeypatch.setattr(podman, "image_mounted", mounted)
    lb = lab("""\
        a: {kind: host, image: localhost/x}
        b: {kind: router, image: localhost/x}
        c: {kind: router, image: localhost/x}
        d: {kind: router, image: {name: localhost/x, cmd: [ls]}}
        e: {kind: router, image: localhost/y}
        """)
    lifecycle._check_images(lb, plan_for(lb))
    assert sorted(calls) == sorted([("exists", "localhost/x"), ("config", "localhost/x"),
                                    ("mount", "localhost/x"),
                                    ("exists", "localhost/x"), ("config", "localhost/x"),
                                    ("mount", "localhost/x"),
                                    ("exists", "localhost/y"), ("config", "localhost/y"),
                                    ("mount", "localhost/y")])
    # the limits are still checked on every node, after its image was found good on another
    over = lab("""\
        a: {kind: host, image: localhost/x}
        b: {kind: router, image: {name: localhost/x, cpus: 1000}}
        """)
    with pytest.raises(SpecError) as ei:
        lifecycle._check_images(over, plan_for(over))
    assert "nodes.b.image.cpus" in str(ei.value)
