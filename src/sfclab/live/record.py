"""What chain commands keep in a running lab's state directory, beside the lab's own files.

Layout (under ``labs/<lab>/`` of :mod:`sfclab.realize.state`)::

    added/<chain>.json        an added chain: its Addition (nodes, labels, directions) and
                              status (adding | up | removing)
    moved/<chain>.json        a chain of the lab file some of whose functions ``chain migrate``
                              moved: an Addition holding the clones (the instances now on its
                              paths) and ``moved``: lab-file node -> the clone that took its
                              place (see :mod:`sfclab.live.ops.migrate`)
    classify/<chain>/<n>.*    classifiers added by ``chain classify``: a copy of the file
                              and a note (source, counts)
    events.jsonl              health and failover events (one JSON object a line)
    watcher.json              the lab's health watcher: pid, its namespace

The lab's ``plan.json`` is rewritten (atomically) with every added node, link and chain merged
in, so ``down``, ``inspect`` and ``chain ls/inspect`` know them; the journal gets an entry for
each namespace before it is made.  Chain commands hold the lab's lock (the one ``up`` and
``down`` take), waiting up to ``wait`` seconds for another command to finish.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import LabError
from ..plan.chainadd import Addition
from ..plan.model import Plan
from ..plan.sfc import SteeringPlan
from ..realize import moved as views
from ..realize.state import LabState, _atomic_write, flock_within

#: how long a chain command waits for another command on the same lab
DEFAULT_WAIT_S = 60.0


@contextlib.contextmanager
def lab_lock(state: LabState, wait: float = DEFAULT_WAIT_S,
             what: str = "chain command") -> Iterator[None]:
    """Hold the lab's lock (the one of ``up``/``down``); wait for it up to ``wait`` seconds."""
    if not state.exists:
        raise LabError(f"no lab named '{state.name}'")
    fd = os.open(state.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if not flock_within(fd, wait):
            raise LabError(f"lab '{state.name}' is busy: another sfclab command on it is "
                           f"running (waited {wait:g} s for the {what})")
        if not state.exists:
            raise LabError(f"lab '{state.name}' went down while the {what} waited")
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def slot_lock(state: LabState, *, wait: bool = True) -> Iterator[bool]:
    """Serializes what changes slot tables and the plan's instances under the watcher's feet
    (``chain add``/``rm``/``migrate``, and each watcher probe).  Blocking; with ``wait``
    False it yields whether it got the lock (a watcher's probe that did not only keeps its
    peers informed, never waits behind a change)."""
    fd = os.open(state.dir / "slots.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def save_plan(state: LabState, plan: Plan) -> None:
    state.save_plan(plan.to_dict())


def added_dir(state: LabState) -> Path:
    return state.dir / "added"


def save_addition(state: LabState, add: Addition, status: str) -> None:
    added_dir(state).mkdir(parents=True, exist_ok=True)
    _atomic_write(added_dir(state) / f"{add.chain}.json",
                  json.dumps({"status": status, "addition": add.to_dict()}))


def load_addition(state: LabState, chain: str) -> tuple[Addition, str] | None:
    try:
        d = json.loads((added_dir(state) / f"{chain}.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return Addition.from_dict(d["addition"]), d["status"]


def additions(state: LabState) -> dict[str, tuple[Addition, str]]:
    out = {}
    d = added_dir(state)
    if d.is_dir():
        for p in sorted(d.glob("*.json")):
            got = load_addition(state, p.stem)
            if got:
                out[p.stem] = got
    return out


def drop_addition(state: LabState, chain: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (added_dir(state) / f"{chain}.json").unlink()


def rmdir_if_empty(d: Path) -> None:
    """Remove folder ``d`` of the lab's state if it is empty (else, or gone, it stays)."""
    try:
        d.rmdir()
    except OSError:  # not empty (another node's, another chain's) or gone: it stays as it is
        pass


def moved_dir(state: LabState) -> Path:
    return views.moved_dir(state)  # the views (inspect, graph) read its ``moved`` part


def save_moved(state: LabState, add: Addition, moved: dict[str, str]) -> None:
    """Keep the clones that stand in for functions of lab-file chain ``add.chain``."""
    moved_dir(state).mkdir(parents=True, exist_ok=True)
    _atomic_write(moved_dir(state) / f"{add.chain}.json",
                  json.dumps({"moved": moved, "addition": add.to_dict()}))


def moves(state: LabState) -> dict[str, tuple[Addition, dict[str, str]]]:
    """chain -> (its clones as an Addition, lab-file node -> clone), lab-file chains only."""
    out = {}
    d = moved_dir(state)
    if d.is_dir():
        for p in sorted(d.glob("*.json")):
            with contextlib.suppress(ValueError, KeyError, OSError):
                x = json.loads(p.read_text())
                out[p.stem] = (Addition.from_dict(x["addition"]), dict(x["moved"]))
    return out


def placed(state: LabState) -> list[Addition]:
    """Every record of nodes made on the running lab: added chains and clones of lab-file
    functions (what placement, tunnels and ``host ls`` count)."""
    return [a for a, _ in additions(state).values()] + [a for a, _ in moves(state).values()]


# ---------------------------------------------------------------------------------- events
def event(state: LabState, kind: str, **kw: Any) -> dict[str, Any]:
    e = {"time": round(time.time(), 3), "event": kind, **kw}
    with open(state.dir / "events.jsonl", "a") as f:
        f.write(json.dumps(e) + "\n")
    return e


def events(state: LabState) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        with open(state.dir / "events.jsonl") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
    return out


# ------------------------------------------------------------------- classify (issue 12)
def classify_dir(state: LabState, chain: str) -> Path:
    return state.dir / "classify" / chain


def save_classifiers(state: LabState, chain: str, source: str, data: bytes, classifiers: int,
                     entries: int, status: str) -> Path:
    """Keep what ``chain classify`` writes to the maps, *before* it writes: the bytes it read
    and validated (a file's or a pipe's, read once), and a note of their source, counts and
    ``status`` (writing, written, failed), one pair per command, so inspect, ``chain rm`` and
    a rebuild know them.  Returns the note (:func:`update_classifiers`,
    :func:`drop_classifiers`)."""
    d = classify_dir(state, chain)
    d.mkdir(parents=True, exist_ok=True)
    n = max([int(p.stem) for p in d.glob("*.json") if p.stem.isdigit()], default=-1) + 1
    copy = d / f"{n:04d}.classifiers"
    _atomic_write(copy, data)
    note = d / f"{n:04d}.json"
    _atomic_write(note, json.dumps({"source": source if source.startswith("<")
                                    else os.path.abspath(source), "file": str(copy),
                                    "classifiers": classifiers, "entries": entries,
                                    "status": status}))
    return note


def update_classifiers(note: Path, **fields: Any) -> None:
    """Change fields of a note of :func:`save_classifiers` (its status, the entries written)."""
    _atomic_write(note, json.dumps(json.loads(note.read_text()) | fields))


def drop_classifiers(note: Path) -> None:
    """Forget a :func:`save_classifiers` whose entries were all taken out again."""
    note.unlink(missing_ok=True)
    note.with_suffix(".classifiers").unlink(missing_ok=True)


def saved_classifiers(state: LabState, chain: str) -> list[dict[str, Any]]:
    """The notes of :func:`save_classifiers`, oldest first (``file``: the copy to read)."""
    out = []
    d = classify_dir(state, chain)
    if d.is_dir():
        for p in sorted(d.glob("*.json")):
            with contextlib.suppress(ValueError, OSError):
                out.append(json.loads(p.read_text()))
    return out


def steering_of(plan: Plan) -> SteeringPlan:
    """The plan's chains (none: an empty steering plan)."""
    return plan.steering.copy() if plan.steering else SteeringPlan()
