"""The kernel's log as records (``/dev/kmsg``), read without consuming it: the memory
cgroups' OOM kills.

When a memory cgroup's limit is hit and the kernel kills a process for it, it logs one record
``oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=<path>,task_memcg=<path>,task=<comm>,
pid=<pid>,uid=<uid>``: the cgroup whose limit was hit and the victim's own cgroup.  This is
the kernel's own account of the kill, and it outlives the cgroup (a container runtime removes
its cgroup when the container exits).  The log is a ring: a record older than what it holds is
gone.  Opening ``/dev/kmsg`` starts at its oldest record; reading does not remove any.
"""

from __future__ import annotations

import errno
import os

KMSG = "/dev/kmsg"
#: the most records read in one pass (the ring holds far fewer)
MAX_RECORDS = 1_000_000
_BUF = 8192
OOM_KILL = "oom-kill:"


def records(prefix: str) -> list[str]:
    """The text of every record in the kernel's log that starts with ``prefix``."""
    out: list[str] = []
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        for _ in range(MAX_RECORDS):
            try:
                rec = os.read(fd, _BUF)
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    break  # the end of the log
                if e.errno == errno.EPIPE:
                    continue  # the ring overwrote records under us: go on with the next
                raise
            if not rec:
                break
            text = rec.decode(errors="replace").split(";", 1)[-1].split("\n", 1)[0]
            if text.startswith(prefix):
                out.append(text)
    finally:
        os.close(fd)
    return out


def oom_kills() -> list[dict[str, str]]:
    """Each OOM kill the log still holds, as its ``key=value`` fields (``oom_memcg``,
    ``task_memcg``, ``task``, ``pid`` ...)."""
    return [oom_kill_fields(text) for text in records(OOM_KILL)]


def oom_kill_fields(text: str) -> dict[str, str]:
    """The ``key=value`` fields of one ``oom-kill:`` record's text."""
    fields: dict[str, str] = {}
    for item in text.removeprefix(OOM_KILL).split(","):
        k, sep, v = item.partition("=")
        if sep:
            fields[k] = v
    return fields
