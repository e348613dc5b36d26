"""The command line's exit-status contract, in process and without root: 0 for success, 1 for
a failure of the machine, 2 for bad input (a file, an option, an unknown lab), one line each.
And the examples of every ``--help``: each parses; those that need neither root nor a running
lab (``validate``, ``expand``, ``graph FILE``, ``ls``) run.  (The integration tests run them
all against real labs.)"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from sfclab.cli import EXAMPLES, build_parser, main
from sfclab.cli.status import ExitStatus
from sfclab.realize.kinds import load_lab
from tests.help_examples import ORDER, examples

ROOT = Path(__file__).resolve().parents[2]
GOOD = str(ROOT / "scenarios" / "chain5.yaml")


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No real lab state is read or written."""
    d = tmp_path / "state"
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(d))
    return d


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("sfclab: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_validate_and_expand_a_good_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", GOOD]) == ExitStatus.OK
    assert "is valid" in capsys.readouterr().out
    assert main(["expand", GOOD]) == ExitStatus.OK
    assert "name: chain5" in capsys.readouterr().out
    assert main(["validate", GOOD, "--json"]) == ExitStatus.OK


@pytest.mark.parametrize("command", ["validate", "expand"])
def test_a_bad_file_is_bad_input_with_file_line_and_place(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\nnodes:\n  a: {kind: host}\n  b: {kind: hots}\n")
    assert main([command, str(f)]) == ExitStatus.BAD_INPUT
    assert error_line(capsys).startswith(f"sfclab: error: {f}:4: nodes.b.kind: unknown kind")


@pytest.mark.parametrize("argv", [["frobnicate"], ["ls", "--colour"], ["up"],
                                  ["validate"], ["graph", GOOD, "--format", "png"],
                                  ["traffic", "rate", "lab"], ["down"]])
def test_bad_options_are_bad_input(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == ExitStatus.BAD_INPUT
    error_line(capsys)


@pytest.mark.parametrize("argv", [["inspect", "nosuch"], ["down", "nosuch"],
                                  ["exec", "nosuch", "src", "--", "true"],
                                  ["graph", "nosuch"], ["inspect", "../etc"]])
def test_unknown_labs_are_bad_input(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == ExitStatus.BAD_INPUT
    line = error_line(capsys)
    assert "no lab named" in line or "expected a lab name" in line


def test_version_help_and_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == ExitStatus.OK
    assert capsys.readouterr().out.startswith("sfclab ")
    assert main(["--help"]) == ExitStatus.OK
    assert "examples:" in capsys.readouterr().out
    assert main([]) == ExitStatus.BAD_INPUT


def test_ls_with_no_labs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls"]) == ExitStatus.OK
    assert capsys.readouterr().out.strip() == "no labs"
    assert main(["ls", "--json"]) == ExitStatus.OK
    assert capsys.readouterr().out.strip() == "[]"


def test_exit_statuses_are_the_documented_numbers() -> None:
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 130]


# ------------------------------------------------------------------ the --help examples

#: commands whose examples run here: they read a file or the (empty) state, never a lab
NO_LAB_NEEDED = ("validate", "expand", "graph", "ls")


def lab_files() -> dict[str, str]:
    """The examples' labs by name: the files their ``sfclab up FILE`` examples build."""
    ups = [shlex.split(c)[2] for c in examples() if c.split()[1] == "up"]
    return {load_lab(str(ROOT / f)).name: f for f in ups}


def test_examples_are_found() -> None:
    cmds = examples()
    assert any(c.startswith("sfclab up ") for c in cmds) and len(cmds) >= 15
    assert all(c.split()[1] in ORDER for c in cmds)
    assert "chain-length.yaml" not in EXAMPLES or "demo-chain-length.yaml" in EXAMPLES
    assert {c.split()[1] for c in cmds} >= set(NO_LAB_NEEDED)


@pytest.mark.parametrize("cmd", examples())
def test_every_example_parses(cmd: str) -> None:
    argv = shlex.split(cmd)[1:]
    args = build_parser().parse_args(argv)  # a refused option exits (SystemExit): a failure
    assert args.cmd == argv[0] and getattr(args, "fn", None) is not None


@pytest.mark.parametrize("cmd", [c for c in examples() if c.split()[1] in NO_LAB_NEEDED])
def test_examples_that_need_no_lab_run(cmd: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)  # the examples name files relative to the repository
    argv = shlex.split(cmd)[1:]
    if argv[0] == "graph":  # the running lab's picture, drawn from the file it is built from
        argv[1] = lab_files()[argv[1]]
    assert main(argv) == ExitStatus.OK
    out = capsys.readouterr()
    assert out.out.strip() and not out.err, out.err
