"""No local/remote branch outside the host runtimes: ``.emulated`` and ``is_remote`` (and the
runtime classes by name) are read only by the runtime package
(:mod:`sfclab.realize.runtime`), its running-lab operations (:mod:`sfclab.live.runtime`: the
interface :mod:`~sfclab.live.runtime.base`, its table and implementations, not the agent's
verbs; and :mod:`sfclab.live.hosts.join`, joining a host over SSH) and the plan model (which
defines ``emulated``).  The exceptions that
remain are listed with the number of uses each and why; the list may only shrink."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "sfclab"

#: where telling runtimes apart is the job
RUNTIME = ("realize/runtime/", "live/runtime/base.py", "live/runtime/table.py",
           "live/runtime/local", "live/runtime/ssh", "live/runtime/agents",
           "live/runtime/kubernetes", "live/hosts/join.py", "plan/")

#: what tells runtimes apart
WORDS = {"emulated", "is_remote", "LocalRuntime", "SshRuntime", "LocalLive", "SshLive"}

#: file -> uses left, and why each is not a branch to remove yet
EXCEPTIONS = {
    # the hosts part of the local build: a host's context is an emulated namespace here, or
    # (in a real host's agent, building its own part) that machine's root namespace
    "realize/hosts.py": 9,
    # the same for hosted links: a real host's tunnel ends are marked in its root namespace
    "realize/links/hosted.py": 2,
    # the agent marks the one host of the part it builds as a real machine (its own root)
    "realize/agent.py": 1,
    # a guard in the local runtime's own tunnel code (joining a host to the underlay):
    # tunnels of added instances are made between emulated hosts only
    "live/hosts/underlay.py": 1,
    # a host request's bounds: an emulated host's are this machine's CPUs and memory, a
    # machine's the limits (the kind of host asked for, not the lab's runtime)
    "live/ops/hostops.py": 3,
}


def _uses(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in WORDS:
            n += 1
        elif isinstance(node, ast.Name) and node.id in WORDS:
            n += 1
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in WORDS:
            n += 1
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in WORDS:
            n += 1
    return n


def _found() -> dict[str, int]:
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        if rel.startswith(RUNTIME) or rel in RUNTIME:
            continue
        n = _uses(ast.parse(f.read_text(), str(f)))
        if n:
            out[rel] = n
    return out


def test_no_local_or_remote_branch_outside_the_runtimes():
    found = _found()
    new = {f: n for f, n in found.items() if n > EXCEPTIONS.get(f, 0)}
    assert not new, f"local/remote branches outside the host runtimes: {new}"


def test_the_exceptions_only_shrink():
    """An exception that has fewer uses now is taken down to them (or out of the list)."""
    found = _found()
    stale = {f: (n, found.get(f, 0)) for f, n in EXCEPTIONS.items() if found.get(f, 0) < n}
    assert not stale, f"lower these exceptions (listed, found): {stale}"


def test_is_remote_is_defined_nowhere():
    """Which runtime a lab has is :func:`sfclab.realize.runtime.kind_for`'s answer alone."""
    defs = [f.relative_to(SRC).as_posix() for f in SRC.rglob("*.py")
            if any(isinstance(n, ast.FunctionDef) and n.name == "is_remote"
                   for n in ast.walk(ast.parse(f.read_text())))]
    assert defs == []


@pytest.mark.parametrize("code, uses", [
    ("if host.emulated:\n    pass\n", 1),
    ("from x import is_remote\nis_remote(s)\n", 2),
    ("rt = SshRuntime(s)\n", 1),
    ("rt = runtime_for(s)\nrt.up(lab, plan, say)\n", 0),
])
def test_the_check_sees_a_branch(code, uses):
    assert _uses(ast.parse(code)) == uses
