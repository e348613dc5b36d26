"""A network namespace's sysfs, held read-write by a mount of sfclab's own.

**Why.**  sysfs shows a network namespace's devices (``/sys/class/net/...``) through one
superblock per namespace: every sysfs mount made from inside the same namespace shares it, and
the superblock keeps the read-only flag of the mount that created it (a later mount reuses it
as it is).  runc mounts sysfs read-only in a container that is not privileged; when that
container joins a node's namespace and no other sysfs of that namespace exists at that moment,
runc's mount creates the superblock read-only, and every later sysfs of the namespace (the one
``ip netns exec`` mounts on its private ``/sys``) is read-only too: writing
``/sys/class/net/IF/queues/rx-0/rps_cpus`` fails with "Read-only file system".  Seen in
``/proc/self/mountinfo``: the mount's own options say ``rw``, its superblock's (last column)
``ro``.

**The hold.**  :func:`hold` mounts a sysfs of the namespace read-write at a directory of the
caller's choosing, from a thread that has entered the namespace (sysfs takes the mounting
thread's namespace), *before* the container starts.  The superblock is then created read-write
and stays so while the hold is mounted; runc's mount reuses it with a read-only flag of its own
on the mount (``MNT_READONLY``), so the container still sees, and can only read, a read-only
``/sys``, while sfclab's ``ip netns exec`` sees a writable one.  A mount references its
namespace: the hold must be released (:func:`release`) before the namespace is deleted, or the
namespace and its interfaces outlive the delete.

**Mark.**  The mount's source (the first field sysfs ignores, shown by ``findmnt`` and in
``/proc/self/mountinfo``) is the owner's mark.  :func:`release` unmounts a directory only while
the mount found there is a sysfs whose source is exactly that mark.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import RealizeError
from . import netns

MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
UMOUNT_NOFOLLOW = 8
MOUNTINFO = Path("/proc/self/mountinfo")


@functools.cache
def _lib() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``: where, what file system, its source."""

    target: str
    fstype: str
    source: str
    options: str        #: the mount's own (``rw,nosuid,...``)
    super_options: str  #: its superblock's (``rw`` or ``ro`` for sysfs)


def _unescape(field: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash as octal (``\040``)."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/PID/mountinfo`` text (lines that are not one are skipped)."""
    out: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if not sep or len(a) < 6 or len(b) < 3:
            continue
        out.append(Mount(target=_unescape(a[4]), options=a[5], fstype=b[0],
                         source=_unescape(b[1]), super_options=b[2]))
    return out


def mount_at(target: Path, mountinfo: Path = MOUNTINFO) -> Mount | None:
    """The topmost mount at ``target`` in this process's mount namespace, or None."""
    want = os.path.abspath(target)
    found = [m for m in parse_mountinfo(mountinfo.read_text()) if m.target == want]
    return found[-1] if found else None


def hold(ns: str, target: Path, mark: str) -> None:
    """Mount a read-write sysfs of namespace ``ns`` at ``target`` (made if absent), with
    source ``mark``.  Raises :class:`~sfclab.errors.RealizeError` naming the mount."""
    what = f"sysfs of {ns} at {target}"
    target.mkdir(parents=True, exist_ok=True)
    with netns.entered(ns):
        rc = _lib().mount(mark.encode(), str(target).encode(), b"sysfs",
                          MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        err = ctypes.get_errno()
    if rc != 0:
        raise RealizeError(os.strerror(err), obj=what, errno=err)


def release(target: Path, mark: str) -> str | None:
    """Unmount the sysfs at ``target`` if it carries ``mark``, then remove the (empty)
    directory.  ``None`` when done or nothing is there; else why it was left."""
    try:
        m = mount_at(target)
    except OSError as e:
        return f"{target}: the mount table cannot be read: {e.strerror or e}"
    if m is not None:
        if m.fstype != "sysfs" or m.source != mark:
            return (f"{target}: the mount there is {m.fstype} from {m.source!r}, not sfclab's "
                    f"sysfs {mark!r}; left alone")
        if _lib().umount2(str(target).encode(), netns.MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
            err = ctypes.get_errno()
            if err not in (_errno.EINVAL, _errno.ENOENT):
                return f"{target}: umount: {os.strerror(err)}"
    try:
        target.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        return f"{target}: {e.strerror or e}"
    return None
