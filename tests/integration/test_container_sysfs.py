"""A router in a container that is not privileged, and what sfclab writes in its namespace's
sysfs: ``sfclab traffic rate`` places the first hop's receive processing (RPS, written to
``/sys/class/net/IF/queues/rx-0/rps_cpus`` through ``ip netns exec``) on the router when the
router is the node after the sender.  runc mounts the container's sysfs read-only; before
sfclab held a read-write sysfs of the namespace from before the container started, that
read-only mount made the namespace's one sysfs superblock read-only and the measurement failed
with "Read-only file system" (the workaround was ``privileged: true``).  The container must
stay unprivileged: no CAP_SYS_ADMIN, a read-only ``/sys`` that refuses its writes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sfclab.kernel import sysfs
from sfclab.realize.containers import sysfs_dir, sysfs_mark

from .labtools import leftovers, nothing_left
from .test_containers import containers_of, image, in_container, inspect, sfclab, write_lab

__all__ = ["image"]  # the session fixture that builds the test image

CAP_SYS_ADMIN = 21


def marked_mounts(mark: str) -> list[sysfs.Mount]:
    return [m for m in sysfs.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
            if m.source == mark]


def test_traffic_rate_through_an_unprivileged_container_router(tmp_path, lab_name, image):
    f = write_lab(tmp_path, lab_name,
                  "  src: {kind: host}\n"
                  f"  r: {{kind: router, image: {{name: {image}, cmd: [sleep, infinity]}}}}\n"
                  "  dst: {kind: host}\n",
                  "  - endpoints: [src, r]\n  - endpoints: [r, dst]\n")
    cp = sfclab("up", str(f))
    assert cp.returncode == 0, cp.stderr
    mark, held = sysfs_mark(lab_name, "r"), sysfs_dir(lab_name, "r")
    try:
        rate = sfclab("traffic", "rate", lab_name, "--rates", "5k", "--duration", "1",
                      "--json")
        assert rate.returncode == 0, rate.stderr
        out = json.loads(rate.stdout)
        assert out["metrics"]["max_received_pps"] > 0, out["metrics"]
        # r's ingress (its first interface, towards src) was steered: RPS written in its sysfs
        assert out["params"]["cores"]["steered"] == ["r/eth0"], out["params"]["cores"]

        # sfclab's own sysfs of r's namespace, read-write down to its superblock
        mounts = marked_mounts(mark)
        assert [(m.target, m.fstype, m.super_options) for m in mounts] == \
            [(str(held), "sysfs", "rw")], mounts
        ifname = next(i["name"] for i in inspect(lab_name)["nodes"]["r"]["interfaces"])
        assert (held / "class" / "net" / ifname).is_dir()  # r's devices, not the root's

        # the container is still unprivileged: no CAP_SYS_ADMIN, its /sys read-only
        status = in_container(lab_name, "r", ["cat", "/proc/1/status"])
        eff = next(int(ln.split()[1], 16) for ln in status.stdout.splitlines()
                   if ln.startswith("CapEff:"))
        assert not eff & (1 << CAP_SYS_ADMIN), status.stdout
        seen = in_container(lab_name, "r", ["cat", "/proc/self/mountinfo"])
        sys_mount = next(m for m in sysfs.parse_mountinfo(seen.stdout) if m.target == "/sys")
        assert sys_mount.options.split(",")[0] == "ro", sys_mount
        write = in_container(lab_name, "r", [
            "sh", "-c", f"echo 0 > /sys/class/net/{ifname}/queues/rx-0/rps_cpus"])
        assert write.returncode != 0 and "Read-only file system" in write.stderr, write
    finally:
        down = sfclab("down", lab_name)
    assert down.returncode == 0, down.stderr
    assert marked_mounts(mark) == [] and not held.exists()
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)


def test_a_mount_without_the_mark_is_left_alone(tmp_path):
    """``release`` unmounts only a sysfs carrying its mark: a tmpfs at the place stays."""
    target = tmp_path / "held"
    target.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "someone-else", str(target)], check=True)
    try:
        why = sysfs.release(target, "sfclab:x:r:sysfs")
        assert why is not None and "left alone" in why, why
        m = sysfs.mount_at(target)
        assert m is not None and m.fstype == "tmpfs"
    finally:
        subprocess.run(["umount", str(target)], check=True)


def test_a_failed_up_unmounts_the_held_sysfs(tmp_path, lab_name, image):
    """The container's name is taken (a container made by hand under it): ``podman run``
    fails after the node's sysfs was held, and the rollback unmounts it (the hand-made
    container, not carrying the lab's labels, is left to its owner)."""
    from sfclab.kernel import podman
    from sfclab.plan.names import container_name

    name = container_name(lab_name, "r")
    made = subprocess.run(["podman", "create", "--name", name, "--network", "none", image,
                           "sleep", "infinity"], capture_output=True, text=True,
                          env=podman.env(), timeout=60)
    assert made.returncode == 0, made.stderr
    try:
        f = write_lab(tmp_path, lab_name,
                      f"  r: {{kind: router, image: {{name: {image}, cmd: [sleep, infinity]}}}}\n"
                      "  h: {kind: host}\n", "  - endpoints: [r, h]\n")
        cp = sfclab("up", str(f))
        assert cp.returncode != 0 and name in cp.stderr, cp.stderr
        assert marked_mounts(sysfs_mark(lab_name, "r")) == []
        assert not sysfs_dir(lab_name, "r").exists()
        assert nothing_left(lab_name), leftovers(lab_name)
        assert podman.inspect([name]), "the hand-made container is not the lab's to remove"
    finally:
        subprocess.run(["podman", "rm", "--force", "--", name], capture_output=True,
                       env=podman.env(), timeout=60)
