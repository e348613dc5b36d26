"""The examples printed by ``sfclab --help`` and by each command's ``--help``, read from the
parser itself (its epilogs), so the tests that check them cannot miss a new one.

Both tiers use them: ``tests/unit/test_cli.py`` parses every example and runs, in process, those
that need neither root nor a running lab; ``tests/integration/test_help_examples.py`` runs them
all, in order, against real labs."""

from __future__ import annotations

import argparse
import re

from sfclab.cli import build_parser

#: the order a person would run them in: images, build, use, measure, experiments, remove
ORDER = ("image", "up", "ls", "inspect", "exec", "graph", "validate", "expand", "chain", "host",
         "traffic", "run", "results", "report", "serve", "down")


def parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``p`` and every subcommand's parser under it."""
    out = [p]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                out += parsers(sp)
    return out


def examples() -> list[str]:
    """Every distinct ``sfclab ...`` example line, without its description, pipes and
    redirections, in :data:`ORDER`."""
    found: list[str] = []
    for p in parsers(build_parser()):
        for line in (p.epilog or "").splitlines():
            line = line.strip()
            if line.startswith("sfclab "):
                cmd = re.split(r"\s{2,}", line)[0]  # drop the description column
                cmd = re.split(r"\s[|>]\s", cmd)[0]  # drop pipes and redirections
                if cmd not in found:
                    found.append(cmd)
    return sorted(found, key=lambda c: (ORDER.index(c.split()[1]), found.index(c)))
