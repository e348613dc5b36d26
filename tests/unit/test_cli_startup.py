"""Every ``sfclab`` command is a fresh Python, and the tests alone start hundreds: the commands
that read no lab, chain or measurement file (``--help``, ``ls``, ``inspect``, ``down``, ``chain
ls``, ``host ls``) load none of the file models (pydantic, about 0.1 s of CPU a command).  The
parser names the generator's engines and sinks in its help from :mod:`sfclab.spec.generator`,
not from the measurement request's models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pydantic", "sfclab.spec.lab", "sfclab.spec.measurement", "sfclab.spec.sfc")


def loaded_by(argv: list[str], state: Path) -> list[str]:
    """The modules of ``HEAVY`` loaded once ``sfclab ARGV`` has run in a fresh interpreter."""
    code = ("import contextlib, io, sys\n"
            "from sfclab.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), "
            "contextlib.redirect_stderr(io.StringIO()):\n"
            f"    main({argv!r})\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True, env={"SFCLAB_STATE_DIR": str(state), "PATH": "/usr/bin:/bin"})
    return cp.stdout.split()


@pytest.mark.parametrize("argv", [["--help"], ["ls", "--json"], ["inspect", "nolab"],
                                  ["down", "nolab"], ["chain", "ls", "nolab"],
                                  ["host", "ls", "nolab"], ["traffic", "--help"]],
                         ids=lambda a: " ".join(a))
def test_a_command_that_reads_no_file_loads_no_file_models(argv: list[str],
                                                           tmp_path: Path) -> None:
    assert loaded_by(argv, tmp_path) == []


def test_the_check_finds_a_heavy_import(tmp_path: Path) -> None:
    assert "pydantic" in loaded_by(["validate", str(ROOT / "scenarios" / "chain5.yaml")], tmp_path)


def test_the_web_server_loads_no_plotting_or_statistics() -> None:
    """``sfclab serve`` (a fresh Python for every web test) draws nothing itself (the page
    does, with Plotly) and computes an interval or a fit only when asked for one: matplotlib,
    scipy and numpy (about 2 s of CPU together) load then, not with the app."""
    code = ("import sys, sfclab.web.app; "
            "print(' '.join(m for m in ('matplotlib', 'scipy', 'numpy') if m in sys.modules))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True)
    assert cp.stdout.split() == []
