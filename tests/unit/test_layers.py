"""The layer order is written once, in pyproject.toml's import-linter contract (``layers``),
which ``lint-imports`` enforces.  Every other place that writes it (the contract's own name,
the README, docs/labs.md, docs/architecture.md) must say the same order, and every package and
module at the top of ``src/sfclab`` must be in the contract, so that a new one cannot escape
the order."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sfclab"
#: the files that write the order out, as "`cli -> web -> ... -> errors`"
WRITTEN = ["README.md", "docs/labs.md", "docs/architecture.md"]
#: an order in backquotes: names joined by "->", wrapped across lines or not
ARROWS = re.compile(r"`(\w+(?:\s*->\s*\w+)+)`")


def contract() -> dict:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    layered = [c for c in data["tool"]["importlinter"]["contracts"]
               if c["type"] == "layers" and c["name"].startswith("Layers:")]
    assert len(layered) == 1, "one contract of the package's layers in pyproject.toml"
    return layered[0]


def layers() -> list[str]:
    """The contract's layers, top first, without the ``sfclab.`` prefix."""
    names = contract()["layers"]
    assert all(n.startswith("sfclab.") for n in names), names
    return [n.removeprefix("sfclab.") for n in names]


def orders(text: str) -> list[list[str]]:
    """Every order written in ``text`` (as names)."""
    return [re.split(r"\s*->\s*", m.group(1).strip()) for m in ARROWS.finditer(text)]


def test_orders_are_found_in_text_wrapped_across_lines() -> None:
    text = "stay one-way: `cli -> api -> plan\n-> errors`, checked; and `a -> b`."
    assert orders(text) == [["cli", "api", "plan", "errors"], ["a", "b"]]


@pytest.mark.parametrize("path", WRITTEN)
def test_the_written_order_is_the_contracts(path: str) -> None:
    written = orders((ROOT / path).read_text())
    assert len(written) == 1, f"{path}: expected the layer order written once, found {written}"
    assert written[0] == layers(), (
        f"{path} writes the layers as {' -> '.join(written[0])}; pyproject.toml's contract "
        f"has {' -> '.join(layers())}")


def test_the_contracts_name_is_its_order() -> None:
    name = contract()["name"]
    assert re.split(r"\s*->\s*", name.split(":", 1)[1].strip()) == layers(), name


def test_every_package_and_module_is_in_the_order() -> None:
    tops = sorted({p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} |
                  {p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")})
    assert tops, PACKAGE
    missing = [t for t in tops if t not in layers()]
    assert not missing, (f"sfclab.{missing[0]} is in no layer: add it to the layers contract "
                         "in pyproject.toml (and to the order written in the docs)")
    assert len(set(layers())) == len(layers()), "a layer named twice"
