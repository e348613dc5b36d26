"""Image recipes: the table of images sfclab builds, and each one's tag.

A *recipe* is a folder named after its image (``images/<name>/`` in the repository, plus the
folders of ``$SFCLAB_IMAGES``, a colon-separated list of directories of recipe folders).  Two
kinds, told apart by the files they hold:

- the **root** recipe (``base``): a ``packages`` file, Debian packages one a line (``#``
  comments).  It is built by ``mmdebstrap`` from Debian's archive (:data:`SUITE`, :data:`MIRROR`)
  and imported into podman's image store;
- a **derived** recipe: a ``Containerfile`` that begins ``ARG BASE`` / ``FROM ${BASE}`` and may
  ``COPY`` the other files of its folder; ``podman build`` runs it on the root image.  One that
  runs sfclab itself also holds a ``checkout`` file naming what it takes from this checkout
  (the package, its native tools, the Python packages it imports): those files are staged into
  its build context under ``checkout/`` (:mod:`.image_checkout`) and are part of its version.

Each image is tagged ``localhost/sfclab/<name>:<version>``.  The version is the first
:data:`VERSION_HEX` hex digits of a SHA-256 over the recipe's files (relative path, mode, content)
and, for a derived recipe, the root recipe's version: any change in a recipe, or in the base it
stands on, gives a new tag, and an unchanged recipe keeps its tag (the builder skips an image
whose tag the store has).  The builder also points ``localhost/sfclab/<name>:latest`` at the
current version, the name lab files use.  The recipe's first ``#`` comment lines are its
description.

Every input is bounded before it is read whole: a name matches :data:`NAME_RE`, a folder holds at
most :data:`MAX_FILES` files of at most :data:`MAX_BYTES` bytes together, and a name given twice
(in two directories) is refused, as the kinds' registries refuse a kind registered twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpecError
from . import image_checkout
from .image_checkout import Staged

#: the Debian release and archive the root image is made from (part of its version)
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
#: the recipe every derived recipe stands on
ROOT = "base"
#: where sfclab's images live in podman's store
REPOSITORY = "localhost/sfclab"
VERSION_HEX = 12
NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
PACKAGE_RE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,99}")
MAX_FILES = 64
MAX_BYTES = 1 << 20
MAX_PACKAGES = 200
PACKAGES = "packages"
CONTAINERFILE = "Containerfile"
_FROM_BASE = re.compile(r"\AARG BASE\s*\nFROM \$\{?BASE\}?(\s|\Z)")


@dataclass(frozen=True)
class Recipe:
    """One image recipe: its name, folder, description, Debian packages (root recipe only) and
    version (from its content and, for a derived recipe, the root's version)."""

    name: str
    folder: Path
    description: str
    packages: tuple[str, ...]
    version: str
    #: what it takes from this checkout (its ``checkout`` file), or None
    staged: Staged | None = None

    @property
    def root(self) -> bool:
        return self.name == ROOT

    @property
    def tag(self) -> str:
        return f"{REPOSITORY}/{self.name}:{self.version}"

    @property
    def latest(self) -> str:
        """The name lab files use (``localhost/sfclab/<name>:latest``): the builder points it
        at :attr:`tag` each time it builds or finds the image."""
        return f"{REPOSITORY}/{self.name}:latest"


def builtin_dir() -> Path:
    """The repository's ``images/`` folder."""
    return Path(__file__).resolve().parents[3] / "images"


def search_dirs() -> list[Path]:
    """The directories recipes are read from: the repository's, then ``$SFCLAB_IMAGES``'s."""
    extra = [Path(d) for d in os.environ.get("SFCLAB_IMAGES", "").split(":") if d]
    return [builtin_dir()] + extra


def _files(folder: Path) -> list[tuple[str, int, bytes]]:
    """(relative path, mode bits, content) of every file under ``folder``, sorted, bounded."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        found += [Path(dirpath) / f for f in filenames]
        if len(found) > MAX_FILES:
            raise SpecError(f"expected at most {MAX_FILES} files in a recipe",
                            file=str(folder))
    out, total = [], 0
    for path in sorted(found):
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise SpecError("expected regular files only in a recipe (no links or devices)",
                            file=str(path))
        total += st.st_size
        if total > MAX_BYTES:
            raise SpecError(f"expected at most {MAX_BYTES} bytes in a recipe's files",
                            file=str(folder))
        out.append((str(path.relative_to(folder)), stat.S_IMODE(st.st_mode) & 0o111,
                    path.read_bytes()))
    return out


def _description(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(x for x in lines if x)


def _packages(path: Path, text: str) -> tuple[str, ...]:
    names = []
    for n, line in enumerate(text.splitlines(), 1):
        word = line.split("#", 1)[0].strip()
        if not word:
            continue
        if not PACKAGE_RE.fullmatch(word):
            raise SpecError(f"expected a Debian package name, got {word!r}", file=str(path),
                            line=n)
        names.append(word)
    if not names or len(names) > MAX_PACKAGES:
        raise SpecError(f"expected 1 to {MAX_PACKAGES} packages", file=str(path))
    return tuple(names)


def digest(files: Iterable[tuple[str, int, bytes]], *extra: str) -> str:
    """The version of a recipe with these files (and ``extra`` words: the suite, the base)."""
    h = hashlib.sha256()
    for word in extra:
        h.update(word.encode() + b"\0")
    for rel, mode, content in files:
        h.update(f"{rel}\0{mode:o}\0{len(content)}\0".encode())
        h.update(content)
    return h.hexdigest()[:VERSION_HEX]


def read_recipe(folder: Path, base_version: str | None) -> Recipe:
    """The recipe in ``folder`` (its name is the folder's); ``base_version`` is the root
    recipe's version (``None`` when reading the root itself)."""
    name = folder.name
    files = _files(folder)
    contents = {rel: content for rel, _, content in files}
    if name == ROOT:
        if PACKAGES not in contents or CONTAINERFILE in contents:
            raise SpecError(f"expected the {ROOT!r} recipe to hold a {PACKAGES!r} file and no "
                            f"{CONTAINERFILE}", file=str(folder))
        text = contents[PACKAGES].decode("utf-8", "replace")
        return Recipe(name, folder, _description(text),
                      _packages(folder / PACKAGES, text), digest(files, SUITE, MIRROR))
    if CONTAINERFILE not in contents:
        raise SpecError(f"expected a {CONTAINERFILE} (or, for {ROOT!r} only, a {PACKAGES} "
                        "file)", file=str(folder))
    text = contents[CONTAINERFILE].decode("utf-8", "replace")
    body = "\n".join(ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))
    if not _FROM_BASE.match(body + "\n"):
        raise SpecError(f"expected the {CONTAINERFILE} to begin 'ARG BASE' then "
                        "'FROM ${BASE}' (sfclab's base image, passed by the builder)",
                        file=str(folder / CONTAINERFILE))
    assert base_version is not None
    if image_checkout.CHECKOUT not in contents:
        return Recipe(name, folder, _description(text), (), digest(files, ROOT, base_version))
    staged = image_checkout.read(folder / image_checkout.CHECKOUT)
    return Recipe(name, folder, _description(text), (),
                  digest(files + image_checkout.contents(staged), ROOT, base_version,
                         *staged.missing), staged)


def table(dirs: Iterable[Path] | None = None) -> dict[str, Recipe]:
    """Every recipe of ``dirs`` (default :func:`search_dirs`) by name, the root one first."""
    folders: dict[str, Path] = {}
    for d in search_dirs() if dirs is None else dirs:
        if not d.is_dir():
            raise SpecError("expected a directory of image recipes", file=str(d))
        for entry in sorted(d.iterdir()):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            if not NAME_RE.fullmatch(entry.name):
                raise SpecError(f"expected a recipe folder name matching {NAME_RE.pattern}",
                                file=str(entry))
            if entry.name in folders:
                raise SpecError(f"recipe {entry.name!r} is given twice (also in "
                                f"{folders[entry.name]})", file=str(entry))
            folders[entry.name] = entry
            if len(folders) > MAX_FILES:
                raise SpecError(f"expected at most {MAX_FILES} recipes", file=str(d))
    if ROOT not in folders:
        raise SpecError(f"expected a {ROOT!r} recipe among the image recipes",
                        file=":".join(str(d) for d in (dirs or search_dirs())))
    root = read_recipe(folders.pop(ROOT), None)
    out = {ROOT: root}
    for name, folder in folders.items():
        out[name] = read_recipe(folder, root.version)
    return out


def pick(recipes: dict[str, Recipe], names: Iterable[str]) -> list[Recipe]:
    """The recipes to build for ``names`` (all when none), each after the root, in table
    order; a name not in the table is bad input (it is never taken as a path)."""
    wanted = list(names) or list(recipes)
    for i, n in enumerate(wanted):
        if n not in recipes:
            raise SpecError(f"expected an image recipe name ({', '.join(recipes)}), got {n!r}",
                            place=f"NAME[{i}]" if len(wanted) > 1 else "NAME")
    chosen = set(wanted) | {ROOT}
    return [r for n, r in recipes.items() if n in chosen]
