"""A host driven over SSH runs a fresh agent process for every call (``sfclab.hosts.ssh``), so
what the agent imports is paid on every call: the verbs that read and write a host's share of
the chains' data plane (``sfc-read``, ``sfc-probe``, ``sfc-classify``: every ``chain
inspect`` and ``trace`` step) load the data plane's maps and the plan as plain data, never the
lab file's models (``sfclab.spec.lab``, pydantic), which cost about 0.15 s of CPU a call.

The host part's verbs (``check``, ``up``, ``down``, ``inspect``), the chains' (``chain-make``,
``chain-tables``, ``chain-watch``, ...), the migration's (``conntrack-*``) and the health
watcher load no file models either when imported: a function's models (pydantic) are loaded
when a function is rebuilt from the plan (:func:`sfclab.functions.get`), and only then."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("sfclab.spec.lab", "sfclab.spec.sfc", "pydantic")
#: the modules of the agent's verbs (sfclab.live.runtime.agent_verbs) and of the watcher
LIGHT = ("sfclab.realize.agent_sfc", "sfclab.realize.agent", "sfclab.realize.build",
         "sfclab.realize.kinds", "sfclab.realize.teardown", "sfclab.realize.needs",
         "sfclab.live.runtime.agent_chain", "sfclab.live.runtime.agent_health",
         "sfclab.live.runtime.agent_conntrack", "sfclab.live.runtime.agent_proc",
         "sfclab.live.runtime.table",
         "sfclab.live.health.watch")


def loaded_by(module: str) -> list[str]:
    """The modules of ``HEAVY`` that importing ``module`` in a fresh interpreter loads."""
    code = (f"import sys, {module}; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True)
    return cp.stdout.split()


@pytest.mark.parametrize("module", LIGHT)
def test_the_agents_verbs_load_no_file_models(module: str) -> None:
    assert loaded_by(module) == []


def test_the_check_finds_a_heavy_import() -> None:
    assert "sfclab.spec.lab" in loaded_by("sfclab.plan.build")
