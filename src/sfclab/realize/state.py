"""The state journal: what a lab owns, written before anything is made.

Layout under the state directory (``$SFCLAB_STATE_DIR``, default ``/run/sfclab``: labs do not
survive a reboot, and neither do namespaces)::

    labs/<lab>.lock          flock held by up/down of <lab>
    labs/<lab>/meta.json     status (building | up | failed | removing), pid, times, source
    labs/<lab>/plan.json     the plan: every object, its name and mark
    labs/<lab>/journal       one JSON line per object, appended *before* the object is made
    labs/<lab>/lab.yaml      the expanded lab file
    labs/<lab>/nodes/<node>/ state of the node's function (pids, counters, cgroups)

``down`` works from ``plan.json`` + ``journal`` alone, so it needs neither the lab file nor the
process that built the lab, and a ``kill -9`` at any moment leaves enough to remove everything.
It never trusts a line of the journal by itself: :meth:`LabState.read_journal` hands back only
entries that are well formed and name this lab's objects (:mod:`sfclab.realize.ownership`),
and says why of every other line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import LabError
from . import ownership
from ..spec.names import check_lab_name, lab_name_problem


def state_root() -> Path:
    return Path(os.environ.get("SFCLAB_STATE_DIR", "/run/sfclab"))


def labs_dir() -> Path:
    return state_root() / "labs"


@dataclass
class LabState:
    """The state directory of lab ``name``; a name that breaks the name rule is refused here,
    before any path is built from it (so ``../x`` never reaches the file system)."""

    name: str

    def __post_init__(self) -> None:
        check_lab_name(self.name)

    @property
    def dir(self) -> Path:
        return labs_dir() / self.name

    @property
    def exists(self) -> bool:
        return (self.dir / "meta.json").exists() or (self.dir / "journal").exists()

    def node_dir(self, node: str) -> Path:
        return self.dir / "nodes" / node

    # --- meta -----------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "meta.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {"status": "unknown"} if self.exists else {}

    def set_meta(self, **kw: Any) -> None:
        m = self.meta()
        m.update(kw)
        _atomic_write(self.dir / "meta.json", json.dumps(m, indent=1))

    # --- plan and journal -------------------------------------------------------------------
    def begin(self, plan: dict[str, Any], expanded_yaml: str, source: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=False)
        _atomic_write(self.dir / "plan.json", json.dumps(plan))
        _atomic_write(self.dir / "lab.yaml", expanded_yaml)
        self.set_meta(status="building", pid=os.getpid(), created=time.time(), source=source)

    def save_plan(self, plan: dict[str, Any]) -> None:
        """Replace the lab's plan (a running lab changed: a chain added, its hosts placed)."""
        _atomic_write(self.dir / "plan.json", json.dumps(plan))

    def plan(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / "plan.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def record(self, entries: list[dict[str, Any]]) -> None:
        """Append intent entries to the journal and make them durable before creating."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(e) + "\n" for e in entries).encode()
        fd = os.open(self.dir / "journal", os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            if end and os.pread(fd, 1, end - 1) != b"\n":  # a torn tail: end its line first
                data = b"\n" + data
            view = memoryview(data)
            while view:  # one write as a rule; a signal may end it early
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def journal(self) -> list[dict[str, Any]]:
        """The journal's entries that are well formed and name this lab's objects."""
        return self.read_journal()[0]

    def read_journal(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The journal's usable entries, and one report per line that is not (not JSON, not
        an object, a field missing, an object that is not this lab's), naming the line and
        why; such a line is left alone.  A last line with no newline that is not JSON is the
        tail of a record torn by a crash while it was appended (a SIGKILL may end a write of
        more than a page part way): :meth:`record` makes its entries durable before anything
        they name is made, so nothing it names exists; it is skipped, not reported."""
        entries: list[dict[str, Any]] = []
        problems: list[str] = []
        with contextlib.suppress(FileNotFoundError):
            with open(self.dir / "journal", errors="replace") as f:
                for n, line in enumerate(_lines(f), start=1):
                    if line is None:
                        problems.append(f"journal line {n}: longer than {JOURNAL_LINE_MAX} "
                                        "characters (no entry is); skipped")
                        continue
                    if not line.strip():
                        continue
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        if not line.endswith("\n") and not f.read(1):
                            continue  # the torn tail of the last record (see above)
                        problems.append(f"journal line {n} {ownership.quote(line)}: not JSON; "
                                        "skipped")
                        continue
                    why = ownership.entry_problem(self.name, entry)
                    if why:
                        problems.append(f"journal line {n} {ownership.quote(entry)}: {why}; "
                                        "left alone")
                    else:
                        entries.append(entry)
        return entries, problems

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- locking --------------------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return labs_dir() / f"{self.name}.lock"

    @contextlib.contextmanager
    def locked(self, wait: float = 0.0) -> Iterator[None]:
        """Hold the lab's lock, waiting for it up to ``wait`` seconds; a lab that has no state
        when it is released (a refused or rolled-back ``up``, a finished ``down``) leaves no
        lock file either."""
        labs_dir().mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if not flock_within(fd, wait):
                raise LabError(f"lab '{self.name}' is busy: another sfclab up/down of it is "
                               "running")
            try:
                yield
            finally:
                if not self.dir.exists():
                    self.lock_path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def flock_within(fd: int, wait: float) -> bool:
    """Take the exclusive lock on ``fd``, trying for up to ``wait`` seconds; whether it did."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


#: the longest journal line read (an entry is a few hundred characters; a remote host's, with
#: its SSH target, a few thousand)
JOURNAL_LINE_MAX = 64 * 1024


def _lines(f: TextIO) -> Iterator[str | None]:
    """The lines of ``f``; ``None`` for one longer than :data:`JOURNAL_LINE_MAX` (never held
    whole in memory)."""
    while True:
        line = f.readline(JOURNAL_LINE_MAX + 1)
        if not line:
            return
        if len(line) > JOURNAL_LINE_MAX and not line.endswith("\n"):
            while line and not line.endswith("\n"):
                line = f.readline(JOURNAL_LINE_MAX)
            yield None
            continue
        yield line


def all_labs() -> list[LabState]:
    d = labs_dir()
    if not d.is_dir():
        return []
    return [LabState(p.name) for p in sorted(d.iterdir())
            if p.is_dir() and lab_name_problem(p.name) is None]


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _atomic_write(path: Path, text: str | bytes) -> None:
    """``path`` holds ``text`` whole or not at all (written beside, synced, renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
