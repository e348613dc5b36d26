"""A node with ``image:`` on a host reached over SSH (emulated hosts running ``sshd`` on this
machine, :mod:`.sshd`, so the hosts' podman is this machine's): the host's agent checks the
image, starts the container joined to the node's namespace there, journals it in its own
journal, holds the node's sysfs, and removes it all by ID (labels checked) at ``down``."""

from __future__ import annotations

import json
import os

import pytest

from sfclab.errors import RealizeError
from sfclab.kernel import netns, podman, sysfs
from sfclab.realize import lifecycle
from sfclab.realize.inspect import inspect
from sfclab.realize.kinds import load_lab_dict

from .labtools import nothing_left, ping
from .sshd import ADDRESSES, ssh_machines
from .test_containers import image

__all__ = ["image"]  # the session fixture that builds the test image

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


@pytest.fixture
def machines(lab_name, tmp_path):
    with ssh_machines(f"m{lab_name[1:]}", tmp_path) as ms:
        yield ms


def two_hosts(name: str, ssh, image: str) -> dict:
    """a on h1; the router r, in a container, and b on h2."""
    return {"name": name,
            "hosts": {h: {"address": ADDRESSES[m], "ssh": ssh.ssh(m)}
                      for h, m in (("h1", "m1"), ("h2", "m2"))},
            "nodes": {"a": {"kind": "host", "host": "h1"},
                      "r": {"kind": "router", "host": "h2",
                            "image": {"name": image, "cmd": ["sleep", "infinity"]}},
                      "b": {"kind": "host", "host": "h2"}},
            "links": [{"endpoints": ["a", "r"]}, {"endpoints": ["r", "b"]}]}


def test_a_container_node_on_an_ssh_host_runs_there_and_goes_at_down(machines, lab_name,
                                                                     image):
    plan = lifecycle.up(load_lab_dict(two_hosts(lab_name, machines, image)))
    mark = f"sfclab:{lab_name}:r:sysfs"
    try:
        ids = podman.find({"sfclab.lab": lab_name})
        assert len(ids) == 1, ids
        st = podman.inspect(ids)[ids[0]]
        assert st.running and st.labels["sfclab.node"] == "r", st
        # joined to r's namespace, made on h2
        assert os.stat(f"/proc/{st.pid}/ns/net").st_ino == netns.inode(plan.netns_of("r"))[1]
        journal = (machines.dir / "state-m2" / "labs" / lab_name / "journal").read_text()
        assert any(json.loads(ln).get("op") == "container" for ln in journal.splitlines()
                   if ln.strip())
        held = machines.dir / "state-m2" / "sysfs" / lab_name / "r"
        m = sysfs.mount_at(held)
        assert m is not None and (m.fstype, m.source) == ("sysfs", mark), m
        assert ping(plan.netns_of("a"), str(plan.address_of("b"))).returncode == 0
        shown = inspect(lab_name)["nodes"]["r"].get("container")
        assert shown is not None and shown["running"] and shown["id"] == st.id[:12], shown
    finally:
        rep = lifecycle.down(lab_name)
    assert rep.errors == []
    assert podman.find({"sfclab.lab": lab_name}) == []
    assert sysfs.mount_at(machines.dir / "state-m2" / "sysfs" / lab_name / "r") is None
    assert nothing_left(lab_name)


def test_an_image_the_ssh_host_lacks_is_refused_there_before_anything(machines, lab_name,
                                                                      image):
    d = two_hosts(lab_name, machines, image)
    d["nodes"]["r"]["image"]["name"] = "localhost/sfclab-test/absent:1"
    with pytest.raises(RealizeError, match=r"host h2: agent check failed.*node r's image.*"
                       r"no image 'localhost/sfclab-test/absent:1'"):
        lifecycle.up(load_lab_dict(d))
    assert not lifecycle.LabState(lab_name).exists and nothing_left(lab_name)
    assert podman.find({"sfclab.lab": lab_name}) == []
