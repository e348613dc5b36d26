"""A recipe that takes files from this checkout (:mod:`sfclab.kernel.image_checkout`): the
agent's recipe covers what the agent imports, staged files are part of the version, what is
missing refuses only that recipe's build, and the build context holds the staged files."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sfclab.errors import SpecError
from sfclab.kernel import image_build, image_checkout, image_recipes
from sfclab.kernel.image_build import Done

from .test_images import BUILTIN, FakeRunner

AGENT_MODULES = ("sfclab.realize.runtime.kubernetes_agent", "sfclab.live.runtime.agent_verbs",
                 "sfclab.realize.agent")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_agents_recipe_covers_what_the_agent_imports() -> None:
    """Every module outside the standard library that the agent's own modules (and the host
    agent's verbs it runs) import comes from a distribution the recipe stages."""
    def loaded(imports: str) -> set[str]:
        code = (f"import sys, json, importlib\n{imports}\n"
                "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
        return set(json.loads(subprocess.run([sys.executable, "-c", code], check=True,
                                             text=True, capture_output=True).stdout))

    # what Python's own start-up loads (a virtualenv's .pth hooks) is not the agent's
    start = loaded("")
    agent = loaded(f"for m in {AGENT_MODULES!r}: importlib.import_module(m)\n"
                   "from sfclab.live.runtime.agent_verbs import MODULES\n"
                   "for m in MODULES: importlib.import_module(m)") - start
    owners = importlib.metadata.packages_distributions()
    needed = {_norm(d) for m in agent if m not in sys.stdlib_module_names and m != "sfclab"
              for d in owners.get(m, [])}
    assert {"pydantic", "pyyaml"} <= needed  # the check sees what it should
    text = (BUILTIN / "agent" / "checkout").read_text()
    staged = {_norm(w) for w in re.findall(r"^python (\S+)", text, re.M)}
    assert needed <= staged, f"the agent imports {sorted(needed - staged)}, not staged"


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
