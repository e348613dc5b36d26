"""Each package's docstring lists its modules: every module and subpackage of a package of
``src/sfclab`` is named in the package's ``__init__.py`` docstring by a ``:mod:`` reference
(``:mod:`.name```, or the full ``sfclab.pkg.name``), so the docstring is a map a reader can
trust and a new module cannot be added without a line saying what it is for."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = sorted(p.parent for p in (SRC / "sfclab").rglob("__init__.py"))


def members(pkg: Path) -> list[str]:
    """The modules and subpackages of ``pkg`` (``__main__`` is the package run, not a part)."""
    mods = [p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__")]
    subs = [p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()]
    return sorted(mods + subs)


def unnamed(pkg: Path, src: Path = SRC) -> list[str]:
    """The members of ``pkg`` (under ``src``) its docstring names by no ``:mod:`` reference."""
    doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
    dotted = ".".join(pkg.relative_to(src).parts)
    named = set()
    for ref in re.findall(r":mod:`~?([\w.]+)`", doc):
        if ref.startswith("."):
            ref = dotted + ref
        if ref.startswith(dotted + "."):
            named.add(ref[len(dotted) + 1:].split(".")[0])
    return [m for m in members(pkg) if m not in named]


def test_a_module_left_out_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "sfclab" / "thing"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Things: :mod:`.one`, :mod:`sfclab.thing.sub`, and '
                                     ':mod:`sfclab.other.two` (not ours)."""\n')
    for m in ("one", "two", "three"):
        (pkg / f"{m}.py").write_text("")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    assert unnamed(pkg, tmp_path) == ["three", "two"]


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: ".".join(p.relative_to(SRC).parts))
def test_the_package_docstring_names_every_module(pkg: Path) -> None:
    missing = unnamed(pkg)
    assert not missing, (f"{pkg / '__init__.py'}: its docstring names no "
                         f"{', '.join(':mod:`.' + m + '`' for m in missing)}")
