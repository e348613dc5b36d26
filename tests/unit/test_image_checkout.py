"""A recipe that takes files from this checkout (:mod:`sfclab.kernel.image_checkout`): the
agent's recipe covers what the agent imports, staged files are part of the version, what is
missing refuses only that recipe's build, and the build context holds the staged files."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from sfclab.errors import SpecError
from sfclab.kernel import image_build, image_checkout, image_recipes
from sfclab.kernel.image_build import Done

from .test_images import BUILTIN, FakeRunner

def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: the packages of sfclab the agent runs (the layers below sfclab.api, as pyproject.toml's
#: import contract orders them): what they import, at the top of a module or inside a
#: function, must be in the agent's image
AGENT_SIDE = ("live", "traffic", "realize", "hosts", "functions", "plan", "spec", "kernel")
#: what they import that the image leaves out, and why
LEFT_OUT = {"asyncssh": "the client side of SSH hosts: an agent reaches no host over SSH"}


def imported(package: Path) -> dict[str, set[str]]:
    """Each module outside the standard library that ``package``'s files import, wherever in
    the file, with the files that do."""
    out: dict[str, set[str]] = {}
    for f in package.rglob("*.py"):
        for n in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module] if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module \
                else []
            for m in names:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top != "sfclab":
                    out.setdefault(top, set()).add(f.name)
    return out


def test_the_agents_recipe_covers_what_the_agent_side_imports() -> None:
    """Every module outside the standard library that the agent's side of sfclab imports
    (lazily too: pyroute2 only once a part is built) comes from a distribution the recipe
    stages, or is left out for a stated reason."""
    src = Path(image_recipes.__file__).resolve().parents[1]
    mods: dict[str, set[str]] = {}
    for pkg in AGENT_SIDE:
        for m, files in imported(src / pkg).items():
            mods.setdefault(m, set()).update(files)
    assert {"pydantic", "yaml", "pyroute2"} <= set(mods)  # the scan sees what it should
    owners = importlib.metadata.packages_distributions()
    text = (BUILTIN / "agent" / "checkout").read_text()
    staged = {_norm(w) for w in re.findall(r"^python (\S+)", text, re.M)}
    missing = {m: sorted(files) for m, files in mods.items() if m not in LEFT_OUT
               and not {_norm(d) for d in owners.get(m, [m])} <= staged}
    assert not missing, f"imported by the agent's side, not in its image: {missing}"
    # and what those distributions need in turn, on this machine
    for d in list(staged):
        for text in importlib.metadata.requires(d) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                assert _norm(req.name) in staged, f"{d} requires {text}"


def test_the_agents_recipe_stages_sfclab_its_tools_and_packages() -> None:
    agent = image_recipes.table()["agent"]
    assert agent.staged is not None
    rels = {rel for rel, _, _ in agent.staged.files}
    assert "src/sfclab/realize/runtime/kubernetes_agent.py" in rels
    assert not any("__pycache__" in r for r in rels)
    assert any(r.startswith("site-packages/pydantic_core/") and r.endswith(".so") for r in rels)
    steer = "native/build/sfc-steer"
    assert steer in rels or any(steer in m for m in agent.staged.missing)


def recipe_dir(tmp_path: Path, checkout: str) -> Path:
    """The builtin base and a recipe 'mine' taking ``checkout`` from a checkout at
    ``tmp_path/co`` (which holds src/x.py and tools/t)."""
    images = tmp_path / "images"
    images.mkdir()
    shutil.copytree(BUILTIN / "base", images / "base")
    (images / "mine").mkdir()
    (images / "mine" / "Containerfile").write_text(
        "# mine\nARG BASE\nFROM ${BASE}\nCOPY checkout/ /opt/x/\n")
    (images / "mine" / "checkout").write_text(checkout)
    co = tmp_path / "co"
    (co / "src").mkdir(parents=True)
    (co / "src" / "x.py").write_text("x = 1\n")
    (co / "src" / "__pycache__").mkdir()
    (co / "src" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (co / "tools").mkdir()
    (co / "tools" / "t").write_text("#!/bin/sh\n")
    (co / "tools" / "t").chmod(0o755)
    return images


@pytest.fixture
def checkout_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(image_checkout, "checkout_root", lambda: tmp_path / "co")
    return tmp_path / "co"


def test_a_staged_files_content_and_mode_are_part_of_the_version(
        tmp_path: Path, checkout_at: Path) -> None:
    images = recipe_dir(tmp_path, "src/**/*.py\ntools/t\npython PyYAML\n")
    before = image_recipes.table([images])["mine"]
    assert before.staged is not None and not before.staged.missing
    rels = [rel for rel, _, _ in before.staged.files]
    assert "src/x.py" in rels and "tools/t" in rels and "site-packages/yaml/__init__.py" in rels
    assert not any(".pyc" in r for r in rels)
    assert image_recipes.table([images])["mine"].version == before.version
    (checkout_at / "src" / "x.py").write_text("x = 2\n")
    changed = image_recipes.table([images])["mine"]
    assert changed.version != before.version
    (checkout_at / "tools" / "t").chmod(0o644)
    assert image_recipes.table([images])["mine"].version != changed.version


class ContextRunner(FakeRunner):
    """Records the build context's files (relative paths) when ``podman build`` runs."""

    def __init__(self) -> None:
        super().__init__()
        self.context: list[str] = []

    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        if argv[:2] == ["podman", "build"]:
            ctx = Path(argv[-1])
            self.context = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*")
                                  if p.is_file())
        return super().run(argv, on_line)


def test_the_build_context_holds_the_folder_and_the_staged_files(
        tmp_path: Path, checkout_at: Path) -> None:
    images = recipe_dir(tmp_path, "src/**/*.py\ntools/t\n")
    t = image_recipes.table([images])
    runner = ContextRunner()
    rows = image_build.build(image_recipes.pick(t, ["mine"]), runner)
    assert [r["built"] for r in rows] == [True, True]
    assert runner.context == ["Containerfile", "checkout/src/x.py", "checkout/tools/t"]
    build = next(c for c in runner.calls if c[:2] == ["podman", "build"])
    assert build[build.index("-t") + 1] == t["mine"].tag
    assert not Path(build[-1]).exists()  # the temporary context is removed


def test_what_is_missing_refuses_only_that_recipes_build(tmp_path: Path,
                                                        checkout_at: Path) -> None:
    images = recipe_dir(tmp_path, "src/**/*.py\nnative/build/sfc-nothing\n"
                                  "python no-such-distribution-here\n")
    t = image_recipes.table([images])  # the table is read
    mine = t["mine"]
    assert mine.staged is not None and len(mine.staged.missing) == 2
    runner = FakeRunner(present={t["base"].tag})
    with pytest.raises(SpecError) as e:
        image_build.build(image_recipes.pick(t, ["mine"]), runner)
    msg = str(e.value)
    assert "checkout:2: no file of this checkout matches 'native/build/sfc-nothing'" in msg
    assert "checkout:3: the Python distribution 'no-such-distribution-here'" in msg
    assert not any(c[:2] == ["podman", "build"] for c in runner.calls)
    assert image_build.build(image_recipes.pick(t, ["base"]), runner)[0]["built"] is False


@pytest.mark.parametrize("line", ["../etc/passwd", "/etc/passwd", "python a b", "python ../x",
                                  "src/x.py; rm -rf /"])
def test_a_bad_line_is_refused_naming_it(tmp_path: Path, checkout_at: Path,
                                         line: str) -> None:
    images = recipe_dir(tmp_path, f"src/**/*.py\n{line}\n")
    with pytest.raises(SpecError, match=r"checkout:2: expected a glob of the checkout"):
        image_recipes.table([images])
