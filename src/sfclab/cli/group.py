"""A command group (``sfclab chain ...``, ``sfclab host ...``): the group's parser, its help
when no subcommand is given, and :data:`One`, which adds a subcommand taking a lab name and
``--json``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .status import ExitStatus

#: ``one(name, fn, help, example)``: a subcommand of the group taking ``LAB`` and ``--json``
One = Callable[[str, Callable[[argparse.Namespace], int], str, str], argparse.ArgumentParser]


def _group_help(a: argparse.Namespace) -> int:
    """The group without a subcommand: its help, and bad input."""
    a.parser.print_help()
    return ExitStatus.BAD_INPUT


def command_group(add: Callable[..., argparse.ArgumentParser], name: str, help: str,
                  example: str, examples: str) -> One:
    """Register group ``name`` through the top-level ``add``; return its :data:`One`."""
    sp = add(name, _group_help, help, example, json_flag=False)
    sp.epilog = examples
    sp.set_defaults(parser=sp)
    inner = sp.add_subparsers(dest=f"{name}_cmd", metavar="SUBCOMMAND", parser_class=type(sp))

    def one(sub: str, fn: Callable[[argparse.Namespace], int], help: str,
            example: str) -> argparse.ArgumentParser:
        p = inner.add_parser(sub, help=help, description=help, epilog="example:\n  " + example,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(fn=fn)
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument("name", metavar="LAB")
        return p

    return one
