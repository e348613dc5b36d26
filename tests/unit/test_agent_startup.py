"""A host driven over SSH runs a fresh agent process for every call (``sfclab.hosts.ssh``), so
what the agent imports is paid on every call: the verbs that read and write a host's share of
the chains' data plane (``sfc-read``, ``sfc-probe``, ``sfc-classify``: every ``chain
inspect`` and ``trace`` step) load the data plane's maps and the plan as plain data, never the
lab file's models (``sfclab.spec.lab``, pydantic), which cost about 0.15 s of CPU a call."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("sfclab.spec.lab", "sfclab.spec.sfc", "sfclab.plan.sfc", "pydantic")


def loaded_by(module: str) -> list[str]:
    """The modules of ``HEAVY`` that importing ``module`` in a fresh interpreter loads."""
    code = (f"import sys, {module}; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True)
    return cp.stdout.split()


def test_the_agents_data_plane_verbs_load_no_lab_file_models() -> None:
    assert loaded_by("sfclab.realize.agent_sfc") == []


def test_the_check_finds_a_heavy_import() -> None:
    assert "sfclab.spec.lab" in loaded_by("sfclab.plan.sfc")
