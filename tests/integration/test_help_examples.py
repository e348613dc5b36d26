"""Every example in every ``--help`` text runs: read from the parser itself, run against real
labs (the examples' own lab, chain5), each expected to exit 0.  That each one parses, and that
those needing no lab run, the unit tests check (``tests/unit/test_cli.py``).

The examples run in lanes (``tests/example_lanes.py``): examples that touch nothing in common run
at once, each lane's in order; the measurements on chain5 are spread over copies of it.

The examples name labs a person would have (``chain5``, the experiment's ``demo``); a test must
not meet a person's lab of that name on the machine it runs on, so each lane copies the files
its examples name with their labs renamed to names of its own, and the examples' words
follow."""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.example_lanes import lanes
from tests.help_examples import examples

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
#: how many copies of chain5 its measurement examples are spread over (the slowest, three NDR
#: searches, each get one)
COPIES = 3


def lab_files(cmds: list[str]) -> dict[str, str]:
    """The lab (or experiment) files the examples name, each with the name of its lab."""
    out: dict[str, str] = {}
    for cmd in cmds:
        for word in shlex.split(cmd):
            if word.endswith(".yaml") and word not in out:
                doc = yaml.safe_load((ROOT / word).read_text())
                if isinstance(doc, dict) and "name" in doc:
                    out[word] = (doc["lab"] if isinstance(doc.get("lab"), dict) else doc)["name"]
    return out


def renamed_copies(cmds: list[str], into: Path) -> dict[str, str]:
    """Copy every ``.yaml`` file the examples name into ``into`` with each lab renamed; return
    the words to replace in the examples (file paths and lab names)."""
    token = secrets.token_hex(3)
    words: dict[str, str] = {}
    for cmd in cmds:
        for word in shlex.split(cmd):
            if not word.endswith(".yaml") or word in words:
                continue
            doc = yaml.safe_load((ROOT / word).read_text())
            if not isinstance(doc, dict) or "name" not in doc:
                continue  # not a lab or experiment file (a list of classifiers, ...)
            lab = doc["lab"] if isinstance(doc.get("lab"), dict) else doc
            new = f"{lab['name']}{token}"
            words[lab["name"]] = new
            lab["name"] = new
            copy = into / Path(word).name
            copy.write_text(yaml.safe_dump(doc, sort_keys=False))
            words[word] = str(copy)
    return words


def run_server(cmd: str, argv: list[str], env: dict[str, str]) -> None:
    """Start a ``serve`` example, wait until its API answers, stop it with SIGTERM: exit 0."""
    listen = argv[argv.index("--listen") + 1] if "--listen" in argv else "127.0.0.1:8470"
    proc = subprocess.Popen([sys.executable, "-m", "sfclab.cli", *argv[1:]], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, text=True)
    # the token: the example's --token-file, or the one serve makes in the state directory
    token_file = Path(argv[argv.index("--token-file") + 1] if "--token-file" in argv
                      else Path(env["SFCLAB_STATE_DIR"]) / "serve.token")
    try:
        for _ in range(300):
            try:
                req = urllib.request.Request(f"http://{listen}/api/labs", headers={
                    "Authorization": f"Bearer {token_file.read_text().strip()}"})
                urllib.request.urlopen(req, timeout=1).read()
                break
            except OSError:
                assert proc.poll() is None, f"{cmd}\n{proc.stderr.read() if proc.stderr else ''}"
                time.sleep(0.05)
        else:
            raise AssertionError(f"{cmd}: no answer on {listen}")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, f"{cmd}\n{proc.stderr.read() if proc.stderr else ''}"


def run_lane(cmds: list[str], into: Path, env: dict[str, str]) -> str | None:
    """Run one lane's examples in order, on its own renamed copies; stop at the first that
    fails (the rest may need it) and say which, with its error."""
    into.mkdir()
    words = renamed_copies(cmds, into)
    words |= {"results.db": str(into / "results.db"), "report/": str(into / "report")}
    for cmd in cmds:
        argv = [words.get(a, a) for a in shlex.split(cmd)]
        try:
            if argv[1] == "serve":  # runs until stopped: it must answer, then stop cleanly
                run_server(cmd, argv, env)
                continue
            cp = subprocess.run([sys.executable, "-m", "sfclab.cli", *argv[1:]], cwd=ROOT,
                                env=env, capture_output=True, text=True, timeout=600)
        except (AssertionError, subprocess.TimeoutExpired) as e:
            return f"{cmd}\n{e}"
        if cp.returncode != 0:
            return f"{cmd}: exit {cp.returncode}\n{cp.stderr[-2000:]}"
    return None


def test_every_example_runs(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmds = examples()
    files = lab_files(cmds)
    assert "chain5" in files.values(), "the examples' lab is no longer chain5: update this test"
    plan = lanes(cmds, {**files, **{lab: lab for lab in files.values()}}, COPIES)
    try:
        with ThreadPoolExecutor(len(plan)) as pool:
            failed = [f for f in pool.map(lambda n: run_lane(plan[n], tmp_path / f"lane{n}", env),
                                          range(len(plan))) if f]
    finally:
        subprocess.run([sys.executable, "-m", "sfclab.cli", "down", "--all"], cwd=ROOT, env=env,
                       capture_output=True, check=False)
    assert not failed, "\n\n".join(failed)
