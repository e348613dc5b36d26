"""Reading ``/proc/self/mountinfo`` for the held sysfs of a node (:mod:`sfclab.kernel.sysfs`)."""

from pathlib import Path

from sfclab.kernel import sysfs

TEXT = """\
27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
58 27 0:40 / /run/sfclab/sysfs/lab/r rw,nosuid,nodev,noexec,relatime - sysfs sfclab:lab:r:sysfs rw
110 107 0:46 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
111 27 0:47 / /mnt/with\\040space rw master:3 - tmpfs a\\134b rw,size=4k
not a line
"""


def test_fields_of_each_mount():
    ms = sysfs.parse_mountinfo(TEXT)
    assert [(m.target, m.fstype, m.source, m.super_options) for m in ms] == [
        ("/", "ext4", "/dev/vda1", "rw"),
        ("/run/sfclab/sysfs/lab/r", "sysfs", "sfclab:lab:r:sysfs", "rw"),
        ("/sys", "sysfs", "sysfs", "ro"),
        ("/mnt/with space", "tmpfs", "a\\b", "rw,size=4k"),
    ]
    assert ms[2].options.startswith("ro,")


def test_the_topmost_mount_at_a_place(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(TEXT + "120 58 0:50 / /run/sfclab/sysfs/lab/r rw - tmpfs other rw\n")
    m = sysfs.mount_at(Path("/run/sfclab/sysfs/lab/r"), info)
    assert m is not None and (m.fstype, m.source) == ("tmpfs", "other")
    assert sysfs.mount_at(Path("/nowhere"), info) is None
