"""Every example in every ``--help`` text runs: built from the parser itself, run in order
against real labs (the examples' own lab, chain5), each expected to exit 0."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.cli import EXAMPLES, build_parser

ROOT = Path(__file__).resolve().parents[2]
#: the order a person would run them in: build, use, measure, experiments, remove
ORDER = ("up", "ls", "inspect", "exec", "graph", "validate", "expand", "traffic", "run",
         "results", "report", "down")


def _parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [p]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                out += _parsers(sp)
    return out


def examples() -> list[str]:
    found: list[str] = []
    for p in _parsers(build_parser()):
        for line in (p.epilog or "").splitlines():
            line = line.strip()
            if line.startswith("sfclab "):
                cmd = re.split(r"\s{2,}", line)[0]  # drop the description column
                cmd = re.split(r"\s[|>]\s", cmd)[0]  # drop pipes and redirections
                if cmd not in found:
                    found.append(cmd)
    return sorted(found, key=lambda c: (ORDER.index(c.split()[1]), found.index(c)))


def test_examples_are_found() -> None:
    cmds = examples()
    assert any(c.startswith("sfclab up ") for c in cmds) and len(cmds) >= 15
    assert all(c.split()[1] in ORDER for c in cmds)
    assert "chain-length.yaml" not in EXAMPLES or "demo-chain-length.yaml" in EXAMPLES


def test_every_example_runs(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    results = tmp_path / "results.db"
    try:
        for cmd in examples():
            argv = shlex.split(cmd)
            argv = [str(results) if a == "results.db" else a for a in argv]
            argv = [str(tmp_path / "report") if a == "report/" else a for a in argv]
            cp = subprocess.run([sys.executable, "-m", "sfclab.cli", *argv[1:]], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=600)
            assert cp.returncode == 0, f"{cmd}\n{cp.stderr[-2000:]}"
    finally:
        subprocess.run([sys.executable, "-m", "sfclab.cli", "down", "--all"], cwd=ROOT, env=env,
                       capture_output=True, check=False)


@pytest.mark.parametrize("cmd", examples())
def test_every_example_parses(cmd: str) -> None:
    args = build_parser().parse_args(shlex.split(cmd)[1:])
    assert getattr(args, "fn", None) is not None
