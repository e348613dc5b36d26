"""What an image recipe takes from this checkout of sfclab: its ``checkout`` file, and the
files it names, staged into the recipe's build context under ``checkout/``.

A recipe that runs sfclab itself (``images/agent/``: the per-Node agent of labs on Kubernetes)
cannot ``COPY`` sfclab from its own folder: the package, its native tools and the Python
packages it imports live elsewhere in the checkout.  Its ``checkout`` file names them, one a
line (``#`` comments):

- ``PATTERN``: files of the checkout, a glob relative to its root (``**`` for any depth;
  ``__pycache__`` folders never), staged at the same relative path: ``src/sfclab/**/*.py``,
  ``native/build/sfc-steer``;
- ``python DIST``: a Python distribution installed beside sfclab (the files pip installed for
  it, as :mod:`importlib.metadata` lists them, from the Python this sfclab runs in: the pinned
  versions sfclab is tested with), staged under ``site-packages/``.

:func:`read` lists the files (their content is part of the recipe's version, so a change in
sfclab gives the image a new tag) and what is missing: a pattern that matches nothing (the
native tools not built yet) or a distribution not installed.  The table of recipes is read
whatever is missing; only a build of that recipe is refused, naming what is missing
(:func:`stage`).
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpecError

#: the recipe's file naming what it takes from the checkout
CHECKOUT = "checkout"
#: where the staged files go in the build context (and their folder's name in ``COPY``)
STAGE_DIR = "checkout"
SITE = "site-packages"
MAX_ENTRIES = 64
#: at most this many files, of at most this many bytes together, are staged
MAX_FILES = 4096
MAX_BYTES = 256 << 20
_PATTERN_RE = re.compile(r"[A-Za-z0-9_.*/-]{1,200}")
_DIST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True)
class Staged:
    """What a recipe takes from the checkout: each file (path in the build context's
    ``checkout/``, path on this machine, mode bits) and what is missing (one phrase each)."""

    files: tuple[tuple[str, Path, int], ...]
    missing: tuple[str, ...]


def checkout_root() -> Path:
    """The root of this checkout (the folder holding ``src/sfclab``)."""
    return Path(__file__).resolve().parents[3]


def _entries(path: Path, text: str) -> list[tuple[int, str, str]]:
    """(line, kind, word) of each entry: kind ``glob`` or ``python``."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "python" and len(words) == 2 and _DIST_RE.fullmatch(words[1]):
            out.append((n, "python", words[1]))
        elif len(words) == 1 and _PATTERN_RE.fullmatch(words[0]) and \
                not words[0].startswith("/") and ".." not in words[0].split("/"):
            out.append((n, "glob", words[0]))
        else:
            raise SpecError("expected a glob of the checkout (relative, no '..') or "
                            f"'python DIST', got {line.strip()!r}", file=str(path), line=n)
    if len(out) > MAX_ENTRIES:
        raise SpecError(f"expected at most {MAX_ENTRIES} entries", file=str(path))
    return out


def _glob(root: Path, pattern: str) -> list[tuple[str, Path]]:
    found = []
    for p in sorted(root.glob(pattern)):
        rel = p.relative_to(root)
        if "__pycache__" in rel.parts or not p.is_file() or p.is_symlink():
            continue
        found.append((str(rel), p))
    return found


def _dist(name: str) -> list[tuple[str, Path]] | None:
    """The files of installed distribution ``name`` inside its site-packages (scripts and
    bytecode left out); None when it is not installed."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    out = []
    for f in dist.files or []:
        parts = Path(str(f)).parts
        if not parts or parts[0] == ".." or "__pycache__" in parts or str(f).endswith(".pyc"):
            continue
        p = Path(str(dist.locate_file(f)))
        if p.is_file():
            out.append((f"{SITE}/{Path(*parts)}", p))
    return sorted(out)


def read(recipe_file: Path, root: Path | None = None) -> Staged:
    """The files the recipe's ``checkout`` file names (see the module), bounded."""
    root = root or checkout_root()
    files: dict[str, tuple[Path, int]] = {}
    missing = []
    for n, kind, word in _entries(recipe_file, recipe_file.read_text()):
        got = _dist(word) if kind == "python" else _glob(root, word)
        if not got:
            missing.append(f"{recipe_file}:{n}: " + (
                f"the Python distribution {word!r} is not installed beside sfclab"
                if kind == "python" else f"no file of this checkout matches {word!r} "
                "(make setup builds the native tools)"))
            continue
        for rel, p in got:
            files[rel] = (p, stat.S_IMODE(p.stat().st_mode) & 0o111)
    if len(files) > MAX_FILES:
        raise SpecError(f"expected at most {MAX_FILES} files staged", file=str(recipe_file))
    total = sum(p.stat().st_size for p, _ in files.values())
    if total > MAX_BYTES:
        raise SpecError(f"expected at most {MAX_BYTES >> 20} MiB staged, got "
                        f"{total >> 20} MiB", file=str(recipe_file))
    return Staged(tuple((rel, p, mode) for rel, (p, mode) in sorted(files.items())),
                  tuple(missing))


def contents(staged: Staged) -> list[tuple[str, int, bytes]]:
    """(path, mode bits, content) of each staged file: part of the recipe's version."""
    return [(f"{STAGE_DIR}/{rel}", mode, p.read_bytes()) for rel, p, mode in staged.files]


def stage(staged: Staged, folder: Path, context: Path) -> None:
    """Make the build context ``context``: the recipe's ``folder`` (but its ``checkout``
    file, whose name the staged files' folder takes) and, under ``checkout/``, the staged
    files; refused (:class:`SpecError`) when anything is missing."""
    if staged.missing:
        raise SpecError("the recipe needs what this checkout lacks: " + "; ".join(staged.missing),
                        file=str(folder / CHECKOUT))
    shutil.copytree(folder, context, ignore=lambda d, names: [CHECKOUT] if Path(d) == folder
                    else [])
    for rel, p, _ in staged.files:
        dest = context / STAGE_DIR / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest)
