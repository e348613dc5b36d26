"""The evidence of one scripts/reproduce.sh run: its bundle, and checking a bundle.

A *bundle* is the run's OUT_DIR once the script has finished::

    OUT/reproduce.json       the record (.reprorun): run id, environment, groups, plan
    OUT/findings.yaml        the findings file as it was when the run began (the rule's
                             ranges, tolerances and margins are the ones fixed before it)
    OUT/NAME.db              each group's raw SQLite database
    OUT/NAME/...             each group's report (report.md, report.html, plots)
    OUT/NAME.json            each bench's figures
    OUT/trials/NAME.json     every trial of NAME.db as JSON (params, metrics, raw points,
                             per-run environment), stamped with the run id
    OUT/SHA256SUMS           the SHA-256 of every other file (``sha256sum -c`` reads it)

The *run id* (:func:`run_id`) is the UTC start time and the sfclab commit,
``20261123T071600Z-2add73eef8db`` (``+dirty`` when the work tree had uncommitted changes).
The page's generated blocks carry it (``<!-- repro:begin table p-fig1 run=ID -->``).

:func:`verify` accepts a bundle only when it is whole and from one run: every file listed in
SHA256SUMS with its checksum, no file that is not listed, each trials file stamped with the
record's run id, and every trial of every database started and ended within the run's
[started, ended] window (a database copied in from another run fails, even with its checksum
added).  :func:`keep` copies a verified bundle into a folder (e.g. one kept in the
repository) when it is under a size limit, else only its SHA256SUMS and how to rebuild it; it
replaces only what a previous bundle's SHA256SUMS in that folder lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .store import Store

SUMS = "SHA256SUMS"
TRIALS = "trials"
#: the largest bundle :func:`keep` copies whole (the repository's limit)
KEEP_LIMIT = 20 * 1024 * 1024


class BundleError(SpecError):
    """A bundle that is not whole, or not from one run (names the file)."""


def run_id(started: float, commit: str) -> str:
    """``YYYYmmddTHHMMSSZ-COMMIT`` from the start time (unix s) and ``git describe``-like
    commit text (``abc (with uncommitted changes)`` becomes ``abc+dirty``)."""
    c = commit.split()[0] if commit.split() else "unknown"
    if "uncommitted" in commit:
        c += "+dirty"
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)) + "-" + c


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(out: Path) -> list[str]:
    """Every regular file under ``out`` but SHA256SUMS, relative, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames.sort()
        for n in filenames:
            p = Path(dirpath) / n
            rel = p.relative_to(out).as_posix()
            if rel != SUMS and p.is_file() and not p.is_symlink():
                found.append(rel)
    return sorted(found)


def seal_databases(out: Path) -> None:
    """Fold each database's write-ahead log into the file and leave WAL mode, so the bundle's
    ``NAME.db`` is whole and reading it later creates no ``-wal``/``-shm`` files beside it."""
    for db in sorted(out.glob("*.db")):
        conn = sqlite3.connect(db, isolation_level=None, timeout=30)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode = DELETE")
        except sqlite3.DatabaseError as e:
            raise BundleError(f"cannot seal the database ({e})", file=str(db)) from None
        finally:
            conn.close()


def write_trials(out: Path, rid: str) -> list[Path]:
    """``trials/NAME.json`` for each ``NAME.db`` in ``out``: every run with its params,
    metrics, raw data and per-run environment, stamped with the run id."""
    (out / TRIALS).mkdir(exist_ok=True)
    written = []
    for db in sorted(out.glob("*.db")):
        with Store(db, readonly=True) as s:
            runs = json.loads(s.export("json"))
            for r in runs:
                r["raw"] = s.raw(r["id"])
                r["environment"] = s.run_environment(r["id"])
        path = out / TRIALS / f"{db.stem}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": rid, "database": db.name, "runs": runs},
                                  indent=1, sort_keys=True, default=str) + "\n")
        tmp.replace(path)
        written.append(path)
    return written


def write_sums(out: Path) -> Path:
    """SHA256SUMS over every other file of the bundle (``sha256sum -c`` format)."""
    lines = [f"{_sha256(out / rel)}  {rel}\n" for rel in _files(out)]
    path = out / SUMS
    tmp = out / (SUMS + ".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(path)
    return path


def _record(out: Path) -> dict[str, Any]:
    path = out / "reproduce.json"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise BundleError(f"expected the run's record ({e.strerror})", file=str(path)) from None
    except ValueError as e:
        raise BundleError(f"expected the JSON record of a run ({e})", file=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        raise BundleError("expected a record with a run id (a run of this version of "
                          "scripts/reproduce.sh)", file=str(path))
    return data


def verify(out: Path) -> str:
    """The bundle's run id, once it is proved whole and from one run (the module docstring);
    a :class:`BundleError` names the first file that is not."""
    if not out.is_dir():
        raise BundleError("expected the OUT_DIR of a scripts/reproduce.sh run", file=str(out))
    sums = out / SUMS
    try:
        listed_text = sums.read_text()
    except OSError:
        raise BundleError("expected SHA256SUMS: the run has not finished (or is not a "
                          "bundle)", file=str(sums)) from None
    listed: dict[str, str] = {}
    for i, line in enumerate(listed_text.splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or rel in listed or rel.startswith("/") \
                or ".." in Path(rel).parts:
            raise BundleError(f"expected 'SHA256  PATH' lines, got {line!r}", file=str(sums),
                              place=f"line {i}")
        listed[rel] = digest
    present = _files(out)
    for rel in present:
        if rel not in listed:
            raise BundleError("file not in SHA256SUMS: the bundle was added to after the run",
                              file=str(out / rel))
    for rel, digest in listed.items():
        if not (out / rel).is_file():
            raise BundleError("listed in SHA256SUMS but missing", file=str(out / rel))
        if _sha256(out / rel) != digest:
            raise BundleError("checksum differs from SHA256SUMS: changed after the run",
                              file=str(out / rel))
    rec = _record(out)
    rid = str(rec["run_id"])
    start, end = rec.get("started"), rec.get("ended")
    for rel in present:
        if rel.startswith(TRIALS + "/") and rel.endswith(".json"):
            got = json.loads((out / rel).read_text()).get("run_id")
            if got != rid:
                raise BundleError(f"trials of run {got}, the bundle is run {rid}",
                                  file=str(out / rel))
    if isinstance(start, (int, float)) and isinstance(end, (int, float)):
        for db in sorted(out.glob("*.db")):
            with Store(db, readonly=True) as s:
                for r in s.runs():
                    for t in (r.started, r.ended):
                        if t is not None and not start <= t <= end:
                            raise BundleError(
                                f"run {r.id} ran at {t:.0f}, outside this run's window "
                                f"{start:.0f}-{end:.0f}: a database of another run",
                                file=str(db))
    return rid


def size(out: Path) -> int:
    return sum((out / rel).stat().st_size for rel in _files(out))


def _listed(folder: Path) -> list[str]:
    """The files a previous bundle's SHA256SUMS in ``folder`` names (nothing else is ours)."""
    try:
        text = (folder / SUMS).read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        _, sep, rel = line.partition("  ")
        if sep and not rel.startswith("/") and ".." not in Path(rel).parts:
            out.append(rel)
    return out


def keep(out: Path, dest: Path, limit: int = KEEP_LIMIT) -> str:
    """Copy the verified bundle ``out`` into folder ``dest`` when it is under ``limit``
    bytes; else only its SHA256SUMS and a README with the command that rebuilds it.  ``dest``
    must be empty or hold a previous bundle: its files are replaced only when its own
    SHA256SUMS lists them (a folder with anything else in it is refused, nothing removed).
    Returns what was done, in a line."""
    rid = verify(out)
    total = size(out)
    if dest.exists():
        ours = set(_listed(dest)) | {"README"}
        stray = [rel for rel in _files(dest) if rel not in ours]
        if stray:
            raise BundleError(f"expected an empty folder or a previous bundle, found "
                              f"'{stray[0]}' not listed in its SHA256SUMS (nothing removed)",
                              file=str(dest))
        for rel in _files(dest):
            (dest / rel).unlink()
        if (dest / SUMS).exists():
            (dest / SUMS).unlink()
    dest.mkdir(parents=True, exist_ok=True)
    if total <= limit:
        for rel in _files(out) + [SUMS]:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out / rel, dest / rel)
        verify(dest)
        return f"bundle {rid} ({total / 1e6:.1f} MB) copied to {dest}"
    shutil.copy2(out / SUMS, dest / SUMS)
    (dest / "README").write_text(
        f"Bundle {rid}: {total / 1e6:.1f} MB, over the {limit / 1e6:.0f} MB kept here; only "
        f"its checksums are kept. They name the files of that run, kept where it ran\n"
        f"(its OUT_DIR): 'sha256sum -c SHA256SUMS' run there shows that a copy is that run's, "
        f"unchanged.\nA rerun (sudo scripts/reproduce.sh OUT_DIR, at commit "
        f"{rid.split('-', 1)[1]}) measures anew, so its files and checksums differ;\n"
        f"its page is checked against its own bundle with: scripts/repro_page.py check OUT_DIR "
        f"--page PAGE\n")
    return f"bundle {rid} ({total / 1e6:.1f} MB) over the limit: checksums kept in {dest}"
