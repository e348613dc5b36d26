"""Nodes in real containers (``image:``): podman with runc, joined to the namespaces sfclab
makes.  One small image is built once per session (Debian bookworm by mmdebstrap, with
iproute2 and ping) and kept in the machine's image store under ``localhost/sfclab-test/``.

Each test checks what the lab left on the machine afterwards: no container carrying its label,
no namespace, and no mount of a container's file tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sfclab.kernel import podman
from sfclab.plan.names import container_name

from .labtools import leftovers, nothing_left

IMAGE = "localhost/sfclab-test/base:bookworm-1"
PACKAGES = "iproute2,iputils-ping"


@pytest.fixture(scope="session")
def image() -> str:
    """The test image, built (about 20 s) unless the image store has it already."""
    if not podman.available():
        pytest.skip("podman is not installed ('make setup' installs it)")
    if podman.image_exists(IMAGE):
        return IMAGE
    debs = subprocess.Popen(["mmdebstrap", "--variant=apt", f"--include={PACKAGES}",
                             "--format=tar", "bookworm", "-"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    imp = subprocess.run(["podman", "import", "-", IMAGE], stdin=debs.stdout,
                         capture_output=True, text=True, env=podman.env())
    assert debs.stdout is not None
    debs.stdout.close()
    err = debs.stderr.read().decode() if debs.stderr else ""
    assert debs.wait() == 0, err[-2000:]
    assert imp.returncode == 0, imp.stderr
    return IMAGE


def sfclab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                          text=True, timeout=180)


def containers_of(lab: str) -> list[str]:
    """What ``podman ps -a --filter label=sfclab.lab=<lab>`` lists."""
    return podman.find({"sfclab.lab": lab})


def in_container(lab: str, node: str, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", container_name(lab, node), *argv],
                          capture_output=True, text=True, timeout=30, env=podman.env())


def inspect(lab: str) -> dict:
    cp = sfclab("inspect", lab, "--json")
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def write_lab(tmp_path: Path, name: str, nodes: str, links: str) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"name: {name}\nnodes:\n{nodes}links:\n{links}")
    return f


def merged_dirs(ids: list[str]) -> list[str]:
    """The file-tree mounts of containers ``ids`` (podman's overlay ``MergedDir``)."""
    out = []
    for cid in ids:
        cp = subprocess.run(["podman", "container", "inspect", "--format",
                             "{{.GraphDriver.Data.MergedDir}}", cid], capture_output=True,
                            text=True, env=podman.env())
        if cp.returncode == 0 and cp.stdout.strip() not in ("", "<no value>"):
            out.append(cp.stdout.strip())
    return out


def mounted(paths: list[str]) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        points = {line.split()[4] for line in f}
    return [p for p in paths if p in points]


def test_a_container_host_pings_through_a_container_router(tmp_path, lab_name, image):
    f = write_lab(tmp_path, lab_name,
                  f"  h1: {{kind: host, image: {image}}}\n"
                  f"  r1: {{kind: router, image: {{name: {image}, cpus: 0.5, memory: 64M}}}}\n"
                  "  h2: {kind: host}\n",
                  "  - endpoints: [h1, r1]\n  - endpoints: [r1, h2]\n")
    cp = sfclab("up", str(f))
    assert cp.returncode == 0, cp.stderr
    try:
        d = inspect(lab_name)
        h2 = d["nodes"]["h2"]["interfaces"][0]["addresses"][0].split("/")[0]
        r1_addrs = sorted(a for i in d["nodes"]["r1"]["interfaces"] for a in i["addresses"])
        for node in ("h1", "r1"):
            c = d["nodes"][node]["container"]
            assert (c["image"], c["status"], c["running"]) == (image, "running", True), c
        assert "container" not in d["nodes"]["h2"]
        # the router's container sees exactly the node's interfaces and addresses
        seen = in_container(lab_name, "r1", ["ip", "-4", "-o", "addr", "show"])
        assert seen.returncode == 0, seen.stderr
        assert sorted(a for a in r1_addrs if a in seen.stdout) == r1_addrs, seen.stdout
        # ping from inside the host's container, routed by the router's namespace
        p = in_container(lab_name, "h1", ["ping", "-c", "2", "-i", "0.2", "-W", "2", h2])
        assert p.returncode == 0, p.stdout + p.stderr
        # the limits reached the kernel: the router's memory cgroup holds 64M
        st = podman.inspect([container_name(lab_name, "r1")])[container_name(lab_name, "r1")]
        with open(f"/proc/{st.pid}/cgroup") as fh:
            memcg = next(ln.split(":", 2)[2].strip() for ln in fh if ":memory:" in ln)
        limit = Path(f"/sys/fs/cgroup/memory{memcg}/memory.limit_in_bytes").read_text()
        assert int(limit) == 64 << 20
        graph = sfclab("graph", lab_name, "--format", "mermaid")
        assert graph.returncode == 0 and f"image {image}" in graph.stdout, graph.stdout
        ids = containers_of(lab_name)
        assert len(ids) == 2
        dirs = merged_dirs(ids)
    finally:
        down = sfclab("down", lab_name)
    assert down.returncode == 0, down.stderr
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)
    assert mounted(dirs) == []


def test_a_memory_limit_kills_the_container_and_the_lab_stays_up(tmp_path, lab_name, image):
    """``tail /dev/zero`` holds a line that never ends: it grows past 32M and the kernel kills
    it; inspect says so on the node, the other node's container and the links live on."""
    f = write_lab(tmp_path, lab_name,
                  f"  hog: {{kind: host, image: {{name: {image}, memory: 32M, "
                  "cmd: [tail, /dev/zero]}}\n"
                  f"  h2: {{kind: host, image: {image}}}\n",
                  "  - endpoints: [hog, h2]\n")
    cp = sfclab("up", str(f))
    assert cp.returncode == 0, cp.stderr
    try:
        deadline = time.monotonic() + 30
        while True:
            c = inspect(lab_name)["nodes"]["hog"]["container"]
            if not c["running"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        d = inspect(lab_name)
        c = d["nodes"]["hog"]["container"]
        assert c["oom_killed"] is True and c["running"] is False, c
        assert c["status"] == "exited" and c["exit_code"] == 137, c
        assert d["status"] == "up"
        assert d["nodes"]["h2"]["container"]["running"] is True
        hog = d["nodes"]["hog"]["interfaces"][0]["addresses"][0].split("/")[0]
        p = in_container(lab_name, "h2", ["ping", "-c", "1", "-W", "2", hog])
        assert p.returncode == 0, p.stdout + p.stderr  # the namespace outlives its container
        # graph and the web view's node data say it too
        graph = sfclab("graph", lab_name, "--format", "dot")
        assert graph.returncode == 0, graph.stderr
        assert f"image {image} (exited 137, OOM-killed)" in graph.stdout, graph.stdout
        assert f"image {image} (running)" in graph.stdout
        from tests.webclient import api_client

        with api_client() as client:
            r = client.get(f"/api/labs/{lab_name}/topology")
        assert r.status_code == 200, r.text
        web = {n["id"]: n for n in r.json()["nodes"]}
        assert web["hog"]["image"] == image and web["hog"]["container"]["oom_killed"] is True
        assert web["h2"]["container"]["running"] is True
    finally:
        down = sfclab("down", lab_name)
    assert down.returncode == 0, down.stderr
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)


def test_kill_9_of_up_after_a_container_is_made_then_down_leaves_nothing(tmp_path, lab_name,
                                                                          image):
    """``up`` is killed the moment its first container exists (others are on their way), and at
    a few moments after; ``down`` then removes every container, mount and namespace."""
    nodes = "".join(f"  c{i}: {{kind: host, image: {image}}}\n" for i in range(4))
    links = "".join(f"  - endpoints: [c{i}, c{i + 1}]\n" for i in range(3))
    killed_with_containers = 0
    for k, delay in enumerate((0.0, 0.05, 0.15)):
        name = f"{lab_name}k{k}"
        f = write_lab(tmp_path, name, nodes, links)
        p = subprocess.Popen([sys.executable, "-m", "sfclab.cli", "up", str(f)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not containers_of(name) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        ids = containers_of(name)  # at once: podman calls in flight die with up's threads
        killed_with_containers += bool(ids)
        dirs = merged_dirs(ids)
        down = sfclab("down", name)
        assert down.returncode == 0, down.stderr
        assert "left alone" not in down.stdout + down.stderr
        time.sleep(1.0)  # nothing appears later either (a podman run that outlived up would)
        assert containers_of(name) == [], (delay, down.stdout)
        assert nothing_left(name), leftovers(name)
        assert mounted(dirs) == [], dirs
    assert killed_with_containers >= 1


def test_two_labs_with_the_same_node_names_side_by_side(tmp_path, lab_name, image):
    nodes = f"  h1: {{kind: host, image: {image}}}\n  h2: {{kind: host, image: {image}}}\n"
    names = [f"{lab_name}a", f"{lab_name}b"]
    for n in names:
        cp = sfclab("up", str(write_lab(tmp_path, n, nodes, "  - endpoints: [h1, h2]\n")))
        assert cp.returncode == 0, cp.stderr
    try:
        for n in names:
            assert len(containers_of(n)) == 2
            addr = inspect(n)["nodes"]["h2"]["interfaces"][0]["addresses"][0].split("/")[0]
            p = in_container(n, "h1", ["ping", "-c", "1", "-W", "2", addr])
            assert p.returncode == 0, p.stdout + p.stderr
        down = sfclab("down", names[0])
        assert down.returncode == 0, down.stderr
        assert containers_of(names[0]) == []
        assert len(containers_of(names[1])) == 2  # the other lab's containers are untouched
        assert inspect(names[1])["nodes"]["h1"]["container"]["running"] is True
    finally:
        for n in names:
            sfclab("down", n)
    for n in names:
        assert containers_of(n) == [] and nothing_left(n), leftovers(n)


def test_a_container_with_the_labs_name_but_not_its_labels_is_never_removed(tmp_path, lab_name,
                                                                           image):
    """A container made by hand under the name the lab's node would get: ``up`` fails on it,
    and its rollback, finding the journaled name without the lab's labels, leaves it alone."""
    taken = container_name(lab_name, "h1")
    made = subprocess.run(["podman", "run", "--detach", "--name", taken, "--network", "none",
                           image, "sleep", "infinity"], capture_output=True, text=True,
                          env=podman.env())
    assert made.returncode == 0, made.stderr
    cid = made.stdout.strip()
    try:
        f = write_lab(tmp_path, lab_name, f"  h1: {{kind: host, image: {image}}}\n"
                      "  h2: {kind: host}\n", "  - endpoints: [h1, h2]\n")
        cp = sfclab("up", str(f))
        assert cp.returncode == 1 and taken in cp.stderr, cp.stderr
        st = podman.inspect([cid])[cid]
        assert st.running and st.name == taken and "sfclab.lab" not in st.labels
        assert nothing_left(lab_name), leftovers(lab_name)
    finally:
        podman.remove([cid], stop_timeout=0)


BAD = [
    # (id, node h1's mapping, place named, words said)
    ("unknown-image", "{kind: host, image: localhost/sfclab-test/none:0}", "nodes.h1.image.name",
     "no image 'localhost/sfclab-test/none:0'"),
    ("cmd-not-in-image", "{kind: host, image: {name: IMAGE, cmd: [/usr/bin/haproxy, -f, x]}}",
     "nodes.h1.image.cmd", "'/usr/bin/haproxy' is not an executable in image"),
    ("cmd-name-not-on-path", "{kind: host, image: {name: IMAGE, cmd: nosuchprogram}}",
     "nodes.h1.image.cmd", "'nosuchprogram' is not an executable"),
    ("too-many-cpus", "{kind: host, image: {name: IMAGE, cpus: 512}}", "nodes.h1.image.cpus",
     "this machine's online CPUs"),
    ("more-memory-than-ram", "{kind: host, image: {name: IMAGE, memory: 1000G}}",
     "nodes.h1.image.memory", "at most this machine's memory"),
    ("bind-source-missing", "{kind: host, image: {name: IMAGE, binds: ['/nonexistent/x:/x']}}",
     "nodes.h1.image.binds[0]", "no such file or directory"),
    ("image-on-a-bridge", "{kind: linux-bridge, image: IMAGE}", "nodes.h1.image",
     "is a bridge"),
]


@pytest.mark.parametrize("case, body, place, words", BAD, ids=[b[0] for b in BAD])
def test_bad_images_exit_2_naming_the_place_and_nothing_is_made(tmp_path, lab_name, image,
                                                                  case, body, place, words):
    name = f"{lab_name}x"
    f = write_lab(tmp_path, name, f"  h1: {body.replace('IMAGE', image)}\n"
                  f"  h2: {{kind: host, image: {image}}}\n", "  - endpoints: [h1, h2]\n")
    for verb in ("validate", "up"):
        cp = sfclab(verb, str(f))
        assert cp.returncode == 2, (verb, cp.stdout, cp.stderr)
        line = cp.stderr.strip()
        assert line.count("\n") == 0 and str(f) in line and place in line and words in line, line
    assert containers_of(name) == [] and nothing_left(name), leftovers(name)
    assert not (Path(os.environ["SFCLAB_STATE_DIR"]) / "labs" / name).exists()


def test_a_firewall_in_a_container_sits_in_a_chain_with_its_rules(lab_name, image):
    """A firewall node with ``image:``: the chain's data plane (labels, the proxy) and the
    firewall's own nftables rules work in its namespace as without the container."""
    from sfclab.api import Lab
    from sfclab.live.ops import chains

    from .test_sfc import ENV, PROBE, ROOT, echo

    d = {"name": lab_name,
         "nodes": {"src": {"kind": "host"},
                   "fw": {"kind": "firewall", "image": image,
                          "rules": [{"action": "drop", "proto": "udp", "dport": 7009}]},
                   "dst": {"kind": "host", "image": image}},
         "links": [{"endpoints": ["src", "fw"]}, {"endpoints": ["fw", "dst"]}],
         "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp",
                                           "dport": "7000-7010"}],
                          "functions": ["fw"], "egress": "dst"}}}
    lab = Lab.from_dict(d).up()
    try:
        st = inspect(lab_name)["nodes"]["fw"]["container"]
        assert st["running"] and st["image"] == image
        t = chains.trace(lab_name, "c")
        assert t["delivered"] and t["in_order"], t
        dst = str(lab.address("dst"))

        def sent(dport: int) -> int:
            server = echo(lab, "dst", dport, 3)
            cp = subprocess.run(["ip", "netns", "exec", lab.netns("src"), *PROBE, "udp-send",
                                 dst, "40000", str(dport), "5"], capture_output=True,
                                text=True, env=ENV, cwd=ROOT, timeout=60)
            server.wait(timeout=30)
            return int(cp.stdout.strip() or 0)

        assert sent(7005) == 5   # through the chain, past the container's node
        assert sent(7009) == 0   # the firewall's rule, in the same namespace, drops it
    finally:
        lab.down()
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)


def test_containers_outlive_an_up_run_by_a_subreaper(tmp_path, lab_name, image):
    """A caller that owns its children (a subreaper that ends them all on exit, as the web
    worker does) runs ``up``: podman's monitors are not its children, so the containers run
    on after it has ended everything it owned."""
    nodes = "".join(f"  c{i}: {{kind: host, image: {image}}}\n" for i in range(3))
    f = write_lab(tmp_path, lab_name, nodes, "  - endpoints: [c0, c1]\n  - endpoints: [c1, c2]\n")
    code = ("import sys\nfrom sfclab.cli import main\nfrom sfclab.kernel import process\n"
            "with process.owning_children():\n    rc = main(['up', sys.argv[1]])\n"
            "sys.exit(rc)\n")
    cp = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                        timeout=120)
    try:
        assert cp.returncode == 0, cp.stderr
        time.sleep(0.5)
        d = inspect(lab_name)
        assert all(d["nodes"][f"c{i}"]["container"]["running"] for i in range(3)), d["nodes"]
        # each container's monitor (conmon) lives on: it records the exit status and OOM
        for st in podman.inspect(containers_of(lab_name)).values():
            assert st.conmon_pid > 0 and Path(f"/proc/{st.conmon_pid}").exists(), st
    finally:
        down = sfclab("down", lab_name)
    assert down.returncode == 0, down.stderr
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)
