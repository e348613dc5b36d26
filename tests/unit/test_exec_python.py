"""``{python}`` as a function's program: the Python that runs sfclab (``sys.executable``), so a
function written in Python imports sfclab whatever ``python3`` comes first in ``PATH``."""

from __future__ import annotations

import sys
from pathlib import Path

from sfclab.functions.params import resolve_executable
from sfclab.spec.experiment import expand, load_experiment

ROOT = Path(__file__).resolve().parents[2]


def test_python_is_the_interpreter_running_sfclab(tmp_path, monkeypatch):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_executable("{python}", "exec") == sys.executable
    assert resolve_executable("python3", "exec") == str(fake)  # a plain name still searches


def test_the_trellis_userspace_variant_runs_sfclabs_python():
    points = expand(load_experiment(ROOT / "scenarios" / "trellis-forwarding.yaml"))
    lab = next(p.lab for p in points if p.params.get("variant") == "userspace")
    argv = lab["nodes"]["nut"]["exec"]
    assert argv[1:] == ["-m", "sfclab.functions.examples.tun_count"]
    assert resolve_executable(argv[0], "exec") == sys.executable
